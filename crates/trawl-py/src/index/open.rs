//! Opening an [`Index`]: `Index.open`'s keyword arguments converted to the library's
//! options, and the handle built from the index the library opens with them.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use trawl::accel::AccelKind;
use trawl::io::EngineKind;
use trawl::kinds::graph::search::CachePolicy;
use trawl::kinds::graph::updates::live::Durability;
use trawl::kinds::ivf::IvfVectorLayout;
use trawl::kinds::{AnyIndex, GraphIndex, Options};
use trawl::progress::Control;
use trawl::search::QueryStats;

use super::Index;
use crate::errors::{invalid, PyResultExt};
use crate::params::count;

/// `Index.open`'s keyword arguments as the library's options (its defaults for the ones not
/// given; the library checks the values). Every open option of the library that Python names:
/// `layout` (or "auto": the planner picks it within `memory_budget`), `engine`, `direct`, `verify_pages`, `cache_nodes`, `cache_policy`,
/// `list_cache_mb`, `list_pin`, `refine_bits`, `queue_depth` (None: automatic), `writable`,
/// `durability`, `accel`, `ivf_vectors`, `memory_budget` (bytes, or a size such as "512M"),
/// `warm` ("wait" or "background").
pub(super) fn open_options(kw: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options {
        threads: std::thread::available_parallelism().map_or(1, |c| c.get()),
        ..Options::default()
    };
    for (k, v) in kw.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        let text = |v: &Bound<'_, PyAny>| -> PyResult<String> { v.extract::<String>() };
        let parsed = |what: &str, e: String| invalid(format!("{what}: {e}"));
        match key.as_str() {
            "layout" => match text(&v)?.as_str() {
                // The memory planner picks it (with `memory_budget`).
                "auto" => o.layout_auto = true,
                l => o.layout = l.parse().map_err(|e| parsed("layout", e))?,
            },
            "engine" => {
                o.engine = text(&v)?
                    .parse::<EngineKind>()
                    .map_err(|e| parsed("engine", e.to_string()))?
            }
            "direct" => o.direct = v.extract()?,
            "verify_pages" => o.verify_pages = v.extract()?,
            "cache_nodes" => o.cache_nodes = count("cache_nodes", v.extract()?, 0)?,
            "cache_policy" => {
                o.cache_policy = text(&v)?
                    .parse::<CachePolicy>()
                    .map_err(|e| parsed("cache_policy", e))?
            }
            "list_cache_mb" => o.list_cache_mb = v.extract()?,
            "list_pin" => o.list_pin = v.extract()?,
            "refine_bits" => {
                let b: i64 = v.extract()?;
                o.refine_bits = u8::try_from(b)
                    .map_err(|_| invalid(format!("refine_bits = {b}: expected 0 (off), 4 or 8")))?
            }
            "queue_depth" => {
                let d: Option<i64> = v.extract()?;
                o.queue_depth = d.map(|d| count("queue_depth", d, 1)).transpose()?
            }
            "writable" => o.writable = v.extract()?,
            "memory_budget" => {
                o.memory_budget = if v.is_none() {
                    None
                } else if let Ok(b) = v.extract::<i64>() {
                    Some(count("memory_budget", b, 1)? as u64)
                } else {
                    Some(
                        trawl::kinds::plan::parse_bytes(&text(&v)?)
                            .map_err(|e| parsed("memory_budget", e))?,
                    )
                }
            }
            "warm" => {
                o.warm_background = match text(&v)?.as_str() {
                    "wait" => false,
                    "background" => true,
                    other => {
                        return Err(invalid(format!(
                            "warm = {other:?}: expected \"wait\" or \"background\""
                        )))
                    }
                }
            }
            "durability" => {
                o.durability = match text(&v)?.as_str() {
                    "sync" => Durability::Sync,
                    "buffered" => Durability::Buffered,
                    other => {
                        return Err(invalid(format!(
                            "durability = {other:?}: expected \"sync\" or \"buffered\""
                        )))
                    }
                }
            }
            "accel" => {
                o.accel = text(&v)?
                    .parse::<AccelKind>()
                    .map_err(|e| parsed("accel", e))?
            }
            "ivf_vectors" => {
                o.ivf_vectors = text(&v)?
                    .parse::<IvfVectorLayout>()
                    .map_err(|e| parsed("ivf_vectors", e))?
            }
            other => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "Index.open() got an unexpected keyword argument {other:?}"
                )))
            }
        }
    }
    Ok(o)
}

impl Index {
    /// Opens the index in `index_dir` with `opts` (the GIL released) and builds the handle:
    /// the cache report of the open, whether searches go through the live index from the
    /// start, and the layout (or IVF vector layout) and accelerator it names.
    pub(super) fn open_with(py: Python<'_>, index_dir: PathBuf, opts: Options) -> PyResult<Self> {
        let writable = opts.writable;
        let dir = index_dir.as_path();
        let (ix, report) = py
            .detach(|| trawl::kinds::open_with(dir, &opts, &Control::silent()))
            .py()?;
        let mut cache = serde_json::to_value(report.cache).unwrap_or_default();
        if let Some(p) = report.pinned {
            cache["pinned_lists"] = serde_json::to_value(p).unwrap_or_default();
        }
        if let Some(r) = report.refine {
            cache["refine"] = serde_json::to_value(r).unwrap_or_default();
        }
        if let Some(p) = report.plan {
            cache["memory_plan"] = serde_json::to_value(p).unwrap_or_default();
        }
        // Searches go through the live index from the first update on: one at open, or the
        // first write through this handle (a writer holds the lock: nobody else adds any).
        let updated = match ix.graph().and_then(|g| g.live()) {
            Some(l) => !l.is_writable() || GraphIndex::has_updates(dir),
            None => false,
        };
        let (layout, accel) = match &ix {
            AnyIndex::Ivf(iv) => (iv.options().ivf_vectors.name(), iv.accel().info().backend),
            AnyIndex::Graph(g) => (g.disk().options().layout.name(), ""),
            AnyIndex::Sharded(sh) => (sh.shards()[0].options().layout.name(), ""),
            // A kind with one layout of its own: named as the kind.
            other => (other.kind().name(), ""),
        };
        Ok(Self {
            dir: index_dir.clone(),
            dim: ix.dim(),
            dtype: ix.dtype(),
            metric: ix.metric(),
            kind: ix.kind(),
            layout,
            accel,
            writable,
            options: opts,
            state: Mutex::new(Some(Arc::new(ix))),
            updated: AtomicBool::new(updated),
            live_n: Mutex::new(None),
            write_lock: Mutex::new(()),
            totals: Mutex::new((0, QueryStats::default())),
            last: Mutex::new(Vec::new()),
            cache,
        })
    }
}
