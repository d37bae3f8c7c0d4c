pub mod conv;
pub mod hlo;
pub mod ops;
pub mod records;
