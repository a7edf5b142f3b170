//! Process-level helpers of the CLI: the rayon thread pool, peak RSS, human-readable sizes.

use anyhow::{Context, Result};

/// Runs `f` inside a rayon pool of `threads` threads (0 = one per core).
pub fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("creating the thread pool")?;
    Ok(pool.install(f))
}

/// Peak resident set size of this process so far, in bytes.
///
/// Read from `VmHWM` in `/proc/self/status`, the high-water mark of this process's own address
/// space. `getrusage`'s `ru_maxrss` is not used: across `exec` it keeps the peak of the process
/// that forked us (e.g. a Python driver), which inflates small figures.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let kib = line
                    .strip_prefix("VmHWM:")?
                    .trim()
                    .strip_suffix("kB")?
                    .trim();
                kib.parse::<u64>().ok()
            })
        })
        .map_or(0, |kib| kib * 1024)
}

pub use trawl::progress::human_bytes;

/// Reads a vector file and checks that it holds no NaN or ±inf, naming the file (base or
/// queries) in the error.
pub fn read_vectors(path: &std::path::Path) -> Result<trawl::data::matrix::AnyMatrix> {
    let m = trawl::data::read::read_matrix_any(path)?;
    if let trawl::data::matrix::AnyMatrix::F32(f) = &m {
        trawl::data::validate_finite(f).map_err(|e| e.in_file(path))?;
    }
    Ok(m)
}

/// [`read_vectors`] for a build under a memory budget: a .fbin/.u8bin/.i8bin or .npy file is
/// memory-mapped instead of read (the build then drops its pages behind each pass, so the
/// file does not count against the budget as a whole); other formats are read. The file must
/// not be truncated or rewritten while the build runs.
pub fn map_vectors(path: &std::path::Path) -> Result<trawl::data::matrix::AnyMatrix> {
    use trawl::data::format::{probe_with, ProbeOptions};
    use trawl::data::matrix::AnyMatrix;
    use trawl::DType;
    let info = probe_with(path, ProbeOptions::default())?;
    let opts = ProbeOptions {
        format: Some(info.format),
        dtype: Some(info.dtype),
        fallback_dtype: None,
    };
    let m = match info.dtype {
        DType::F32 => AnyMatrix::F32(trawl::data::read::map_matrix(path, opts)?),
        DType::U8 => AnyMatrix::U8(trawl::data::read::map_matrix(path, opts)?),
        DType::I8 => AnyMatrix::I8(trawl::data::read::map_matrix(path, opts)?),
    };
    if let AnyMatrix::F32(f) = &m {
        trawl::data::validate_finite(f).map_err(|e| e.in_file(path))?;
    }
    Ok(m)
}

/// Writes `value` as pretty-printed JSON to `path`.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn rss_is_positive() {
        assert!(peak_rss_bytes() > 0);
    }
}

/// `--layout`: a layout, or `auto` (the memory planner picks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutArg {
    /// The planner picks (needs a memory budget).
    Auto,
    /// This layout.
    Named(trawl::kinds::graph::IndexLayout),
}

impl LayoutArg {
    /// The named layout (packed for `auto`, which the plan replaces).
    pub fn named(self) -> trawl::kinds::graph::IndexLayout {
        match self {
            LayoutArg::Auto => trawl::kinds::graph::IndexLayout::Packed,
            LayoutArg::Named(l) => l,
        }
    }
}

impl std::str::FromStr for LayoutArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(LayoutArg::Auto);
        }
        s.parse::<trawl::kinds::graph::IndexLayout>()
            .map(LayoutArg::Named)
            .map_err(|e| format!("{e}, or auto"))
    }
}
