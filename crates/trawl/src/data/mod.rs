//! Vector data: in-memory and memory-mapped matrices, and the vector / ground-truth file formats.

pub mod groundtruth;
pub mod matrix;

pub use groundtruth::GroundTruth;
pub use matrix::Matrix;
