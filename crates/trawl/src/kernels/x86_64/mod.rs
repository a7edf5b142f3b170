//! x86-64 SIMD kernels, one file per instruction set.
