//! Distance kernel benchmarks (filled in with the SIMD kernels).
fn main() {}
