//! Systolic-array cycle counts compatible with SCALE-Sim (config and topology files, COMPUTE_REPORT columns).
