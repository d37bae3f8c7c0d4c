//! Kernel selection: an operator information table per op and chip; keeps the user dtype and format where supported, otherwise inserts casts and format conversions and reports their cost.
