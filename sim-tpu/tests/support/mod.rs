pub mod conv;
pub mod hlo;
pub mod records;
