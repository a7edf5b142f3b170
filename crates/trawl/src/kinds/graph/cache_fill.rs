//! Filling the static node cache from the file: the cache's records read in page order, in
//! long runs before the open returns or in short idle-class reads on a thread of its own while
//! searches run ([`crate::kinds::graph::DiskIndex::load_cache_with`]).

use crate::io::{Completion, EngineConfig, EngineKind, IoFile, ReadRequest};
use crate::kinds::graph::layout::packed::PackedFile;
use crate::kinds::graph::search::NodeCache;
use crate::search::SearchError;

/// What filling a node cache needs, owned, so that a thread of its own can run it.
pub(crate) struct CacheFill {
    pub(crate) cache: NodeCache,
    pub(crate) file: IoFile,
    pub(crate) packed: std::sync::Arc<PackedFile>,
    pub(crate) engine: EngineKind,
    pub(crate) config: EngineConfig,
    /// Reads in flight and the largest read, in pages: [`FILL_DEPTH`] and [`FILL_RUN_PAGES`]
    /// before the open returns; one read of [`BACKGROUND_RUN_PAGES`] while searches run (a
    /// search's 4 KiB read waits behind at most 16 KiB of the fill's).
    pub(crate) depth: usize,
    pub(crate) run_pages: usize,
}

/// Largest read of a background fill, in pages (16 KiB). Measured on gen-1M, 41K cached
/// nodes, one search at a time while the fill ran: with 64 KiB reads the first 1,000
/// searches' p99 was 2.2× the steady state's, with 16 KiB 1.2–1.5× (the fill took 3 s
/// instead of 2 s). The fill's thread reads in the idle I/O class ([`idle_io_priority`]).
pub(crate) const BACKGROUND_RUN_PAGES: usize = 4;

/// Reads in flight of a cache fill.
pub(crate) const FILL_DEPTH: usize = 2;
/// A fill whose reads average fewer pages than this is sparse: its reads are capped at this
/// many pages and up to [`SPARSE_DEPTH`] are in flight (the same buffer bytes).
const SPARSE_RUN_PAGES: u64 = 16;
/// Reads in flight of a sparse fill (measured on the 10M-vector index: 41K cached nodes on
/// 41K distinct pages, 2.5 s at 2 in flight).
const SPARSE_DEPTH: usize = 32;

/// Puts the calling thread's reads in the idle I/O class (Linux `ioprio_set`): a background
/// cache fill's reads then wait while searches' reads are queued (the mq-deadline and bfq
/// schedulers honour it; elsewhere it changes nothing). Best effort: a refusal is ignored.
pub(crate) fn idle_io_priority() {
    const IOPRIO_WHO_PROCESS: libc::c_int = 1;
    const IOPRIO_CLASS_IDLE: libc::c_int = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_int = 13;
    // SAFETY: ioprio_set takes three integers and touches no memory of this process; `who`
    // 0 is the calling thread.
    unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        );
    }
}
/// Largest read of a cache fill, in pages (1 MiB).
pub(crate) const FILL_RUN_PAGES: usize = 256;
/// Pages no cached record needs that a fill's read may span to join two runs: reading them
/// costs less than another request (about 3.4 µs each at 1.2 GB/s against ~20 µs per 4 KiB
/// read at depth).
const FILL_GAP_PAGES: u64 = 16;

/// The largest read of a fill of a cache of `records` bytes, in pages: [`FILL_RUN_PAGES`]
/// before the open returns, [`BACKGROUND_RUN_PAGES`] while searches run, and for a small
/// cache no more than keeps the fill's buffers within an eighth of it (at least one page).
pub(crate) fn fill_run_pages(records: u64, background: bool) -> usize {
    let most = if background {
        BACKGROUND_RUN_PAGES
    } else {
        FILL_RUN_PAGES
    };
    ((records / 8 / (FILL_DEPTH as u64 * 4096)) as usize).clamp(1, most)
}

/// Bytes of the engine buffers a fill of a cache of `records` bytes holds while it runs
/// (records spanning several pages are read whole: at least their pages).
pub(crate) fn fill_buffer_bytes(records: u64, record_pages: usize) -> u64 {
    (FILL_DEPTH * fill_run_pages(records, false).max(record_pages) * 4096) as u64
}

impl CacheFill {
    /// Reads the cache's records (its slots are in page order) in runs of up to
    /// [`FILL_RUN_PAGES`] pages, [`FILL_DEPTH`] in flight, publishing each chunk of the cache
    /// as soon as its records are in; stops early when the cache is dropped or replaced.
    /// Returns the pages read.
    pub(crate) fn run(&self) -> Result<u64, SearchError> {
        let geo = *self.packed.geometry();
        let rec_pages = geo.read_pages() as u64;
        let cfg = EngineConfig {
            depth: self.depth,
            max_pages_per_read: self.run_pages.max(rec_pages as usize),
            register_buffers: false,
            ..self.config
        };
        let ids: Vec<u32> = self.cache.ids().collect();
        let mut runs = fill_runs(&ids, &self.packed, rec_pages, cfg.max_pages_per_read as u64);
        let mean_pages = runs.iter().map(|r| r.1).sum::<u64>() / (runs.len() as u64).max(1);
        // A sparse cache (a large index, few cached nodes: most reads a page or two) is
        // bound by requests, not bytes: more of them in flight, each capped so that the
        // buffers stay as large as the dense fill's.
        let cfg = if self.depth > 1 && mean_pages < SPARSE_RUN_PAGES && cfg.max_pages_per_read > 1 {
            let cap = SPARSE_RUN_PAGES
                .min(cfg.max_pages_per_read as u64)
                .max(rec_pages);
            let depth = (self.depth * cfg.max_pages_per_read / cap as usize)
                .clamp(self.depth, SPARSE_DEPTH);
            runs = fill_runs(&ids, &self.packed, rec_pages, cap);
            EngineConfig {
                depth,
                max_pages_per_read: cap as usize,
                ..cfg
            }
        } else {
            cfg
        };
        let depth = cfg.depth;
        let mut engine = self.file.engine(self.engine, cfg)?;
        let rb = self.cache.record_bytes();
        let mut chunk: Vec<u8> = Vec::with_capacity(crate::kinds::graph::search::FILL_CHUNK * rb);
        let (mut next, mut slot, mut pages) = (0usize, 0usize, 0u64);
        let mut landed: std::collections::BTreeMap<u64, crate::io::Slot> = Default::default();
        let mut done: Vec<Completion> = Vec::new();
        for (r, run) in runs.iter().enumerate() {
            if self.cache.stopping() {
                self.cache
                    .fail("stopped: the cache was replaced or its index closed".into());
                break;
            }
            while next < runs.len() && next < r + depth {
                let (first_page, n_pages, _) = runs[next];
                engine.submit(
                    next as u64,
                    ReadRequest {
                        first_page,
                        pages: n_pages as u32,
                    },
                )?;
                next += 1;
            }
            while !landed.contains_key(&(r as u64)) {
                done.clear();
                engine.wait(1, &mut done)?;
                landed.extend(done.iter().map(|c| (c.tag, c.slot)));
            }
            let Some(buf_slot) = landed.remove(&(r as u64)) else {
                continue;
            };
            let (first_page, n_pages, slots_end) = *run;
            pages += n_pages;
            let bytes = engine.buffer(buf_slot);
            let checked = self
                .packed
                .check_pages(first_page, &bytes[..n_pages as usize * 4096])
                .map_err(|p| corrupt_fill(&self.packed, p, "checksum mismatch".into()));
            let copied = checked.and_then(|()| {
                while slot < slots_end {
                    let id = ids[slot];
                    let (page, at) = self.packed.locate(id);
                    let off = (page - first_page) as usize * 4096;
                    let rec = &bytes[off..off + rec_pages as usize * 4096];
                    self.packed
                        .record(id, rec)
                        .map_err(|d| corrupt_fill(&self.packed, page, d))?;
                    chunk.extend_from_slice(&rec[at..at + rb]);
                    slot += 1;
                    if slot % crate::kinds::graph::search::FILL_CHUNK == 0 || slot == ids.len() {
                        let c = (slot - 1) / crate::kinds::graph::search::FILL_CHUNK;
                        self.cache
                            .fill_chunk(c, std::mem::take(&mut chunk).into_boxed_slice());
                        chunk.reserve(crate::kinds::graph::search::FILL_CHUNK * rb);
                    }
                }
                Ok(())
            });
            engine.release(buf_slot);
            copied?;
        }
        // Reads still in flight (a stopped fill) are waited for when the engine drops.
        Ok(pages)
    }
}

fn corrupt_fill(packed: &PackedFile, page: u64, detail: String) -> SearchError {
    SearchError::Corrupt {
        path: packed.path().to_path_buf(),
        page,
        detail,
    }
}

/// The reads of a cache fill over `ids` (in page order): `(first page, pages, end of its
/// slots)`, each run at most `max_pages` pages, joining records whose pages are at most
/// [`FILL_GAP_PAGES`] apart.
fn fill_runs(
    ids: &[u32],
    packed: &PackedFile,
    rec_pages: u64,
    max_pages: u64,
) -> Vec<(u64, u64, usize)> {
    let mut runs: Vec<(u64, u64, usize)> = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let (page, _) = packed.locate(id);
        let end = page + rec_pages;
        if let Some(last) = runs.last_mut() {
            let last_end = last.0 + last.1;
            if page <= last_end + FILL_GAP_PAGES && end - last.0 <= max_pages {
                last.1 = last.1.max(end - last.0);
                last.2 = i + 1;
                continue;
            }
        }
        runs.push((page, rec_pages, i + 1));
    }
    runs
}
