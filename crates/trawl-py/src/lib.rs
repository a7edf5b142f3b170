//! Python bindings of trawl: `trawl._trawl`, re-exported by the `trawl` package.
//!
//! Thin over the library: `build` wraps [`trawl::kinds::build_with`] (every kind, chosen by
//! `BuildParams(kind=...)`); `Index` wraps [`trawl::kinds::AnyIndex`], opened through the
//! library's one options layer ([`trawl::kinds::open_with`]) and searched through its one
//! contract (a graph index with updates is a `LiveIndex`: `insert` / `upsert` / `delete` /
//! `merge` / `flush`). Filtered search: `build`'s `labels` / `attrs` and the searches'
//! `filter` ([`filters`]). Result ids are `u64` everywhere. numpy arrays are read
//! in place when C-contiguous; results come back as arrays that own their buffers. Every
//! call that reads the disk, writes or computes releases the GIL; `build` and `merge` poll
//! for Ctrl-C while they run.

mod arrays;
mod build;
mod errors;
mod filters;
mod index;
mod params;
mod pyjson;
mod shard;

use pyo3::prelude::*;

/// Native part of the `trawl` package (import `trawl`, not this module).
#[pymodule]
fn _trawl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MISSING_ID", index::MISSING_ID)?;
    m.add_class::<params::BuildParams>()?;
    m.add_class::<params::SearchParams>()?;
    m.add_class::<index::Index>()?;
    m.add_function(wrap_pyfunction!(build::build, m)?)?;
    m.add_function(wrap_pyfunction!(filters::filtered_ground_truth, m)?)?;
    m.add_class::<shard::ShardedIndex>()?;
    m.add_function(wrap_pyfunction!(shard::build_sharded, m)?)?;
    m.add_function(wrap_pyfunction!(shard::plan_shards, m)?)?;
    m.add_function(wrap_pyfunction!(shard::build_shard, m)?)?;
    m.add_function(wrap_pyfunction!(shard::finish_sharded, m)?)?;
    m.add_function(wrap_pyfunction!(shard::shard_manifest, m)?)?;
    Ok(())
}
