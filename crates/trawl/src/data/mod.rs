//! Vector data: in-memory and memory-mapped matrices, and the vector / ground-truth file formats.

pub mod matrix;

pub use matrix::Matrix;
