//! The entry points of trawl's file-parser fuzzing, shared by the `cargo fuzz` targets (this
//! crate) and the stable-toolchain smoke test (`crates/trawl/tests/fuzz_smoke.rs` includes this
//! file), plus the checksum re-sealing that lets hostile field values reach the parsers, and
//! generators of valid seed files.
//!
//! Every entry point takes arbitrary bytes, writes them to a temporary file when the parser
//! reads a path, runs the parser and everything that decodes what it loaded, and panics only
//! when trawl misbehaves: a panic inside trawl, or an error that does not name the file.
//!
//! Input layouts:
//! - [`vector_inputs`]: byte 0 picks the file name extension and the hints; the rest is the file.
//! - [`trawl_files`]: byte 0 picks the trawl file kind ([`KINDS`]), byte 1 bit 0 asks for the
//!   checksums to be re-sealed ([`reseal`]) so that forged values pass them; the rest is the file.
//! - [`codecs`]: byte 0 picks Elias-Fano or Huffman; the rest are the decoder's arguments.
//! - [`index_files`]: byte 0 picks the index file kind ([`INDEX_KINDS`]: the IVF file, the IVF
//!   vector file, the shard manifest, the write-ahead log, the ids file, the vector map, the
//!   hot-node order), byte 1 bit 0 asks for the checksums to be re-sealed ([`reseal_index`]);
//!   the rest is the file.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use trawl::data::{self, DataError, Format, ProbeOptions, VectorReader};
use trawl::dir::FileError;
use trawl::kinds::graph::layout::decoupled::graph::GraphFile;
use trawl::kinds::graph::layout::decoupled::vectors::CompressedVectorFile;
use trawl::kinds::graph::layout::decoupled::{elias_fano, huffman};
use trawl::kinds::graph::layout::packed::PackedFile;
use trawl::kinds::graph::search::entry::EntryIndex;
use trawl::progress::Control;
use trawl::quant::pq::{PqCodes, ProductQuantizer};
use trawl::vamana::Graph;
use trawl::{DType, Metric};

const PAGE: usize = 4096;

/// A temporary file holding `bytes`, removed on drop. On tmpfs when there is one.
pub struct TempFile {
    /// Its path.
    pub path: PathBuf,
}

impl TempFile {
    /// Writes `bytes` to a fresh file whose name ends in `name`.
    pub fn new(name: &str, bytes: &[u8]) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let path = dir.join(format!(
            "trawl-fuzz-{}-{}-{name}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, bytes).expect("temporary file");
        Self { path }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A temporary directory holding one file `name` with `bytes` (for the readers that take an
/// index directory), removed on drop. On tmpfs when there is one.
pub struct TempDir {
    /// The directory.
    pub dir: PathBuf,
    /// The file in it.
    pub path: PathBuf,
}

impl TempDir {
    /// A fresh directory with `name` holding `bytes`.
    pub fn with_file(name: &str, bytes: &[u8]) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!(
            "trawl-fuzz-dir-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let path = dir.join(name);
        std::fs::write(&path, bytes).expect("temporary file");
        Self { dir, path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn data_err<T>(r: Result<T, DataError>, path: &Path) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            assert_eq!(e.path, path, "error does not name the file: {e}");
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

fn file_err<T>(r: Result<T, FileError>, path: &Path) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            assert_eq!(e.path, path, "error does not name the file: {e}");
            assert!(e.to_string().contains(&*path.to_string_lossy()));
            None
        }
    }
}

/// File names [`vector_inputs`] gives its input (selected by byte 0).
pub const VECTOR_NAMES: [&str; 11] = [
    "v.fbin", "v.u8bin", "v.i8bin", "v.bin", "v.fvecs", "v.bvecs", "v.i8vecs", "v.ivecs", "v.npy",
    "gt.bin", "v.dat",
];

/// Vector and ground-truth files: bin (fbin/u8bin/i8bin), vecs (fvecs/bvecs/ivecs), npy, the
/// DiskANN ground truth and `.ivecs` ground truth.
pub fn vector_inputs(input: &[u8]) {
    let Some((&sel, bytes)) = input.split_first() else {
        return;
    };
    let name = VECTOR_NAMES[usize::from(sel) % VECTOR_NAMES.len()];
    let f = TempFile::new(name, bytes);
    let p = &f.path;
    let formats = [
        None,
        Some(Format::Bin),
        Some(Format::Vecs),
        Some(Format::Npy),
    ];
    let dtypes = [None, Some(DType::F32), Some(DType::U8), Some(DType::I8)];
    let opts = ProbeOptions {
        format: formats[usize::from(sel >> 4) % 4],
        dtype: dtypes[usize::from(sel >> 6) % 4],
        fallback_dtype: None,
    };
    if let Some(info) = data_err(data::probe_with(p, opts), p) {
        assert!(info.n > 0 && info.dim > 0, "{info:?}");
        assert!(info.row_offset(info.n) <= bytes.len() as u64, "{info:?}");
    }
    if let Some(m) = data_err(data::read_matrix_any_with(p, opts), p) {
        assert!(m.n() > 0 && m.dim() > 0);
    }
    if let Some(m) = data_err(data::map_matrix::<u8>(p, opts), p) {
        assert_eq!(m.as_slice().len(), m.n() * m.dim());
    }
    if let Some(r) = data_err(VectorReader::<f32>::open_with(p, opts), p) {
        let n = r.info().n;
        let mut rows = 0u64;
        for block in r.blocks(3) {
            match data_err(block, p) {
                Some(b) => rows += b.n() as u64,
                None => break,
            }
        }
        assert!(rows <= n);
    }
    let _ = data_err(data::read_rows::<i8>(p, 1, 2), p);
    for gt in [data::read_ground_truth(p), data::read_ivecs(p)] {
        if let Some(gt) = data_err(gt, p) {
            assert_eq!(gt.ids.len(), gt.nq * gt.k);
            for q in 0..gt.nq {
                assert_eq!(gt.ids(q).len(), gt.k);
                let _ = gt.dists(q);
            }
        }
    }
}

/// Trawl file kinds of [`trawl_files`], by byte 0 (modulo their number).
pub const KINDS: [&str; 9] = [
    "packed", "dgraph", "dvectors", "pq", "pq_codes", "graph", "entry", "manifest", "rabitq",
];

/// Magic of the manifest (`index/manifest.rs`).
pub const MANIFEST_MAGIC: [u8; 8] = *b"TRAWLMAN";

fn kind_magic(kind: usize) -> [u8; 8] {
    match kind {
        0 => trawl::kinds::graph::layout::packed::MAGIC,
        1 => trawl::kinds::graph::layout::decoupled::graph::MAGIC,
        2 => trawl::kinds::graph::layout::decoupled::vectors::MAGIC,
        3 => trawl::quant::pq::PQ_MAGIC,
        4 => trawl::quant::pq::PQ_CODES_MAGIC,
        5 => trawl::vamana::file::MAGIC,
        6 => trawl::kinds::graph::search::entry::MAGIC,
        8 => trawl::quant::rabitq::file::RBQ_MAGIC,
        _ => MANIFEST_MAGIC,
    }
}

/// Every trawl file reader and what decodes its pages: the page-packed index (identity,
/// PageShuffle-permuted, All-in-Storage), the decoupled graph and vector files, the PQ
/// quantiser and codes, the graph file, the entry index and the manifest.
pub fn trawl_files(input: &[u8]) {
    let [sel, flags, rest @ ..] = input else {
        return;
    };
    let kind = usize::from(*sel) % KINDS.len();
    let mut bytes = rest.to_vec();
    if flags & 1 != 0 {
        reseal(kind, &mut bytes, flags & 2 != 0);
    }
    let f = TempFile::new(&format!("{}.trawl", KINDS[kind]), &bytes);
    let p = &f.path;
    match kind {
        0 => packed(p),
        1 => dgraph(p),
        2 => dvectors(p),
        3 => {
            if let Some(pq) = file_err(ProductQuantizer::load(p), p) {
                let code = vec![0u8; pq.m()];
                let mut out = vec![0f32; pq.dim()];
                pq.decode(&code, &mut out)
                    .expect("a loaded quantiser decodes");
            }
        }
        4 => {
            if let Some(c) = file_err(PqCodes::load(p), p) {
                assert_eq!(c.as_bytes().len(), c.n() * c.m());
                assert!(c
                    .as_bytes()
                    .iter()
                    .all(|&b| usize::from(b) < c.centroids_per_subspace()));
            }
        }
        5 => {
            if let Some(g) = file_err(Graph::load(p), p) {
                for i in 0..g.n() as u32 {
                    assert!(g.neighbors(i).iter().all(|&x| (x as usize) < g.n()));
                }
            }
        }
        6 => entry(p, &bytes),
        8 => {
            // Read as an index reads its quantiser file (either kind, by the magic).
            if let Some(q) = file_err(trawl::quant::Quantiser::load(p), p) {
                let code = vec![0u8; q.m()];
                let mut out = vec![0f32; q.dim()];
                q.decode(&code, &mut out)
                    .expect("a loaded quantiser decodes");
                let query = q.query(&vec![0.5f32; q.dim()]).expect("a finite query");
                assert!(!query.distance(&code).is_nan());
            }
        }
        _ => {
            if let Err(e) = trawl::dir::manifest::Manifest::load_from(p) {
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

fn packed(p: &Path) {
    let Some(pf) = file_err(PackedFile::open(p), p) else {
        return;
    };
    let all = std::fs::read(p).expect("read back");
    let geo = *pf.geometry();
    let _ = file_err(pf.verify_all(&Control::silent()), p);
    let mut ids = Vec::new();
    let mut scratch_f = Vec::new();
    let mut scratch_u = Vec::new();
    let mut scratch_i = Vec::new();
    for page in 0..=geo.data_pages + 1 {
        ids.clear();
        pf.ids_on_page(page, &mut ids);
        let _ = pf.records_on_page(page);
        for &id in &ids {
            let (first, _) = pf.locate(id);
            let at = first as usize * PAGE;
            let Some(bytes) = all.get(at..at + geo.read_pages() * PAGE) else {
                panic!("record {id} located past the file");
            };
            if pf.check_pages(first, bytes).is_err() {
                continue;
            }
            let Ok(rec) = pf.record(id, bytes) else {
                continue;
            };
            assert!(rec.degree() <= pf.meta().r);
            for (i, nb) in rec.neighbors().enumerate() {
                assert!(u64::from(nb) < pf.meta().n);
                let _ = rec.neighbor_code(i);
            }
            match pf.meta().dtype {
                DType::F32 => assert_eq!(rec.vector::<f32>(&mut scratch_f).len(), pf.meta().dim),
                DType::U8 => assert_eq!(rec.vector::<u8>(&mut scratch_u).len(), pf.meta().dim),
                DType::I8 => assert_eq!(rec.vector::<i8>(&mut scratch_i).len(), pf.meta().dim),
            }
        }
    }
}

fn dgraph(p: &Path) {
    let Some(g) = file_err(GraphFile::open(p), p) else {
        return;
    };
    let all = std::fs::read(p).expect("read back");
    let _ = file_err(g.verify_all(), p);
    let _ = g.cache_entry_bytes();
    let mut out = Vec::new();
    for id in 0..g.meta().n.min(1 << 16) as u32 {
        let page = g.locate(id);
        let _ = g.lists_on_page(page);
        let at = page as usize * PAGE;
        let Some(bytes) = all.get(at..at + PAGE) else {
            panic!("node {id} located past the file");
        };
        if let Ok((d, list)) = g.list_bytes(id, page, bytes, true) {
            assert_eq!(g.key_of(list).is_some(), g.keyed());
            if g.decode_list(d, list, &mut out).is_ok() {
                assert_eq!(out.len(), d);
                assert!(out.iter().all(|&x| u64::from(x) < g.meta().n));
            }
        }
    }
    let _ = g.keys();
}

fn dvectors(p: &Path) {
    let Some(v) = file_err(CompressedVectorFile::open(p), p) else {
        return;
    };
    let all = std::fs::read(p).expect("read back");
    let _ = file_err(v.scan(|_, _| {}), p);
    let mut out = vec![0u8; v.geometry().vector_bytes()];
    for id in 0..v.geometry().n.min(1 << 16) as u32 {
        let page = v.locate(id);
        let _ = v.vectors_on_page(page);
        let at = page as usize * PAGE;
        let Some(bytes) = all.get(at..at + PAGE) else {
            panic!("vector {id} located past the file");
        };
        let _ = v.decode(id, page, bytes, true, &mut out);
    }
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn entry(p: &Path, bytes: &[u8]) {
    // Ask for the index the file says it belongs to, so the content checks are reached.
    let payload = bytes.get(32..).unwrap_or(&[]);
    let tag = le32(payload, 0).unwrap_or(0);
    let n = le64(payload, 4).unwrap_or(1);
    let dtype = payload
        .get(12)
        .and_then(|&c| DType::from_code(c))
        .unwrap_or(DType::F32);
    let metric = payload
        .get(13)
        .and_then(|&c| Metric::from_code(c))
        .unwrap_or(Metric::L2);
    let dim = le32(payload, 16).unwrap_or(1) as usize;
    if let Some(e) = file_err(EntryIndex::load(p, n, dtype, dim, metric, tag), p) {
        assert!(!e.is_empty() && e.len() as u64 <= n);
        assert!(e.ids().iter().all(|&id| u64::from(id) < n));
    }
}

/// Index file kinds of [`index_files`], by byte 0 (modulo their number).
pub const INDEX_KINDS: [&str; 8] = [
    "ivf",
    "ivf_vectors",
    "shards",
    "wal",
    "ids",
    "vmap",
    "hot",
    "refine",
];

/// The IVF file (`ivf.trawl`) and its semantic checks, the IVF vector file, the shard
/// manifest (`shards.trawl`, header and full load), the write-ahead log (`wal.trawl`), the
/// ids file (`ids.trawl`), the vector map (`vmap.trawl`), the hot-node order (`hot.trawl`) and
/// the refinement codes (`refine.trawl`).
pub fn index_files(input: &[u8]) {
    use trawl::kinds::graph::updates::ids::SlotIds;
    use trawl::kinds::graph::updates::segments::{VectorMap, GONE};
    use trawl::kinds::graph::updates::wal;
    use trawl::kinds::ivf::file::{check_centroids, IvfMeta};
    use trawl::kinds::sharded::ShardManifest;

    let [sel, flags, rest @ ..] = input else {
        return;
    };
    let kind = usize::from(*sel) % INDEX_KINDS.len();
    let mut bytes = rest.to_vec();
    if flags & 1 != 0 {
        reseal_index(kind, &mut bytes, flags & 2 != 0);
    }
    match kind {
        0 => {
            let f = TempFile::new("ivf.trawl", &bytes);
            let p = &f.path;
            if let Some(m) = file_err(IvfMeta::load(p), p) {
                let nlist = m.nlist();
                assert!(nlist > 0);
                assert_eq!(m.centroids.len(), nlist * m.centroid_dim());
                check_centroids(&m.centroids, m.centroid_dim()).expect("loaded centroids pass");
                assert_eq!(m.graph.n(), nlist);
                assert!((m.graph.medoid() as usize) < nlist);
                for i in 0..nlist as u32 {
                    assert!(m.graph.neighbors(i).iter().all(|&j| (j as usize) < nlist));
                    assert!(m.list(i).iter().all(|&id| u64::from(id) < m.n));
                }
                let _ = m.check_lists();
                if let Some(sole) = m.sole_lists() {
                    assert_eq!(sole.len() as u64, m.n);
                }
                let _ = m.replication();
                let _ = m.heap_bytes();
            }
        }
        1 => {
            use trawl::kinds::slot_file::SlotFile;
            let f = TempFile::new("ivf-vectors.trawl", &bytes);
            let p = &f.path;
            if let Some(v) = file_err(SlotFile::open(p), p) {
                let g = *v.geometry();
                assert_eq!(v.slots().len() as u64, g.n);
                for id in 0..g.n.min(1 << 16) as u32 {
                    let (page, off) = v.locate(id);
                    assert!(page >= 1 && page <= g.data_pages, "{id} on page {page}");
                    assert!(off + g.vector_bytes.min(4096) <= 4096 || g.per_page == 0);
                    assert!(v.ids_on_page(page).len() <= g.per_page);
                    assert!(v.vectors_on_page(page) >= 1);
                    assert!(v.page_crc(page).is_some());
                }
                let _ = v.heap_bytes();
                assert_eq!(g.file_bytes(), bytes.len() as u64);
            }
        }
        2 => {
            let f = TempFile::new("shards.trawl", &bytes);
            let p = &f.path;
            let _ = file_err(ShardManifest::read_header(p), p);
            if let Some(m) = file_err(ShardManifest::load(p), p) {
                let h = &m.header;
                assert_eq!(m.ids.len(), h.shards.len());
                assert_eq!(m.centroids.len(), h.shards.len() * h.dim);
                for (ids, e) in m.ids.iter().zip(&h.shards) {
                    assert_eq!(ids.len() as u64, e.count);
                    assert!(ids.iter().all(|&g| u64::from(g) < h.n));
                }
            }
        }
        3 => {
            let f = TempFile::new("wal.trawl", &bytes);
            let p = &f.path;
            match wal::read_log(p) {
                Ok(c) => {
                    assert!(c.valid_len <= bytes.len() as u64);
                    let mut seq = c.base_seq;
                    for r in &c.records {
                        assert_eq!(Some(r.seq), seq.checked_add(1));
                        seq = r.seq;
                        if let Some(v) = r.op.vectors() {
                            let _ = v.count();
                            match v.dtype {
                                DType::F32 => drop(v.rows::<f32>()),
                                DType::U8 => drop(v.rows::<u8>()),
                                DType::I8 => drop(v.rows::<i8>()),
                            }
                        }
                        let _ = r.op.ids().len();
                    }
                    assert_eq!(c.last_seq(), seq);
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains(&*p.to_string_lossy()),
                        "error does not name the file: {msg}"
                    );
                    let _ = e.kind();
                }
            }
        }
        4 => {
            let d = TempDir::with_file("ids.trawl", &bytes);
            // Ask for the slot count the file says it has, so the content checks are reached.
            let n = le64(&bytes, 32).filter(|&n| n <= 1 << 24).unwrap_or(0) as usize;
            if let Some(ids) = file_err(SlotIds::load(&d.dir, n), &d.path) {
                assert_eq!(ids.len(), n);
                let rev = ids.reverse();
                assert_eq!(rev.len(), ids.live());
                assert_eq!(ids.holes().len() + ids.live(), n);
                let _ = ids.next_free_id();
            }
        }
        5 => {
            let d = TempDir::with_file("vmap.trawl", &bytes);
            if let Some(Some(m)) = file_err(VectorMap::load(&d.dir), &d.path) {
                let live = m.live_per_segment();
                assert_eq!(live.len(), m.segments.len());
                for &(s, l) in &m.slots {
                    if (s, l) != GONE {
                        assert!(u64::from(l) < m.segments[s as usize].1);
                    }
                }
            }
        }
        6 => hot(&bytes),
        _ => refine(&bytes),
    }
}

/// The refinement codes (`refine.trawl`): the planner's header read, then the load for the
/// index the file names (so the content checks are reached) and a distance to every code.
fn refine(bytes: &[u8]) {
    use trawl::kinds::graph::refine_file::{load, RefineHeader};
    let f = TempFile::new("refine.trawl", bytes);
    let p = &f.path;
    let header = file_err(RefineHeader::read(p), p);
    let payload = bytes.get(32..).unwrap_or(&[]);
    let tag = le32(payload, 0).unwrap_or(0);
    let n = le64(payload, 4).filter(|&n| n <= 1 << 20).unwrap_or(0);
    let dim = le32(payload, 12)
        .filter(|&d| (1..=4096).contains(&d))
        .unwrap_or(1) as usize;
    if let Some((codes, h)) = file_err(load(p, n, dim, tag, trawl::Metric::L2), p) {
        assert_eq!(Some(h), header, "the header read agrees with the load");
        assert_eq!(codes.len() as u64, n);
        assert_eq!(codes.heap_bytes(), h.heap_bytes());
        assert!(h.savings.saved().is_finite() && h.savings.saved() >= 0.0);
        let mut q = trawl::quant::sq::RefineQuery::default();
        codes.prepare(&vec![0.5; dim], &mut q);
        for i in 0..codes.len() {
            let d = codes.distance(&q, i);
            assert!(!d.is_nan(), "code {i}: NaN distance");
        }
    }
}

/// The hot-node order (`hot.trawl`): loaded for the index the file names (so the content
/// checks are reached), then every use of it.
fn hot(bytes: &[u8]) {
    use trawl::kinds::graph::hot::HotOrder;
    let f = TempFile::new("hot.trawl", bytes);
    let p = &f.path;
    let payload = bytes.get(32..).unwrap_or(&[]);
    let tag = le32(payload, 0).unwrap_or(0);
    let n = le64(payload, 4).filter(|&n| n <= 1 << 24).unwrap_or(0);
    if let Some(h) = file_err(HotOrder::load(p, n, tag), p) {
        assert!(h.len() as u64 <= n);
        assert!(h.ids().iter().all(|&id| u64::from(id) < n));
        let total = h.reads_per_search();
        assert!(total.is_finite() && total >= 0.0);
        for k in [0, 1, h.len() / 2, h.len(), h.len() + 3] {
            let saved = h.reads_saved(k);
            assert!(saved.is_finite() && saved <= total + 1e-9);
            let first = h.first(k, n as usize);
            assert_eq!(first.len(), k.min(n as usize));
            assert!(first.iter().all(|&id| u64::from(id) < n));
        }
        let _ = h.describe();
    }
}

/// Magic of the IVF file, the shard manifest, the ids file, the vector map, the hot-node order
/// and the refinement codes (envelopes).
fn index_magic(kind: usize) -> [u8; 8] {
    match kind {
        0 => *b"TRAWLIVF",
        2 => *b"TRAWLSHD",
        4 => *b"TRAWLIDS",
        6 => trawl::kinds::graph::hot::MAGIC,
        7 => trawl::kinds::graph::refine_file::MAGIC,
        _ => *b"TRAWLVMP",
    }
}

/// [`reseal`] for the kinds of [`index_files`] (index into [`INDEX_KINDS`]): envelopes as
/// there; the IVF vector file's data page CRCs into its checksum table, both tables' CRCs and
/// the header page's CRC; the write-ahead log's header CRC and every record's body CRC (as far
/// as the record lengths lead). Never panics, whatever `bytes`.
pub fn reseal_index(kind: usize, bytes: &mut [u8], keep_len: bool) {
    match kind {
        1 => reseal_ivf_vectors(bytes),
        3 => reseal_wal(bytes),
        _ => reseal_envelope(bytes, index_magic(kind), keep_len),
    }
}

/// The IVF vector file: header at page 0 (`n` at 12, `D` at 28, slot table CRC at 36, page
/// table CRC at 40), then `D` data pages, the slot table (`n × u32`, padded to a page), the
/// page checksum table (`D × u32`).
pub fn reseal_ivf_vectors(bytes: &mut [u8]) {
    if bytes.len() < PAGE {
        return;
    }
    let n = le64(bytes, 12).unwrap_or(0);
    let d = le64(bytes, 28).unwrap_or(0);
    let pages = (bytes.len() / PAGE) as u64;
    let slot_at = 1u64.saturating_add(d).saturating_mul(PAGE as u64);
    let slot_pages = n.saturating_mul(4).div_ceil(PAGE as u64);
    let table_at = 1u64
        .saturating_add(d)
        .saturating_add(slot_pages)
        .saturating_mul(PAGE as u64);
    for page in 1..=d.min(pages.saturating_sub(1)) {
        let c = crc(span(bytes, page * PAGE as u64, PAGE as u64));
        let at = table_at.saturating_add((page - 1) * 4);
        if at < bytes.len() as u64 {
            put32(bytes, at as usize, c);
        }
    }
    let slot_crc = crc(span(bytes, slot_at, n.saturating_mul(4)));
    put32(bytes, 36, slot_crc);
    let table_crc = crc(span(bytes, table_at, d.saturating_mul(4)));
    put32(bytes, 40, table_crc);
    reseal_header_page(bytes);
}

/// The write-ahead log: header CRC (28, of bytes 0..28), then each record's body CRC (its
/// prefix is `u32` body length, `u32` CRC) while the lengths stay inside the file.
pub fn reseal_wal(bytes: &mut [u8]) {
    if bytes.len() < 32 {
        return;
    }
    let c = crc(&bytes[..28]);
    put32(bytes, 28, c);
    let mut pos = 32usize;
    while let Some(len) = le32(bytes, pos) {
        let Some(end) = (pos + 8).checked_add(len as usize) else {
            break;
        };
        if end > bytes.len() {
            break;
        }
        let c = crc(&bytes[pos + 8..end]);
        put32(bytes, pos + 4, c);
        pos = end;
    }
}

/// Elias-Fano and Huffman decoders on arbitrary bytes.
pub fn codecs(input: &[u8]) {
    let Some((&sel, rest)) = input.split_first() else {
        return;
    };
    if sel & 1 == 0 {
        let (Some(n), Some(universe)) = (rest.get(0..2), le32(rest, 2)) else {
            return;
        };
        let n = usize::from(u16::from_le_bytes([n[0], n[1]]));
        let bytes = &rest[6..];
        let mut out = Vec::new();
        if let Ok(used) = elias_fano::decode(bytes, n, universe, &mut out) {
            assert!(used <= bytes.len());
            assert_eq!(out.len(), n);
            assert!(out.windows(2).all(|w| w[0] <= w[1]));
            assert!(out.iter().all(|&x| x < universe));
            let mut again = Vec::new();
            elias_fano::encode(&out, universe, &mut again).expect("decoded ids re-encode");
            let mut back = Vec::new();
            elias_fano::decode(&again, n, universe, &mut back).expect("re-encoded ids decode");
            assert_eq!(back, out);
        }
    } else {
        let lanes = 1 + usize::from(sel >> 1) % 4;
        let Some(lens) = rest.get(..256 * lanes) else {
            return;
        };
        let Some(out_len) = rest.get(256 * lanes..256 * lanes + 2) else {
            return;
        };
        let out_len = usize::from(u16::from_le_bytes([out_len[0], out_len[1]])) % (PAGE + 1);
        let bits = &rest[256 * lanes + 2..];
        let mut tables = Vec::new();
        for l in lens.chunks_exact(256) {
            let l: &[u8; 256] = l.try_into().expect("256 lengths");
            match huffman::CodeTable::from_lengths(l) {
                Ok(t) => tables.push(t),
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    return;
                }
            }
        }
        let mut out = vec![0u8; out_len];
        let _ = huffman::decode(&tables, bits, &mut out);
        let _ = huffman::decode_split(&tables, bits, &mut out);
        let _ = huffman::coded_bits(&tables, bits);
    }
}

/// Rewrites the checksums of a trawl file of kind `kind` (index into [`KINDS`]) so that they
/// match its content: the header and page CRCs of paged files, the envelope's payload and header
/// CRCs. Unless `keep_len`, an envelope's magic and payload length are also set to those of a
/// valid file (so the payload's own fields are what is tested). Never panics, whatever `bytes`.
pub fn reseal(kind: usize, bytes: &mut [u8], keep_len: bool) {
    match kind {
        0 => reseal_packed(bytes),
        1 => reseal_decoupled(bytes, 52, 68, |_, d| d.saturating_mul(4)),
        2 => reseal_decoupled(bytes, 68, 92, |h, _| le64(h, 76).unwrap_or(0)),
        _ => reseal_envelope(bytes, kind_magic(kind), keep_len),
    }
}

fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Seals the envelope: payload CRC at 24, header CRC at 28.
pub fn reseal_envelope(bytes: &mut [u8], magic: [u8; 8], keep_len: bool) {
    if bytes.len() < 32 {
        return;
    }
    if !keep_len {
        bytes[..8].copy_from_slice(&magic);
        let len = (bytes.len() - 32) as u64;
        bytes[16..24].copy_from_slice(&len.to_le_bytes());
    }
    let payload_crc = crc(&bytes[32..]);
    put32(bytes, 24, payload_crc);
    let header_crc = crc(&bytes[..28]);
    put32(bytes, 28, header_crc);
}

fn reseal_header_page(bytes: &mut [u8]) {
    if bytes.len() >= PAGE {
        let c = crc(&bytes[..PAGE - 4]);
        put32(bytes, PAGE - 4, c);
    }
}

/// Bytes `from..from + len` of `bytes`, clamped to its end.
fn span(bytes: &[u8], from: u64, len: u64) -> &[u8] {
    let n = bytes.len() as u64;
    let a = from.min(n) as usize;
    let b = from.saturating_add(len).min(n) as usize;
    &bytes[a..b]
}

/// The page-packed index: data page CRCs into the checksum table, the table's CRC (72), the
/// order table's CRC (100), the header page's CRC.
pub fn reseal_packed(bytes: &mut [u8]) {
    if bytes.len() < PAGE {
        return;
    }
    let d = le64(bytes, 56).unwrap_or(0);
    let c = le64(bytes, 64).unwrap_or(0);
    let per_page = u64::from(le32(bytes, 44).unwrap_or(0));
    let pages = (bytes.len() / PAGE) as u64;
    let table_at = 1u64.saturating_add(d).saturating_mul(PAGE as u64);
    for page in 1..=d.min(pages) {
        let c = crc(span(bytes, page * PAGE as u64, PAGE as u64));
        let at = table_at.saturating_add((page - 1) * 4);
        if at < bytes.len() as u64 {
            put32(bytes, at as usize, c);
        }
    }
    let table_crc = crc(span(bytes, table_at, d.saturating_mul(4)));
    put32(bytes, 72, table_crc);
    let order_at = 1u64
        .saturating_add(d)
        .saturating_add(c)
        .saturating_mul(PAGE as u64);
    let order_crc = crc(span(
        bytes,
        order_at,
        d.saturating_mul(per_page).saturating_mul(4),
    ));
    put32(bytes, 100, order_crc);
    reseal_header_page(bytes);
}

/// The decoupled graph and vector files: every data page's own CRC, the CRC (at `crc_at`) of
/// the bytes after the data pages (`D` at `d_at`; their length from `len_of(header, D)`), the
/// header page's CRC.
pub fn reseal_decoupled(
    bytes: &mut [u8],
    d_at: usize,
    crc_at: usize,
    len_of: impl Fn(&[u8], u64) -> u64,
) {
    if bytes.len() < PAGE {
        return;
    }
    let d = le64(bytes, d_at).unwrap_or(0);
    let pages = (bytes.len() / PAGE) as u64;
    for page in 1..=d.min(pages.saturating_sub(1)) {
        let at = page as usize * PAGE;
        if let Some(p) = bytes.get_mut(at..at + PAGE) {
            let c = crc(&p[4..]);
            p[..4].copy_from_slice(&c.to_le_bytes());
        }
    }
    let tail_at = 1u64.saturating_add(d).saturating_mul(PAGE as u64);
    let len = len_of(bytes, d);
    let c = crc(span(bytes, tail_at, len));
    put32(bytes, crc_at, c);
    reseal_header_page(bytes);
}

/// Tiny deterministic generator for mutations (no dependency).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits (xorshift64*).
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Extreme values a forged field is set to.
pub const EXTREMES: [u64; 12] = [
    0,
    1,
    2,
    255,
    4095,
    4096,
    65535,
    1 << 31,
    u32::MAX as u64 - 1,
    u32::MAX as u64,
    1 << 40,
    u64::MAX,
];

/// One structured mutation of a valid file `body` (the file bytes, without selector bytes):
/// flip bytes, truncate, append, or set a 1-, 2-, 4- or 8-byte field (biased to headers) to an
/// extreme value.
pub fn mutate(body: &mut Vec<u8>, rng: &mut Rng) {
    if body.is_empty() {
        body.push(rng.next_u64() as u8);
        return;
    }
    match rng.below(6) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(body.len());
                body[i] ^= 1 << rng.below(8);
            }
        }
        1 => {
            let cut = rng.below(body.len());
            body.truncate(cut);
        }
        2 => {
            let extra = 1 + rng.below(64);
            body.extend((0..extra).map(|_| rng.next_u64() as u8));
        }
        _ => {
            let width = [1usize, 2, 4, 8][rng.below(4)];
            // Header fields live in the first 128 bytes (of the file or of its payload); other
            // bytes are page contents and tables.
            let limit = if rng.below(3) > 0 {
                body.len().min(160)
            } else {
                body.len()
            };
            let at = rng.below(limit.saturating_sub(width).max(1));
            let v = match rng.below(3) {
                0 => EXTREMES[rng.below(EXTREMES.len())],
                1 => rng.next_u64(),
                _ => EXTREMES[rng.below(EXTREMES.len())].wrapping_sub(rng.below(3) as u64),
            };
            let v = v.to_le_bytes();
            if let Some(s) = body.get_mut(at..at + width) {
                s.copy_from_slice(&v[..width]);
            }
        }
    }
}

/// Valid seed inputs: `(target, input)` with the selector bytes each target expects. Small
/// files of every format and kind, written by trawl's own writers.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use trawl::data::{GroundTruth, Matrix};
    use trawl::kinds::graph::layout::decoupled::graph::GraphWriter;
    use trawl::kinds::graph::layout::decoupled::vectors::{
        CompressedGeometry, CompressedVectorWriter, VectorParams, VectorPlanner,
    };
    use trawl::kinds::graph::layout::packed::{PackedGeometry, PackedMeta, PackedWriter};

    static CALLS: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "trawl-seeds-{}-{}",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("seed directory");
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut rng = Rng(0x5eed);
    let (n, dim) = (40usize, 8usize);
    let floats: Vec<f32> = (0..n * dim)
        .map(|_| (rng.below(200) as f32) / 16.0)
        .collect();
    let bytes: Vec<u8> = floats.iter().map(|&x| x as u8).collect();
    let base = Matrix::from_vec(floats.clone(), dim).expect("matrix");
    let base_u8 = Matrix::from_vec(bytes.clone(), dim).expect("matrix");
    let read = |p: &Path| std::fs::read(p).expect("seed file");

    // Vector files and ground truth.
    let names = VECTOR_NAMES;
    let sel = |name: &str| names.iter().position(|&x| x == name).expect("name") as u8;
    for (format, name) in [
        (Format::Bin, "v.fbin"),
        (Format::Vecs, "v.fvecs"),
        (Format::Npy, "v.npy"),
    ] {
        let p = dir.join(name);
        data::write_matrix(&p, format, &base).expect("write");
        let mut s = vec![sel(name)];
        s.extend(read(&p));
        out.push(("vector_inputs", s));
    }
    for (format, name) in [
        (Format::Bin, "v.u8bin"),
        (Format::Vecs, "v.bvecs"),
        (Format::Npy, "v.npy"),
    ] {
        let p = dir.join(format!("u8-{name}"));
        let p = p.with_extension(Path::new(name).extension().expect("ext"));
        data::write_matrix(&p, format, &base_u8).expect("write");
        let mut s = vec![sel(name)];
        s.extend(read(&p));
        out.push(("vector_inputs", s));
    }
    let gt = GroundTruth {
        nq: 3,
        k: 4,
        ids: (0..12).collect(),
        dists: (0..12).map(|x| x as f32).collect(),
    };
    let p = dir.join("gt.bin");
    data::write_ground_truth(&p, &gt).expect("write");
    out.push(("vector_inputs", [vec![sel("gt.bin")], read(&p)].concat()));
    let p = dir.join("gt.ivecs");
    data::write_ivecs(&p, &gt).expect("write");
    out.push(("vector_inputs", [vec![sel("v.ivecs")], read(&p)].concat()));

    // Trawl files.
    let lists: Vec<Vec<u32>> = (0..n as u32)
        .map(|i| {
            let mut l: Vec<u32> = (1..=3).map(|k| (i + k * 7) % n as u32).collect();
            l.sort_unstable();
            l.dedup();
            l
        })
        .collect();
    let kind = |k: &str| KINDS.iter().position(|&x| x == k).expect("kind") as u8;
    let mut push = |k: &str, file: Vec<u8>| {
        out.push(("trawl_files", [vec![kind(k), 0], file.clone()].concat()));
        out.push(("trawl_files", [vec![kind(k), 1], file].concat()));
    };
    let meta = PackedMeta {
        dtype: DType::F32,
        metric: Metric::L2,
        dim,
        n: n as u64,
        r: 4,
        medoid: 3,
        pq_bytes: 4,
        pq_crc: 11,
        pq_codes_crc: 12,
        neighbor_code_bytes: 0,
        permuted: false,
    };
    // Identity order.
    let p = dir.join("packed.trawl");
    let mut w = PackedWriter::create(&p, meta).expect("packed");
    for (i, l) in lists.iter().enumerate() {
        w.push(base.row(i), l).expect("push");
    }
    w.finish().expect("finish");
    push("packed", read(&p));
    // All-in-Storage.
    let ais = PackedMeta {
        neighbor_code_bytes: 4,
        ..meta
    };
    let mut w = PackedWriter::create(&p, ais).expect("packed");
    w.set_medoid_code(&[1, 2, 3, 4]).expect("medoid code");
    for (i, l) in lists.iter().enumerate() {
        let codes: Vec<u8> = l.iter().flat_map(|&x| [x as u8; 4]).collect();
        w.push_with_codes(base.row(i), l, &codes).expect("push");
    }
    w.finish().expect("finish");
    push("packed", read(&p));
    // PageShuffle order: reversed.
    let perm = PackedMeta {
        permuted: true,
        ..meta
    };
    let geo = PackedGeometry::of(&perm).expect("geometry");
    let slots = geo.slots() as usize;
    let order: Vec<u32> = (0..slots)
        .map(|s| if s < n { (n - 1 - s) as u32 } else { u32::MAX })
        .collect();
    let mut w = PackedWriter::create_permuted(&p, perm, order.clone()).expect("packed");
    for &id in order.iter().filter(|&&x| x != u32::MAX) {
        w.push(base.row(id as usize), &lists[id as usize])
            .expect("push");
    }
    w.finish().expect("finish");
    push("packed", read(&p));
    // Records spanning pages (u8, dim 4500).
    let wide = PackedMeta {
        dtype: DType::U8,
        dim: 4500,
        n: 3,
        medoid: 0,
        ..meta
    };
    let mut w = PackedWriter::create(&p, wide).expect("packed");
    for i in 0..3u32 {
        w.push(&vec![i as u8; 4500], &[(i + 1) % 3]).expect("push");
    }
    w.finish().expect("finish");
    push("packed", read(&p));

    // Decoupled graph and vectors.
    let p = dir.join("graph.trawl");
    let mut w = GraphWriter::create(&p, meta).expect("graph");
    for l in &lists {
        w.push(l).expect("push");
    }
    w.finish().expect("finish");
    push("dgraph", read(&p));
    // Keyed (vectors in graph order): a vector key before each list.
    let mut w = GraphWriter::create_keyed(&p, meta).expect("graph");
    for (i, l) in lists.iter().enumerate() {
        w.push_keyed(l, (n - 1 - i) as u32).expect("push");
    }
    w.finish().expect("finish");
    push("dgraph", read(&p));
    let p = dir.join("vectors.trawl");
    for (dtype, data, params) in [
        (DType::F32, bytemuck_f32(&floats), VectorParams::default()),
        (
            DType::U8,
            bytes.clone(),
            VectorParams {
                beta: 0.5,
                segment_bytes: 64,
                ..VectorParams::default()
            },
        ),
    ] {
        let v = dim * dtype.size_bytes();
        let geo = CompressedGeometry::new(dtype, dim, n as u64, &params).expect("geometry");
        let mut planner = VectorPlanner::new(geo).expect("planner");
        for x in data.chunks_exact(v) {
            planner.push(x).expect("plan");
        }
        let mut w =
            CompressedVectorWriter::create(&p, planner.finish().expect("plan")).expect("vectors");
        for x in data.chunks_exact(v) {
            w.push(x).expect("push");
        }
        w.finish().expect("finish");
        push("dvectors", read(&p));
    }

    // PQ quantiser and codes.
    let pq = ProductQuantizer::train(
        &base,
        Metric::L2,
        &trawl::quant::pq::PqParams {
            bytes_per_vector: 2,
            max_sample: 64,
            iters: 2,
            seed: 1,
            opq_iters: 0,
        },
        &Control::silent(),
    )
    .expect("train");
    let p = dir.join("pq.trawl");
    pq.save(&p).expect("save");
    push("pq", read(&p));
    let codes = pq.encode(&base, &Control::silent()).expect("encode");
    let p = dir.join("pq-codes.trawl");
    codes.save(&p).expect("save");
    push("pq_codes", read(&p));
    for (bits, metric) in [(1u8, Metric::L2), (5, Metric::InnerProduct)] {
        let rbq = trawl::quant::rabitq::RaBitQuantizer::train(
            &base,
            metric,
            &trawl::quant::rabitq::RbqParams {
                bits,
                seed: 1,
                rounds: 2,
            },
            &Control::silent(),
        )
        .expect("train");
        let p = dir.join("rabitq.trawl");
        rbq.save(&p).expect("save");
        push("rabitq", read(&p));
    }

    // Graph file.
    let p = dir.join("graph-file.trawl");
    Graph::from_lists(lists.clone(), 4, 3)
        .save(&p)
        .expect("save");
    push("graph", read(&p));

    // Entry index.
    let params = trawl::kinds::graph::search::entry::EntryParams {
        ratio: 0.25,
        r: 4,
        l: 8,
        ..Default::default()
    };
    let e = EntryIndex::build(&base, Metric::L2, &params, &Control::silent()).expect("entry");
    let p = dir.join("entry.trawl");
    e.save(&p, n as u64, 77).expect("save");
    push("entry", read(&p));

    // Manifest (JSON in an envelope).
    let json = br#"{"kind":"graph","written_by":"0.1.0","n":40,"dim":8,"dtype":"f32","metric":"l2","layouts":["packed"],"files":[{"name":"packed.trawl","role":"packed","bytes":12288,"checksum":1}],"build":{"R":4,"L":8,"alpha":1.2,"pq_bytes":2,"entry_ratio":0.0,"memory_budget_bytes":0,"seed":0},"build_id":"0123456789abcdef"}"#;
    let mut m = vec![0u8; 32];
    m[8..12].copy_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(json);
    reseal_envelope(&mut m, MANIFEST_MAGIC, false);
    push("manifest", m);

    // Codecs.
    let universe = 1000u32;
    let ids: Vec<u32> = (0..20).map(|i| i * 37 % universe).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    let mut ef = Vec::new();
    elias_fano::encode(&sorted, universe, &mut ef).expect("encode");
    let mut s = vec![0u8];
    s.extend_from_slice(&(sorted.len() as u16).to_le_bytes());
    s.extend_from_slice(&universe.to_le_bytes());
    s.extend(ef);
    out.push(("codecs", s));
    let mut counts = [1u64; 256];
    for (i, c) in counts.iter_mut().enumerate() {
        *c += (i as u64 % 17) * 5;
    }
    let lens = huffman::lengths_from_counts(&counts);
    let table = huffman::CodeTable::from_lengths(&lens).expect("table");
    let data: Vec<u8> = (0..64u8).collect();
    let mut bits = Vec::new();
    huffman::encode_split(std::slice::from_ref(&table), &data, &mut bits).expect("encode");
    let mut s = vec![1u8];
    s.extend_from_slice(&lens);
    s.extend_from_slice(&(data.len() as u16).to_le_bytes());
    s.extend(bits);
    out.push(("codecs", s));

    out.extend(index_seeds(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Valid seeds of [`index_files`] (`("index_files", input)`), written in `dir`: the IVF files of
/// two small IVF builds (f32 L2 with replication and the by-id file; u8 inner product with one
/// list per vector), a shard manifest, a write-ahead log of every operation, an ids file and a
/// vector map.
fn index_seeds(dir: &Path) -> Vec<(&'static str, Vec<u8>)> {
    use trawl::kinds::graph::updates::ids::{SlotIds, HOLE};
    use trawl::kinds::graph::updates::segments::{VectorMap, GONE};
    use trawl::kinds::graph::updates::wal::{LogAttrs, LogOp, LogVectors, LogWriter};
    use trawl::kinds::ivf::{build_ivf, IvfParams};

    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let read = |p: &Path| std::fs::read(p).expect("seed file");
    let kind = |k: &str| INDEX_KINDS.iter().position(|&x| x == k).expect("kind") as u8;
    let mut push = |k: &str, file: Vec<u8>| {
        out.push(("index_files", [vec![kind(k), 0], file.clone()].concat()));
        out.push(("index_files", [vec![kind(k), 1], file].concat()));
    };
    let mut rng = Rng(0x1f5eed);
    let (n, dim) = (120usize, 6usize);
    let floats: Vec<f32> = (0..n * dim)
        .map(|_| (rng.below(400) as f32) / 32.0)
        .collect();
    let bytes: Vec<u8> = floats.iter().map(|&x| (x * 8.0) as u8).collect();
    let small_pq = trawl::quant::pq::PqParams {
        bytes_per_vector: 2,
        max_sample: 64,
        iters: 2,
        seed: 1,
        opq_iters: 0,
    };
    let graph = trawl::vamana::VamanaParams {
        r: 6,
        l: 12,
        ..trawl::vamana::VamanaParams::default()
    };
    let ivf = dir.join("ivf-f32");
    let params = IvfParams {
        list_size: 8,
        centroid_graph: graph.clone(),
        pq: small_pq.clone(),
        by_id_file: true,
        ..IvfParams::default()
    };
    let base = trawl::data::Matrix::from_vec(floats, dim).expect("matrix");
    build_ivf(&base, &ivf, &params, &Control::silent()).expect("IVF build");
    push("ivf", read(&ivf.join("ivf.trawl")));
    push("ivf_vectors", read(&ivf.join("ivf-vectors.trawl")));
    push("ivf_vectors", read(&ivf.join("ivf-vectors-by-id.trawl")));
    let ivf = dir.join("ivf-u8");
    let params = IvfParams {
        metric: Metric::InnerProduct,
        list_size: 12,
        max_replicas: 1,
        centroid_graph: graph,
        pq: small_pq,
        ..IvfParams::default()
    };
    let base = trawl::data::Matrix::from_vec(bytes, dim).expect("matrix");
    build_ivf(&base, &ivf, &params, &Control::silent()).expect("IVF build");
    push("ivf", read(&ivf.join("ivf.trawl")));
    push("ivf_vectors", read(&ivf.join("ivf-vectors.trawl")));

    // Shard manifest: two shards of a 10-vector index of dimension 2, one vector in both.
    let json = br#"{"written_by":"0.1.0","n":10,"dim":2,"dtype":"f32","metric":"l2","slack":1.1,"epsilon":0.1,"seed":7,"in_nearest":10,"replicas":1,"shards":[{"dir":"shard-000","count":6,"build_id":"0123456789abcdef"},{"dir":"shard-001","count":5,"build_id":"fedcba9876543210"}]}"#;
    let mut m = vec![0u8; 32];
    m[8..12].copy_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&(json.len() as u32).to_le_bytes());
    m.extend_from_slice(json);
    for x in [0.5f32, 1.0, 3.0, -2.0] {
        m.extend_from_slice(&x.to_le_bytes());
    }
    for id in [0u32, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9] {
        m.extend_from_slice(&id.to_le_bytes());
    }
    reseal_envelope(&mut m, *b"TRAWLSHD", false);
    push("shards", m);

    // Write-ahead log: an insert (f32, with attributes), a delete, an upsert (u8), an insert
    // (i8).
    let p = dir.join("wal.trawl");
    let mut w = LogWriter::create(&p, 5).expect("log");
    w.append(
        &[
            LogOp::Insert {
                ids: vec![40, 41],
                vectors: LogVectors::from_rows(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], 3),
                attrs: Some(LogAttrs::encode(&{
                    let mut b = trawl::filter::AttrsBuilder::new(2).expect("attrs");
                    b.add_label(0, "lang=en").expect("label");
                    b.set_number("year", 1, trawl::filter::Number::I64(2024))
                        .expect("number");
                    b.finish().expect("attrs")
                })),
            },
            LogOp::Delete { ids: vec![3, 40] },
        ],
        true,
    )
    .expect("append");
    w.append(
        &[LogOp::Upsert {
            ids: vec![7],
            vectors: LogVectors::from_rows(&[9u8, 8, 7], 3),
            attrs: None,
        }],
        true,
    )
    .expect("append");
    w.append(
        &[LogOp::Insert {
            ids: vec![50, 51, 52],
            vectors: LogVectors::from_rows(&[-1i8, 0, 1, 2, 3, 4, -5, -6, -7], 3),
            attrs: None,
        }],
        false,
    )
    .expect("append");
    drop(w);
    push("wal", read(&p));

    // Ids file with holes, and a vector map over two segments with a slot without a vector.
    let p = dir.join("ids.trawl");
    SlotIds::Table(vec![0, 1, HOLE, 7, 3, 90_000, HOLE, 12])
        .save(&p)
        .expect("ids");
    push("ids", read(&p));
    let p = dir.join("vmap.trawl");
    VectorMap {
        segments: vec![
            ("vectors.trawl".to_string(), 5),
            ("vectors-000001.trawl".to_string(), 3),
        ],
        slots: vec![(0, 0), (0, 1), GONE, (1, 0), (1, 2), (0, 4), (1, 1)],
    }
    .save(&p)
    .expect("vmap");
    push("vmap", read(&p));
    // A hot-node order of 30 ranked nodes of 50.
    let p = dir.join("hot.trawl");
    let counts: Vec<u32> = (0..50u32).map(|i| (i * 7) % 13).collect();
    trawl::kinds::graph::hot::HotOrder::from_counts(&counts, 20, 15, 4)
        .save(&p, 50, 0x5eed_0001)
        .expect("hot");
    push("hot", read(&p));
    // Refinement codes of 12 vectors of 6 dimensions, 8 and 4 bits.
    for bits in [8u8, 4] {
        let p = dir.join("refine.trawl");
        let rows: Vec<Vec<f32>> = (0..12)
            .map(|i| (0..6).map(|d| ((i * 5 + d * 3) % 7) as f32 - 3.0).collect())
            .collect();
        let mut ranges = trawl::quant::sq::RangeBuilder::new(6);
        rows.iter().for_each(|r| ranges.observe(r));
        let mut codes =
            trawl::quant::sq::RefineCodes::new(&ranges, bits, trawl::Metric::L2, rows.len())
                .expect("codes");
        for (i, r) in rows.iter().enumerate() {
            codes.set(i, r);
        }
        let savings = trawl::kinds::graph::refine_file::RefineSavings {
            samples: 12,
            k: 10,
            l: 15,
            beam_width: 4,
            pages_without: 9.5,
            pages_with: 7.0,
        };
        trawl::kinds::graph::refine_file::save(&p, &codes, 0x5eed_0002, &savings).expect("refine");
        push("refine", read(&p));
    }
    out
}

/// The file of the first seed of index file kind `kind` (a name in [`INDEX_KINDS`]) whose
/// checksums were not re-sealed, i.e. a valid file as trawl writes it; `nth` picks among
/// several.
pub fn index_seed_file(kind: &str, nth: usize) -> Vec<u8> {
    let k = INDEX_KINDS.iter().position(|&x| x == kind).expect("kind") as u8;
    all_seeds()
        .iter()
        .filter(|(t, s)| *t == "index_files" && s[0] == k && s[1] == 0)
        .nth(nth)
        .map(|(_, s)| s[2..].to_vec())
        .expect("seed of that kind")
}

fn all_seeds() -> &'static [(&'static str, Vec<u8>)] {
    static SEEDS: std::sync::OnceLock<Vec<(&'static str, Vec<u8>)>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(seeds)
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The file of the first seed of trawl file kind `kind` (a name in [`KINDS`]) whose checksums
/// were not re-sealed, i.e. a valid file as trawl writes it; `nth` picks among several.
pub fn seed_file(kind: &str, nth: usize) -> Vec<u8> {
    let k = KINDS.iter().position(|&x| x == kind).expect("kind") as u8;
    all_seeds()
        .iter()
        .filter(|(t, s)| *t == "trawl_files" && s[0] == k && s[1] == 0)
        .nth(nth)
        .map(|(_, s)| s[2..].to_vec())
        .expect("seed of that kind")
}

/// Sets the `width`-byte little-endian field at `at` to `v`.
pub fn set_field(bytes: &mut [u8], at: usize, width: usize, v: u64) {
    bytes[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
}
