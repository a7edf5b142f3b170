//! The graph kind's memory plan ([`crate::kinds::plan`]): from the layout's header and
//! checksum table and the other files' sizes, before anything else is loaded.
//!
//! Required, in this order: the PQ codebooks, the layout's handle (page checksums; PageShuffle's
//! order; the decoupled layout's sparse index and vector metadata), the PQ codes (not for
//! All-in-Storage, whose records carry them), the attributes and label start nodes when the
//! index has them, and the search threads' buffers (each thread's engine slots, and per query
//! in flight its visited set). When the codes do not fit and the index has an All-in-Storage
//! layout, the plan takes it instead. Then, while the budget lasts:
//!
//! 1. the static node cache (record layouts: the hot-node order's first nodes, each saving
//!    the reads [`crate::kinds::graph::hot::HotOrder::reads_saved`] counts), capped where
//!    every node fits; or, on the decoupled layout, the list cache (the hot-node order's most
//!    read lists pinned at open, else an LRU filled as searches run) and the refinement codes
//!    (`refine.trawl`), split the way expected to leave the fewest reads (measured on gen-1M:
//!    the plan read the fewest pages at every budget from 64 MiB to 384 MiB; at 256 MiB the
//!    codes and every list pinned read 23.0 pages per query at recall 0.90, every list pinned
//!    alone 31.1, the plan's split with an LRU 41.1; `bench/results/memory-budget-gen-1m-decoupled.md`);
//! 2. the entry index, with what is left (not on All-in-Storage, whose searches cannot seed
//!    from it). Measured on gen-1M at 48 MiB: the entry index and 17,450 cached nodes read
//!    29.1 pages per query at recall 0.90, its bytes given to the cache instead 23.5 — the
//!    cache holds the nodes searches from the medoid read most, and seeds from the entry
//!    index skip them (`bench/results/memory-budget-gen-1m.md`).
//!
//! A writable open's update delta gets a quarter of what is left above the minimum first.
//!
//! **Picking the layout** ([`plan_auto`]): each record layout the index has is planned, and
//! the one whose cache leaves the fewest expected reads wins (the hot-node order's counts;
//! shuffle's scaled by [`PAGE_SEARCH_READS`]); decoupled only when no record layout fits.
//! Measured against every layout at eight budgets (`bench/results/memory-budget-gen-1m.md`,
//! pages per query at recall 0.90, exact counts): the pick read the fewest pages at each —
//! All-in-Storage below packed's minimum and just above it (24.4 pages at 33 MiB against
//! packed's 36.0: its records carry the codes, so the bytes go to the cache), shuffle with
//! PageSearch from 48 MiB (19.4 against packed's 23.2), packed once every node is cached.
//!
//! Loads that need a transient copy are planned at their peak: the entry index is read whole
//! and then parsed, so it is granted only when the budget holds it and its file.

use std::path::Path;

use crate::kinds::graph::hot::{self, HotOrder};
use crate::kinds::graph::refine_file::{self, RefineHeader};
use crate::kinds::graph::search::{ListCache, NodeCache, PinnedLists};
use crate::kinds::graph::{IndexLayout, OpenError, OpenOptions, PQ_CODES_FILE, PQ_FILE};
use crate::kinds::plan::{human, payload_bytes as payload, MemoryPlan, PlanError, PlanItem};

/// What a plan depends on besides the index's files.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanAsk {
    /// The budget, bytes.
    pub budget: u64,
    /// The layout asked for (the plan may take All-in-Storage instead when codes do not fit).
    pub layout: IndexLayout,
    /// Search threads.
    pub threads: usize,
    /// Queries each thread keeps in flight.
    pub interleave: usize,
    /// Reads in flight per thread (engine slots).
    pub queue_depth: usize,
    /// Opened for updates: the update delta and a write's log buffer get a share.
    pub writable: bool,
    /// The open takes the decoupled layout's pinned lists and refinement codes when the plan
    /// grants them (a graph index's open; not a shard's, whose sharded open takes neither).
    pub static_uses: bool,
}

/// Vectors the update delta of a writable open holds at least (one linking chunk).
pub const DELTA_MIN_VECTORS: u64 = 256;

/// Why a graph index cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum GraphPlanError {
    /// The index's files.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The budget.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// The required items of `layout` in `dir`, and the facts the optional ones need.
struct Base {
    items: Vec<PlanItem>,
    n: usize,
    /// Pages a record read takes.
    record_pages: usize,
    /// The PQ codes' payload CRC (the hot-node order's tag).
    tag: u32,
    record_bytes: usize,
    list_entry_bytes: usize,
    /// Decoupled layout: mean bytes of a coded list (its graph file's data pages per node).
    list_mean_bytes: usize,
    dim: usize,
    /// Page-node layout: its page nodes.
    page_nodes: usize,
}

fn required(dir: &Path, layout: IndexLayout, ask: &PlanAsk) -> Result<Base, OpenError> {
    let opts = OpenOptions {
        layout,
        list_cache_bytes: 0,
        ..OpenOptions::default()
    };
    let (reader, _file) = crate::kinds::graph::open::open_layout(dir, &opts)?;
    let meta = *reader.meta();
    let n = meta.n as usize;
    let mut items = vec![
        PlanItem {
            name: "pq_codebooks",
            // Held in two layouts (by subspace, for tables; by dimension, for decoding).
            bytes: 2 * payload(dir, PQ_FILE),
            required: true,
            detail: format!("{} subspaces", meta.pq_bytes),
        },
        PlanItem {
            name: "layout",
            bytes: reader.heap_bytes() as u64,
            required: true,
            detail: "page checksums and the layout's tables".into(),
        },
    ];
    if layout != IndexLayout::AllInStorage {
        items.push(PlanItem {
            name: "pq_codes",
            bytes: payload(dir, PQ_CODES_FILE),
            required: true,
            detail: format!("{n} codes of {} B", meta.pq_bytes),
        });
    }
    let attrs = payload(dir, crate::filter::file::FILE_NAME)
        + payload(dir, crate::kinds::graph::label_starts::FILE_NAME);
    items.extend(PlanItem::attrs(attrs));
    let per_thread = ask.queue_depth as u64 * reader.pages_per_read() as u64 * 4096
        + ask.interleave as u64 * ((n as u64).div_ceil(64) * 8 + (64 << 10));
    items.push(PlanItem {
        name: "search",
        bytes: ask.threads as u64 * per_thread,
        required: true,
        detail: format!(
            "{} thread(s) × {} reads in flight, {} queries each",
            ask.threads, ask.queue_depth, ask.interleave
        ),
    });
    if ask.writable {
        let slots = crate::vamana::VamanaParams {
            r: meta.r.max(1),
            ..crate::vamana::VamanaParams::default()
        }
        .validate()
        .map_or(meta.r * 2, |c| c.slots);
        let per = crate::kinds::graph::updates::delta::vector_bytes(
            meta.dim,
            meta.dtype.size_bytes(),
            slots,
        );
        let row = (meta.dim * meta.dtype.size_bytes() + 16) as u64;
        items.push(PlanItem {
            name: "delta",
            bytes: DELTA_MIN_VECTORS * (per + row),
            required: true,
            detail: format!("update delta: {per} B per vector with its growth"),
        });
    }
    let record_bytes = reader
        .records()
        .map_or(0, |r| r.file().geometry().record_bytes);
    let list_entry_bytes = reader
        .decoupled()
        .map_or(0, |d| d.graph().cache_entry_bytes());
    Ok(Base {
        items,
        n,
        tag: meta.pq_codes_crc,
        record_pages: reader.pages_per_read(),
        record_bytes,
        list_entry_bytes,
        list_mean_bytes: reader.decoupled().map_or(0, |d| {
            (d.graph().data_pages() as usize * crate::io::PAGE_BYTES).div_ceil(n.max(1))
        }),
        dim: meta.dim,
        page_nodes: reader.pages().map_or(0, |p| p.file().meta().pages as usize),
    })
}

/// Plans `dir`'s memory within `ask.budget` (on All-in-Storage when the asked layout's PQ
/// codes do not fit and the index has it).
pub fn plan(dir: &Path, ask: &PlanAsk) -> Result<MemoryPlan, GraphPlanError> {
    plan_on(dir, ask, true)
}

fn plan_on(dir: &Path, ask: &PlanAsk, to_ais: bool) -> Result<MemoryPlan, GraphPlanError> {
    let mut layout = ask.layout;
    let mut base = required(dir, layout, ask)?;
    let mut notes = Vec::new();
    let minimum = |b: &Base| b.items.iter().map(|i| i.bytes).sum::<u64>();
    let ais = dir.join(IndexLayout::AllInStorage.file_name()).is_file();
    if to_ais && minimum(&base) > ask.budget && layout != IndexLayout::AllInStorage && ais {
        let alt = required(dir, IndexLayout::AllInStorage, ask)?;
        if minimum(&alt) <= ask.budget {
            notes.push(format!(
                "the PQ codes do not fit ({} layout needs {}): All-in-Storage, whose records \
                 carry their neighbours' codes",
                layout.name(),
                human(minimum(&base))
            ));
            layout = IndexLayout::AllInStorage;
            base = alt;
        }
    }
    let hint = if layout != IndexLayout::AllInStorage && !ais {
        " — an All-in-Storage layout (`trawl layout DIR --ais`) needs no PQ codes in memory"
            .to_string()
    } else {
        String::new()
    };
    let min = PlanError::check(ask.budget, &base.items, hint)?;
    let mut plan = MemoryPlan {
        budget: ask.budget,
        minimum: min,
        layout: Some(layout.name().to_string()),
        items: std::mem::take(&mut base.items),
        notes,
        ..MemoryPlan::default()
    };
    let mut left = ask.budget - min;
    // The update delta of a writable open: a quarter of what is left, on top of its minimum.
    if let Some(d) = plan.items.iter_mut().find(|i| i.name == "delta") {
        let extra = left / 4;
        d.bytes += extra;
        left -= extra;
        plan.delta_bytes = d.bytes;
    }
    // 1. The node cache, or the list cache and the refinement codes.
    if layout == IndexLayout::Decoupled {
        plan_lists_and_refine(dir, &base, left, ask, &mut plan)?;
    } else if layout == IndexLayout::Pages {
        plan_page_cache(dir, &base, left, &mut plan);
    } else {
        plan_node_cache(dir, &base, left, &mut plan)?;
    }
    // 2. The entry index with what the cache left, at its loading peak (the file read whole,
    // then parsed); never on All-in-Storage, whose searches cannot seed from it.
    left -= plan
        .items
        .iter()
        .filter(|i| matches!(i.name, "node_cache" | "list_cache" | "refine"))
        .map(|i| i.bytes)
        .sum::<u64>();
    let entry_path = dir.join(crate::kinds::graph::search::entry::FILE_NAME);
    let entry_file = payload(dir, crate::kinds::graph::search::entry::FILE_NAME);
    let entry =
        crate::kinds::graph::search::entry::EntryIndex::heap_bytes_of(&entry_path).unwrap_or(0);
    if entry > 0 && layout != IndexLayout::AllInStorage {
        if left >= entry + entry_file {
            plan.entry = true;
            plan.items.push(PlanItem {
                name: "entry",
                bytes: entry,
                required: false,
                detail: format!(
                    "entry index (MemGraph); its file ({}) too while it loads",
                    human(entry_file)
                ),
            });
        } else {
            plan.notes.push(format!(
                "the entry index ({}, and its file {} while it loads) stays on disk: the \
                 cache took the budget (it saves more reads per byte; docs/memory.md)",
                human(entry),
                human(entry_file)
            ));
        }
    }
    Ok(plan)
}

/// Layouts in the order [`plan_auto`] breaks ties in (see the module documentation): packed
/// first, since a tie means every node is cached (no reads either way), and PageSearch then
/// only costs CPU (measured on gen-1M with every node cached: packed 20,230 QPS, shuffle with
/// PageSearch 17,584).
pub const AUTO_ORDER: [IndexLayout; 4] = [
    IndexLayout::Packed,
    IndexLayout::Shuffled,
    IndexLayout::AllInStorage,
    IndexLayout::Decoupled,
];

/// Pages a search reads on the shuffled layout with PageSearch, per page the packed layout
/// reads with the same cache: 0.85 (measured on gen-1M at recall 0.90: 0.82–0.87 of packed's
/// pages at every budget from 48 MiB to 256 MiB, with a smaller cache;
/// `bench/results/memory-budget-gen-1m.md`).
pub const PAGE_SEARCH_READS: f64 = 0.85;

/// Plans `dir`'s memory within `ask.budget` on the layout expected to read the fewest pages
/// at that budget (`ask.layout` is ignored). Each record layout the index has (shuffle with
/// PageSearch, packed, All-in-Storage) is planned; its expected reads are the sample
/// searches' reads its node cache leaves to the disk
/// ([`crate::kinds::graph::hot::HotOrder::reads_saved`]), times [`PAGE_SEARCH_READS`] on
/// shuffle. The fewest wins, ties in [`AUTO_ORDER`]; without a hot-node order, the first in
/// that order that fits. Decoupled only when no record layout fits. Below every layout's
/// minimum, the error names the smallest.
pub fn plan_auto(dir: &Path, ask: &PlanAsk) -> Result<MemoryPlan, GraphPlanError> {
    let present: Vec<IndexLayout> = AUTO_ORDER
        .into_iter()
        .filter(|l| dir.join(l.file_name()).is_file())
        .collect();
    let mut refused: Option<PlanError> = None;
    let mut best: Option<(f64, MemoryPlan)> = None;
    let mut considered = Vec::new();
    for &layout in &present {
        if layout == IndexLayout::Decoupled && best.is_some() {
            break;
        }
        let p = match plan_on(dir, &PlanAsk { layout, ..*ask }, false) {
            Ok(p) => p,
            Err(GraphPlanError::Plan(e)) => {
                let smaller = match (&refused, &e) {
                    (None, _) => true,
                    (
                        Some(PlanError::BelowMinimum { minimum: a, .. }),
                        PlanError::BelowMinimum { minimum: b, .. },
                    ) => b < a,
                };
                if smaller {
                    refused = Some(e);
                }
                considered.push(format!("{} below its minimum", layout.name()));
                continue;
            }
            Err(e) => return Err(e),
        };
        let factor = if layout == IndexLayout::Shuffled {
            PAGE_SEARCH_READS
        } else {
            1.0
        };
        // Without a hot-node order every layout scores the same: the first fitting wins.
        let score = p.reads_left.map_or(0.0, |r| r * factor);
        considered.push(match p.reads_left {
            Some(r) => format!("{} {:.1}", layout.name(), r * factor),
            None => format!("{} fits", layout.name()),
        });
        if best.as_ref().is_none_or(|(b, _)| score < *b) {
            best = Some((score, p));
        }
    }
    let Some((_, mut p)) = best else {
        return match refused {
            Some(e) => Err(e.into()),
            None => plan(dir, ask),
        };
    };
    p.layout_picked = true;
    p.page_search = p.layout.as_deref() == Some(IndexLayout::Shuffled.name());
    p.notes.push(format!(
        "layout picked by the planner: {}{} (expected disk reads per sample search: {}; \
         docs/memory.md)",
        p.layout.as_deref().unwrap_or("?"),
        if p.page_search {
            " with PageSearch"
        } else {
            ""
        },
        considered.join(", ")
    ));
    Ok(p)
}

/// The decoupled layout's uses within `left` bytes: the list cache and the refinement codes
/// (`refine.trawl`, when the index has current ones).
///
/// With a hot-node order and a read-only open of a merged index, the list cache is pinned
/// ([`crate::kinds::graph::DiskIndex::pin_lists`]): the order's most read lists at their exact
/// size (about half an LRU slot here), read at open, so what it saves is known and holds from
/// the first query. Otherwise it is an LRU cache filled as searches run (slots of the worst-case
/// list size), capped where every list fits.
///
/// Of the two ways to spend `left` — all on the list cache, or the codes and the rest on the
/// list cache — the one expected to leave the fewest reads per sample search wins: the list
/// reads a cache of that many of the most read lists would have served (the hot-node order's
/// counts), against the pages the codes were measured to save when they were written. Without
/// a hot-node order the codes come only after a full list cache.
fn plan_lists_and_refine(
    dir: &Path,
    base: &Base,
    left: u64,
    ask: &PlanAsk,
    plan: &mut MemoryPlan,
) -> Result<(), OpenError> {
    let n = base.n as u64;
    let hot_path = dir.join(hot::FILE_NAME);
    let hot = if hot_path.is_file() {
        Some(HotOrder::load(&hot_path, n, base.tag)?)
    } else {
        None
    };
    let read_only = ask.static_uses && !ask.writable && !crate::kinds::GraphIndex::has_updates(dir);
    let slot = (base.list_entry_bytes.max(2) + ListCache::OVERHEAD) as u64;
    let pinned_entry = PinnedLists::entry_cost(base.list_mean_bytes);
    let fixed = PinnedLists::fixed_bytes(base.n);
    // Choosing what to pin reads the ranking (its file and the parsed order at once), then
    // holds its nodes, each list's size and a flag per node.
    let m = hot.as_ref().map_or(0, |h| h.len() as u64);
    let transient = (16 * m).max(4 * m + 5 * n);
    let pinned = |bytes: u64| read_only && hot.is_some() && bytes >= transient.max(fixed + n);
    // Lists a cache of `bytes` holds, and the bytes where every list fits.
    let lists_of = |bytes: u64| {
        if pinned(bytes) {
            ((bytes - fixed - n) / pinned_entry).min(n) as usize
        } else {
            (bytes / slot).min(n) as usize
        }
    };
    let cap = |bytes: u64| {
        if pinned(bytes) {
            // The mean list size, with room for the most read lists being longer.
            (fixed + n + n * pinned_entry) * 21 / 20
        } else {
            slot * n
        }
    };
    let lists_left = |bytes: u64| {
        hot.as_ref().map(|h| {
            let k = lists_of(bytes.min(cap(bytes)));
            (h.reads_per_search() - h.reads_saved(k)).max(0.0)
        })
    };
    let refine = if read_only {
        refine_component(dir, base, plan)?
    } else {
        if dir.join(refine_file::FILE_NAME).is_file() {
            plan.notes.push(
                "the refinement codes are not planned: they serve a read-only open of a \
                 merged graph index (not a writable one, nor a shard)"
                    .into(),
            );
        }
        None
    };
    let mut lists = left.min(cap(left));
    plan.reads_left = lists_left(lists);
    if let Some((h, bytes)) = refine.filter(|(_, b)| *b <= left) {
        let rest = (left - bytes).min(cap(left - bytes));
        let take = match (lists_left(lists), lists_left(rest)) {
            (Some(a), Some(b)) => b - h.savings.saved() < a,
            _ => left - bytes >= cap(left - bytes),
        };
        if take {
            lists = rest;
            plan.reads_left = lists_left(lists).map(|r| (r - h.savings.saved()).max(0.0));
            plan.refine_bits = h.bits;
            plan.items.push(PlanItem {
                name: "refine",
                bytes,
                required: false,
                detail: format!(
                    "refinement codes, {} bits per dimension ({} of it only while they \
                     load): measured to save {:.1} of {:.1} pages per sample search",
                    h.bits,
                    human(bytes - h.heap_bytes()),
                    h.savings.saved(),
                    h.savings.pages_without
                ),
            });
        } else {
            plan.notes.push(format!(
                "the refinement codes ({}) stay on disk: the list cache saves more reads \
                 with those bytes (docs/memory.md)",
                human(bytes)
            ));
        }
    }
    if lists < slot.min(pinned_entry + fixed) {
        return Ok(());
    }
    plan.list_cache_bytes = lists;
    plan.list_pinned = pinned(lists);
    let total = hot.as_ref().map_or(0.0, |h| h.reads_per_search());
    let detail = list_detail(
        plan.list_pinned,
        lists_of(lists),
        lists_left(lists).map(|r| (total - r, total)),
        transient,
    );
    plan.items.push(PlanItem {
        name: "list_cache",
        bytes: lists,
        required: false,
        detail,
    });
    Ok(())
}

/// The list cache's plan item in words: `lists` entries, pinned (choosing them holds
/// `transient` bytes) or LRU, and the sample searches' list reads they serve of all.
fn list_detail(pinned: bool, lists: usize, served: Option<(f64, f64)>, transient: u64) -> String {
    match (pinned, served) {
        (true, Some((s, total))) => format!(
            "about {lists} of the most read lists pinned at open ({} of it only while they \
             are chosen): {s:.1} of the sample searches' {total:.1} list reads each",
            human(transient)
        ),
        (false, Some((s, total))) => format!(
            "up to {lists} coded lists, filled as searches run (the most read of them would \
             serve {s:.1} of the sample searches' {total:.1} list reads each)"
        ),
        _ => format!("up to {lists} coded lists, filled as searches run"),
    }
}

/// The index's current refinement codes and the bytes loading them takes at its peak (the
/// codes and, while the payload is parsed, a second copy of the norms); a note when the file
/// is of another version.
fn refine_component(
    dir: &Path,
    base: &Base,
    plan: &mut MemoryPlan,
) -> Result<Option<(RefineHeader, u64)>, OpenError> {
    let path = dir.join(refine_file::FILE_NAME);
    if !path.is_file() {
        return Ok(None);
    }
    let h = RefineHeader::read(&path)?;
    if !h.fits(base.n as u64, base.dim, base.tag) || h.bits != refine_file::STORED_BITS {
        plan.notes.push(
            "the refinement codes on disk are of another version of the index: not planned \
             (`trawl layout DIR --decoupled` or a merge writes them again)"
                .into(),
        );
        return Ok(None);
    }
    Ok(Some((
        h,
        h.heap_bytes().saturating_add(h.n.saturating_mul(4)),
    )))
}

/// The page-node layout's cache: the most whole pages (4 KiB each, and a slot per page node
/// with a byte per page while they are chosen) within `left` bytes; chosen at open by the
/// hot-node order, so none without one.
fn plan_page_cache(dir: &Path, base: &Base, left: u64, plan: &mut MemoryPlan) {
    let total = base.page_nodes as u64;
    if total == 0 || !dir.join(hot::FILE_NAME).is_file() {
        return;
    }
    let fixed = 4 * total + total;
    let k = (left.saturating_sub(fixed) / crate::io::PAGE_BYTES as u64).min(total);
    if k == 0 {
        return;
    }
    plan.cache_nodes = k as usize;
    plan.items.push(PlanItem {
        name: "node_cache",
        bytes: k * crate::io::PAGE_BYTES as u64 + fixed,
        required: false,
        detail: format!(
            "{k} page nodes ({:.1}% of {total}), those of the hottest vectors",
            100.0 * k as f64 / total as f64
        ),
    });
}

/// The largest node cache within `left` bytes, from the hot-node order when the index has
/// one (its load, a transient of 8 bytes per ranked node and one per node, must fit in what
/// the cache will take).
fn plan_node_cache(
    dir: &Path,
    base: &Base,
    left: u64,
    plan: &mut MemoryPlan,
) -> Result<(), OpenError> {
    let rb = base.record_bytes;
    if rb == 0 || base.n == 0 {
        return Ok(());
    }
    let hot_path = dir.join(hot::FILE_NAME);
    let hot = if hot_path.is_file() {
        Some(HotOrder::load(&hot_path, base.n as u64, base.tag)?)
    } else {
        None
    };
    plan.reads_left = hot.as_ref().map(|h| h.reads_per_search());
    // The records, and while they are read the fill's buffers and a chunk being assembled.
    let fill = |k: usize| {
        super::cache_load::fill_buffer_bytes((k * rb) as u64, base.record_pages)
            + (crate::kinds::graph::search::FILL_CHUNK.min(k) * rb) as u64
    };
    let fits = |k: usize| NodeCache::bytes_for(k, rb) as u64 + fill(k) <= left;
    let (mut lo, mut hi) = (0usize, base.n);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let k = lo;
    if k == 0 {
        return Ok(());
    }
    let fill = fill(k);
    let bytes = NodeCache::bytes_for(k, rb) as u64 + fill;
    let transient = hot
        .as_ref()
        .map_or(0, |h| 8 * h.len() as u64 + base.n as u64);
    if transient > bytes {
        plan.notes.push(format!(
            "a node cache of {k} nodes ({}) is smaller than choosing it takes ({}): none",
            human(bytes),
            human(transient)
        ));
        return Ok(());
    }
    plan.cache_nodes = k;
    plan.reads_left = hot
        .as_ref()
        .map(|h| (h.reads_per_search() - h.reads_saved(k)).max(0.0));
    let detail = match &hot {
        Some(h) => format!(
            "{k} nodes ({:.1}% of {}; {} of it only while they are read): {:.1} of the \
             sample searches' {:.1} reads each",
            100.0 * k as f64 / base.n as f64,
            base.n,
            human(fill),
            h.reads_saved(k),
            h.reads_per_search()
        ),
        None => format!(
            "{k} nodes ({:.1}%); no hot-node order (`trawl entry` writes one): chosen by sample \
             searches at open",
            100.0 * k as f64 / base.n as f64
        ),
    };
    plan.items.push(PlanItem {
        name: "node_cache",
        bytes,
        required: false,
        detail,
    });
    Ok(())
}
