//! One cached runtime choice of kernel implementations for this CPU.

use std::sync::OnceLock;

use super::scalar;

/// A table of distance kernels for one instruction set.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// Name of the instruction set (`scalar`, `avx2`, `avx512`).
    pub name: &'static str,
    /// Squared L2, f32.
    pub l2_f32: fn(&[f32], &[f32]) -> f32,
    /// Inner product, f32.
    pub dot_f32: fn(&[f32], &[f32]) -> f32,
    /// Squared L2, u8.
    pub l2_u8: fn(&[u8], &[u8]) -> f32,
    /// Inner product, u8.
    pub dot_u8: fn(&[u8], &[u8]) -> f32,
    /// Squared L2, i8.
    pub l2_i8: fn(&[i8], &[i8]) -> f32,
    /// Inner product, i8.
    pub dot_i8: fn(&[i8], &[i8]) -> f32,
}

/// The scalar reference table.
pub const SCALAR: Kernels = Kernels {
    name: "scalar",
    l2_f32: scalar::l2_f32,
    dot_f32: scalar::dot_f32,
    l2_u8: scalar::l2_u8,
    dot_u8: scalar::dot_u8,
    l2_i8: scalar::l2_i8,
    dot_i8: scalar::dot_i8,
};

static KERNELS: OnceLock<Kernels> = OnceLock::new();

/// The best kernels this CPU supports, detected once.
#[inline]
pub fn kernels() -> &'static Kernels {
    KERNELS.get_or_init(detect)
}

fn detect() -> Kernels {
    SCALAR
}
