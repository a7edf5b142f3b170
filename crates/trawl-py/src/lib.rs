//! Python bindings of trawl: `trawl._trawl`, re-exported by the `trawl` package.
//!
//! Thin over the library: `build` wraps [`trawl::index::build_index`], `Index` a
//! [`DiskIndex`] with a pool of I/O engines for single queries, `batch_search`
//! [`DiskIndex::search_rows`]. numpy arrays are read in place when C-contiguous; results
//! come back as arrays that own the library's buffers (no copy). Every call that reads the
//! disk or computes releases the GIL; `build` polls for Ctrl-C while it runs.

mod arrays;
mod build;
mod errors;
mod index;
mod params;
mod pyjson;

use pyo3::prelude::*;

/// Native part of the `trawl` package (import `trawl`, not this module).
#[pymodule]
fn _trawl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MISSING_ID", u32::MAX)?;
    m.add_class::<params::BuildParams>()?;
    m.add_class::<params::SearchParams>()?;
    m.add_class::<index::Index>()?;
    m.add_function(wrap_pyfunction!(build::build, m)?)?;
    Ok(())
}
