//! Capacity accounting per memory space (HBM, VMEM, CMEM, Spmem, TileSpmem, host) with static allocation and peak tracking; over-capacity is a typed error carrying the numbers.
