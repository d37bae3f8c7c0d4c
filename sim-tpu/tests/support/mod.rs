pub mod hlo;
pub mod records;
