//! x86-64 SIMD kernels, one file per instruction set.
//!
//! Each module exposes `table()`, which returns its [`Kernels`](crate::kernels::dispatch::Kernels)
//! table only when the running CPU has every feature its kernels use; that check is what makes
//! the safe function pointers in the table sound.

pub mod avx2;
pub mod avx512;
