//! Files with consistent checksums but hostile header values: every reader answers with a typed
//! error naming the file, never a panic, an abort on an impossible allocation, a divide by zero
//! or a wrapped size. The checksums of each forged file are recomputed
//! (`harness::reseal`), so the hostile value reaches the parser.

#[path = "../../../fuzz/src/harness.rs"]
mod harness;

use std::path::Path;

use harness::{reseal, seed_file, set_field, TempFile};
use trawl::data::{self, DataErrorKind, ProbeOptions};
use trawl::dir::{FileError, FileErrorKind};
use trawl::kinds::graph::layout::decoupled::graph::GraphFile;
use trawl::kinds::graph::layout::decoupled::vectors::CompressedVectorFile;
use trawl::kinds::graph::layout::packed::PackedFile;
use trawl::kinds::graph::search::entry::EntryIndex;
use trawl::quant::pq::{PqCodes, ProductQuantizer};
use trawl::vamana::Graph;
use trawl::{DType, Metric};

const PAGE: usize = 4096;

fn kind_index(kind: &str) -> usize {
    harness::KINDS.iter().position(|&k| k == kind).unwrap()
}

/// The valid file of `kind` with the fields `(offset, width, value)` forged and its checksums
/// recomputed.
fn forged(kind: &str, nth: usize, fields: &[(usize, usize, u64)]) -> Vec<u8> {
    let mut b = seed_file(kind, nth);
    for &(at, width, v) in fields {
        set_field(&mut b, at, width, v);
    }
    reseal(kind_index(kind), &mut b, true);
    b
}

/// The error `open` gives for `bytes`, checked to name the file.
fn file_error<T: std::fmt::Debug>(
    bytes: &[u8],
    name: &str,
    open: impl Fn(&Path) -> Result<T, FileError>,
) -> FileErrorKind {
    let f = TempFile::new(name, bytes);
    let err = open(&f.path).expect_err("a forged file must be refused");
    assert_eq!(err.path, f.path);
    assert!(err.to_string().contains(&*f.path.to_string_lossy()));
    err.kind
}

fn invalid_containing(kind: FileErrorKind, needle: &str) {
    match kind {
        FileErrorKind::Invalid(m) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
        other => panic!("expected Invalid({needle:?}), got {other:?}"),
    }
}

#[test]
fn seeds_are_valid() {
    for (kind, open) in [
        ("packed", 0usize),
        ("packed", 1),
        ("packed", 2),
        ("packed", 3),
    ] {
        let f = TempFile::new("p.trawl", &seed_file(kind, open));
        PackedFile::open(&f.path).unwrap();
    }
    let f = TempFile::new("g.trawl", &seed_file("dgraph", 0));
    GraphFile::open(&f.path).unwrap().verify_all().unwrap();
    for nth in 0..2 {
        let f = TempFile::new("v.trawl", &seed_file("dvectors", nth));
        CompressedVectorFile::open(&f.path)
            .unwrap()
            .scan(|_, _| {})
            .unwrap();
    }
    let f = TempFile::new("pq.trawl", &seed_file("pq", 0));
    ProductQuantizer::load(&f.path).unwrap();
    let f = TempFile::new("codes.trawl", &seed_file("pq_codes", 0));
    PqCodes::load(&f.path).unwrap();
    let f = TempFile::new("graph.trawl", &seed_file("graph", 0));
    Graph::load(&f.path).unwrap();
    let f = TempFile::new("entry.trawl", &seed_file("entry", 0));
    EntryIndex::load(&f.path, 40, DType::F32, 8, Metric::L2, 77).unwrap();
    // Re-sealing an untouched file leaves it valid (the forged tests below test the value).
    let mut b = seed_file("dvectors", 1);
    reseal(kind_index("dvectors"), &mut b, true);
    assert_eq!(b, seed_file("dvectors", 1));
    let mut b = seed_file("packed", 2);
    reseal(kind_index("packed"), &mut b, true);
    assert_eq!(b, seed_file("packed", 2));
    let mut b = seed_file("dgraph", 0);
    reseal(kind_index("dgraph"), &mut b, true);
    assert_eq!(b, seed_file("dgraph", 0));
}

// ---- decoupled vector file ----------------------------------------------------------------

/// `segment_vectors = 0` divided by zero (`n.div_ceil(0)`) before the geometry was checked.
#[test]
fn vectors_zero_segment_is_refused() {
    let b = forged("dvectors", 0, &[(32, 8, 0)]);
    invalid_containing(
        file_error(&b, "v.trawl", CompressedVectorFile::open),
        "per segment",
    );
    let b = forged("dvectors", 0, &[(40, 8, 0)]);
    invalid_containing(
        file_error(&b, "v.trawl", CompressedVectorFile::open),
        "per chunk",
    );
}

/// A data-page count near `u64::MAX` overflowed the metadata size (`D · 4`).
#[test]
fn vectors_huge_page_count_is_refused() {
    for d in [u64::MAX, u64::MAX / 4 + 1, 1 << 62] {
        let b = forged("dvectors", 0, &[(68, 8, d)]);
        invalid_containing(
            file_error(&b, "v.trawl", CompressedVectorFile::open),
            "data pages",
        );
    }
}

/// A chunk whose page count overflows `first + count` (u32) wrapped in the chunk table.
#[test]
fn vectors_chunk_page_count_overflow_is_refused() {
    let b = seed_file("dvectors", 1);
    let f = TempFile::new("v.trawl", &b);
    let v = CompressedVectorFile::open(&f.path).unwrap();
    let geo = *v.geometry();
    assert!(geo.chunks() >= 2, "the seed has several chunks");
    let meta_at = (1 + v.data_pages() as usize) * PAGE;
    let tables = geo.segments() as usize * geo.lanes() * 256;
    let record = 12 + geo.vector_bytes();
    // Chunk 1's page count.
    let at = meta_at + tables + record + 4;
    let b = forged("dvectors", 1, &[(at, 4, u64::from(u32::MAX))]);
    invalid_containing(
        file_error(&b, "v.trawl", CompressedVectorFile::open),
        "not consecutive",
    );
}

// ---- page-packed index --------------------------------------------------------------------

#[test]
fn packed_hostile_header_values_are_refused() {
    // n: 0, above u32, u64::MAX; dim 0; R 0 and huge; a page size that is not 4096.
    for (at, width, v, needle) in [
        (24usize, 8usize, 0u64, "n = 0"),
        (24, 8, 1 << 33, "n = 8589934592"),
        (24, 8, u64::MAX, "n = 18446744073709551615"),
        (20, 4, 0, "dim = 0"),
        (32, 4, 0, "R = 0"),
        (32, 4, u64::from(u32::MAX), "R = 4294967295"),
        (12, 4, 1, "page size"),
        (16, 1, 9, "element type"),
        (84, 4, 6, "flags"),
        (88, 4, 4000, "code bytes"),
    ] {
        let b = forged("packed", 0, &[(at, width, v)]);
        invalid_containing(file_error(&b, "p.trawl", PackedFile::open), needle);
    }
    // A huge dimension whose geometry fields are consistent: the file size is refused.
    let b = forged(
        "packed",
        0,
        &[(20, 4, 1 << 20), (40, 4, (4 << 20) + 4 + 16), (44, 4, 0)],
    );
    let kind = file_error(&b, "p.trawl", PackedFile::open);
    assert!(
        matches!(
            kind,
            FileErrorKind::Invalid(_) | FileErrorKind::SizeMismatch { .. }
        ),
        "{kind:?}"
    );
}

/// A permuted file whose order table (checksum re-sealed) names a node twice or out of range.
#[test]
fn packed_order_table_is_checked() {
    let b = seed_file("packed", 2);
    let f = TempFile::new("p.trawl", &b);
    let pf = PackedFile::open(&f.path).unwrap();
    let geo = *pf.geometry();
    let order_at = (1 + geo.data_pages + geo.checksum_pages) as usize * PAGE;
    for v in [0u64, u64::from(u32::MAX - 1), 40] {
        let b = forged("packed", 2, &[(order_at + 4, 4, v)]);
        invalid_containing(file_error(&b, "p.trawl", PackedFile::open), "order table");
    }
}

// ---- decoupled graph file -----------------------------------------------------------------

#[test]
fn decoupled_graph_hostile_header_values_are_refused() {
    for (at, v, needle) in [
        (24usize, 0u64, "0 nodes"),
        (24, u64::MAX, "18446744073709551615 nodes"),
        (52, u64::MAX, "data pages"),
        (52, 0, "data pages"),
        (60, u64::MAX, "index pages"),
    ] {
        let b = forged("dgraph", 0, &[(at, 8, v)]);
        invalid_containing(file_error(&b, "g.trawl", GraphFile::open), needle);
    }
    let b = forged("dgraph", 0, &[(32, 4, u64::from(u32::MAX))]);
    invalid_containing(file_error(&b, "g.trawl", GraphFile::open), "degree bound");
}

/// A data page (CRC re-sealed) whose node degree exceeds R or whose count overruns the page.
#[test]
fn decoupled_graph_hostile_pages_are_refused() {
    let verify = |p: &Path| GraphFile::open(p).and_then(|g| g.verify_all());
    let b = forged("dgraph", 0, &[(PAGE + 12, 2, 60000)]);
    invalid_containing(file_error(&b, "g.trawl", verify), "overruns");
    // A count larger than the page's share of the sparse index (checked before the count's
    // table is read).
    let b = forged("dgraph", 0, &[(PAGE + 8, 2, 65535)]);
    invalid_containing(file_error(&b, "g.trawl", verify), "claims 65535 items");
}

// ---- graph file, entry index ---------------------------------------------------------------

/// `R = 2³² − 1` asked for an `n × R` table of hundreds of GB (an abort on allocation failure).
#[test]
fn graph_file_huge_degree_is_refused() {
    let b = forged("graph", 0, &[(40, 4, u64::from(u32::MAX))]);
    invalid_containing(file_error(&b, "graph.trawl", Graph::load), "R = 4294967295");
    let b = forged("graph", 0, &[(40, 4, 65536)]);
    invalid_containing(file_error(&b, "graph.trawl", Graph::load), "R = 65536");
    // n beyond the payload, medoid ≥ n, R = 0.
    let b = forged("graph", 0, &[(32, 8, u64::MAX)]);
    invalid_containing(file_error(&b, "graph.trawl", Graph::load), "n");
    let b = forged("graph", 0, &[(32, 8, 1 << 31)]);
    invalid_containing(file_error(&b, "graph.trawl", Graph::load), "too short");
    let b = forged("graph", 0, &[(44, 4, 40)]);
    invalid_containing(file_error(&b, "graph.trawl", Graph::load), "medoid = 40");
}

#[test]
fn entry_index_huge_degree_is_refused() {
    let load = |p: &Path| EntryIndex::load(p, 40, DType::F32, 8, Metric::L2, 77);
    let b = forged("entry", 0, &[(32 + 24, 4, u64::from(u32::MAX))]);
    invalid_containing(file_error(&b, "entry.trawl", load), "R = 4294967295");
    // More sampled nodes than the payload holds; a sample larger than the index.
    let b = forged("entry", 0, &[(32 + 20, 4, 40)]);
    invalid_containing(file_error(&b, "entry.trawl", load), "payload too short");
    let b = forged("entry", 0, &[(32 + 20, 4, u64::from(u32::MAX))]);
    invalid_containing(file_error(&b, "entry.trawl", load), "m = 4294967295");
    // A huge dimension: m × dim × 4 bytes of vectors.
    let big = |p: &Path| EntryIndex::load(p, 40, DType::F32, u32::MAX as usize, Metric::L2, 77);
    let b = forged("entry", 0, &[(32 + 16, 4, u64::from(u32::MAX))]);
    invalid_containing(file_error(&b, "entry.trawl", big), "payload too short");
}

// ---- PQ files ------------------------------------------------------------------------------

#[test]
fn pq_hostile_header_values_are_refused() {
    for (at, v, needle) in [
        (36usize, 0u64, "out of range"),
        (36, u64::from(u32::MAX), "codebooks take"),
        (40, 0, "out of range"),
        (40, u64::from(u32::MAX), "out of range"),
        (44, 0, "out of range"),
        (44, 257, "out of range"),
    ] {
        let b = forged("pq", 0, &[(at, 4, v)]);
        invalid_containing(file_error(&b, "pq.trawl", ProductQuantizer::load), needle);
    }
    // Subspace boundaries not increasing.
    let b = forged("pq", 0, &[(32 + 20, 4, 0)]);
    invalid_containing(
        file_error(&b, "pq.trawl", ProductQuantizer::load),
        "boundaries",
    );
}

#[test]
fn pq_codes_hostile_header_values_are_refused() {
    let b = forged("pq_codes", 0, &[(32, 8, u64::MAX)]);
    invalid_containing(file_error(&b, "codes.trawl", PqCodes::load), "overflow");
    let b = forged("pq_codes", 0, &[(32, 8, 1 << 40)]);
    invalid_containing(file_error(&b, "codes.trawl", PqCodes::load), "code bytes");
    let b = forged("pq_codes", 0, &[(40, 4, 0)]);
    invalid_containing(file_error(&b, "codes.trawl", PqCodes::load), "out of range");
    let b = forged("pq_codes", 0, &[(44, 4, 1)]);
    invalid_containing(file_error(&b, "codes.trawl", PqCodes::load), "not below ks");
}

/// The envelope's payload length near `u64::MAX` (with the header CRC re-sealed).
#[test]
fn envelope_huge_length_is_refused() {
    let mut b = seed_file("pq_codes", 0);
    set_field(&mut b, 16, 8, u64::MAX);
    reseal(kind_index("pq_codes"), &mut b, true);
    let kind = file_error(&b, "codes.trawl", PqCodes::load);
    assert!(
        matches!(kind, FileErrorKind::SizeMismatch { expected, .. } if expected == u64::MAX),
        "{kind:?}"
    );
}

// ---- vector and ground-truth files ---------------------------------------------------------

fn data_error(name: &str, bytes: &[u8]) -> DataErrorKind {
    let f = TempFile::new(name, bytes);
    let err = data::read_matrix_any_with(&f.path, ProbeOptions::default())
        .expect_err("a hostile file must be refused");
    assert_eq!(err.path, f.path);
    err.kind
}

fn bin_header(n: u32, dim: u32) -> Vec<u8> {
    [n.to_le_bytes(), dim.to_le_bytes()].concat()
}

#[test]
fn bin_hostile_headers_are_refused() {
    // n × dim × 4 overflows u64.
    let b = [bin_header(u32::MAX, i32::MAX as u32), vec![0; 64]].concat();
    assert!(
        matches!(data_error("v.fbin", &b), DataErrorKind::BadHeader(m) if m.contains("overflow"))
            || matches!(data_error("v.fbin", &b), DataErrorKind::Truncated { .. })
    );
    for dim in [0u32, u32::MAX, 1 << 31] {
        let b = [bin_header(4, dim), vec![0; 64]].concat();
        assert!(
            matches!(data_error("v.fbin", &b), DataErrorKind::BadHeader(m) if m.contains("dimension")),
            "dim {dim}"
        );
    }
    // A huge n: truncated, not an allocation of terabytes.
    let b = [bin_header(u32::MAX, 1 << 20), vec![0; 64]].concat();
    assert!(matches!(
        data_error("v.u8bin", &b),
        DataErrorKind::Truncated { .. }
    ));
    let b = bin_header(0, 4);
    assert!(matches!(data_error("v.fbin", &b), DataErrorKind::Empty));
}

#[test]
fn vecs_hostile_headers_are_refused() {
    for d in [0i32, -1, i32::MIN] {
        let b = [d.to_le_bytes().to_vec(), vec![0; 16]].concat();
        assert!(matches!(
            data_error("v.fvecs", &b),
            DataErrorKind::BadHeader(_)
        ));
    }
    // A huge dimension: the first row is truncated.
    let b = [i32::MAX.to_le_bytes().to_vec(), vec![0; 16]].concat();
    assert!(matches!(
        data_error("v.fvecs", &b),
        DataErrorKind::Truncated { .. }
    ));
    // Rows of changing dimension.
    let mut b = Vec::new();
    for d in [2i32, 3] {
        b.extend_from_slice(&d.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
    }
    assert!(matches!(
        data_error("v.bvecs", &b),
        DataErrorKind::InconsistentDim { .. } | DataErrorKind::Truncated { .. }
    ));
}

/// Rows of a mis-sized vecs file are scanned with buffered reads: a file of millions of tiny
/// rows is refused quickly (one system call per row used to take minutes).
#[test]
fn vecs_scan_of_many_rows_is_quick() {
    let mut b = Vec::with_capacity(5 * 4_000_000 + 3);
    for _ in 0..4_000_000 {
        b.extend_from_slice(&1i32.to_le_bytes());
        b.push(7);
    }
    b.extend_from_slice(&[1, 0, 0]);
    let t = std::time::Instant::now();
    assert!(matches!(
        data_error("v.bvecs", &b),
        DataErrorKind::Truncated { .. }
    ));
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
}

fn npy(dict: &str, major: u8, hlen: Option<u32>) -> Vec<u8> {
    let mut b = b"\x93NUMPY".to_vec();
    b.extend_from_slice(&[major, 0]);
    let len = hlen.unwrap_or(dict.len() as u32);
    if major == 1 {
        b.extend_from_slice(&(len as u16).to_le_bytes());
    } else {
        b.extend_from_slice(&len.to_le_bytes());
    }
    b.extend_from_slice(dict.as_bytes());
    b.extend_from_slice(&[0; 32]);
    b
}

#[test]
fn npy_hostile_headers_are_refused() {
    let shape = |s: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {s}, }}\n");
    for s in [
        "(18446744073709551615, 18446744073709551615)",
        "(4294967296, 4294967296)",
    ] {
        assert!(matches!(
            data_error("v.npy", &npy(&shape(s), 1, None)),
            DataErrorKind::BadHeader(m) if m.contains("overflow")
        ));
    }
    assert!(matches!(
        data_error("v.npy", &npy(&shape("(4, 0)"), 1, None)),
        DataErrorKind::BadHeader(m) if m.contains("dimension 0")
    ));
    assert!(matches!(
        data_error("v.npy", &npy(&shape("(1000000000, 8)"), 1, None)),
        DataErrorKind::Truncated { .. }
    ));
    assert!(matches!(
        data_error(
            "v.npy",
            &npy(&shape("(99999999999999999999999, 8)"), 1, None)
        ),
        DataErrorKind::BadHeader(_)
    ));
    // A version-2 header length of 4 GiB: truncated, not a 4 GiB allocation.
    assert!(matches!(
        data_error("v.npy", &npy(&shape("(1, 8)"), 2, Some(u32::MAX))),
        DataErrorKind::Truncated { .. }
    ));
}

#[test]
fn ground_truth_hostile_headers_are_refused() {
    let gt = |name: &str, b: &[u8]| {
        let f = TempFile::new(name, b);
        let err = data::read_ground_truth(&f.path).expect_err("refused");
        assert_eq!(err.path, f.path);
        err.kind
    };
    let head = |nq: i32, k: i32| [nq.to_le_bytes(), k.to_le_bytes()].concat();
    assert!(matches!(
        gt("gt.bin", &[head(i32::MAX, i32::MAX), vec![0; 64]].concat()),
        DataErrorKind::Truncated { .. }
    ));
    for (nq, k) in [(-1, 4), (4, 0), (4, -7)] {
        assert!(matches!(
            gt("gt.bin", &[head(nq, k), vec![0; 64]].concat()),
            DataErrorKind::BadHeader(_)
        ));
    }
    assert!(matches!(
        gt(
            "gt.ivecs",
            &[(-3i32).to_le_bytes(), 0i32.to_le_bytes()].concat()
        ),
        DataErrorKind::BadHeader(_)
    ));
    assert!(matches!(
        gt(
            "gt.ivecs",
            &[i32::MAX.to_le_bytes(), 0i32.to_le_bytes()].concat()
        ),
        DataErrorKind::Truncated { .. }
    ));
}

// ---- an input file truncated while in use ---------------------------------------------------

/// The build path reads its input instead of mapping it: a file truncated after it was opened
/// (here, after the reader probed it) is a typed `Truncated` error, never a `SIGBUS`.
#[test]
fn input_truncated_while_open_is_a_typed_error() {
    // Larger than the reader's 1 MiB buffer, so rows are still to be read after the cut.
    let n = 40_000u32;
    let b = [bin_header(n, 16), vec![1; n as usize * 64]].concat();
    let f = TempFile::new("v.fbin", &b);
    let mut r = data::VectorReader::<f32>::open(&f.path).unwrap();
    let first = r.read_block(10).unwrap().unwrap();
    assert_eq!(first.n(), 10);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f.path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let err = r.read_block(n as usize).unwrap_err();
    assert_eq!(err.path, f.path);
    assert!(matches!(err.kind, DataErrorKind::Truncated { .. }), "{err}");
    // Whole-file reads racing a truncation: a value or a typed error, never a crash.
    for _ in 0..20 {
        std::fs::write(&f.path, &b).unwrap();
        let p = f.path.clone();
        let cut = std::thread::spawn(move || {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .and_then(|h| h.set_len(100));
        });
        match data::read_matrix::<f32>(&f.path) {
            Ok(m) => assert_eq!((m.n(), m.dim()), (n as usize, 16)),
            Err(e) => assert!(
                matches!(
                    e.kind,
                    DataErrorKind::Truncated { .. } | DataErrorKind::SizeMismatch { .. }
                ),
                "{e}"
            ),
        }
        cut.join().unwrap();
    }
}

// ---- codecs ----------------------------------------------------------------------------------

/// An absurd list length overflowed the Elias-Fano size computation.
#[test]
fn elias_fano_absurd_length_is_truncated() {
    use trawl::kinds::graph::layout::decoupled::elias_fano::{self, EfError};
    let mut out = Vec::new();
    for (n, universe) in [
        (usize::MAX, 0u32),
        (usize::MAX, u32::MAX),
        (usize::MAX / 2, 7),
    ] {
        let r = elias_fano::decode(&[0xff; 64], n, universe, &mut out);
        assert!(matches!(r, Err(EfError::Truncated { .. })), "{r:?}");
    }
}

/// Decoding with no code tables looped forever (the fast path consumed nothing) or divided by
/// zero.
#[test]
fn huffman_without_tables_is_an_error() {
    use trawl::kinds::graph::layout::decoupled::huffman::{self, HuffError};
    let mut out = [0u8; 16];
    let r = huffman::decode(&[], &[0x55; 32], &mut out);
    assert!(matches!(r, Err(HuffError::BadLengths(_))), "{r:?}");
    let r = huffman::decode_split(&[], &[0x55; 32], &mut out);
    assert!(matches!(r, Err(HuffError::BadLengths(_))), "{r:?}");
    assert_eq!(huffman::coded_bits(&[], &[1, 2]), None);
}

// ---- issue 39: decoupled page counts, the IVF files ----------------------------------------

/// A data page claiming more items than it holds (the last page one more vector than `n`,
/// checksums re-sealed) panicked with an index out of bounds in `CompressedVectorFile::scan`
/// (`trawl info FILE --verify`); every reader of a page checks its count against the sparse
/// index now (the graph file's pages share the check).
#[test]
fn decoupled_page_claiming_more_items_is_refused() {
    for nth in 0..2 {
        let b = seed_file("dvectors", nth);
        let f = TempFile::new("v.trawl", &b);
        let v = CompressedVectorFile::open(&f.path).unwrap();
        let n = v.geometry().n as u32;
        let last = v.data_pages() as usize;
        drop(f);
        // The last page's count one more; then the first page's (it would claim the next
        // page's first vector).
        for page in [last, 1] {
            let at = page * PAGE + 8;
            let count = u64::from(u16::from_le_bytes([b[at], b[at + 1]]));
            let forged = forged("dvectors", nth, &[(at, 2, count + 1)]);
            let f = TempFile::new("v.trawl", &forged);
            let v = CompressedVectorFile::open(&f.path).unwrap();
            let e = v.scan(|_, _| {}).unwrap_err();
            assert_eq!(e.path, f.path);
            invalid_containing(e.kind, "claims");
            // A single read of a vector on that page is refused too.
            let id = if page == last { n - 1 } else { 0 };
            let p = v.locate(id);
            let mut out = vec![0u8; v.geometry().vector_bytes()];
            let err = v
                .decode(id, p, &forged[p as usize * PAGE..][..PAGE], true, &mut out)
                .unwrap_err();
            assert!(err.contains("claims"), "{err}");
        }
    }
    // The graph file's pages: the same forgery.
    let b = seed_file("dgraph", 0);
    let d = u64::from_le_bytes(b[52..60].try_into().unwrap()) as usize;
    for page in [d, 1] {
        let at = page * PAGE + 8;
        let count = u64::from(u16::from_le_bytes([b[at], b[at + 1]]));
        let forged = forged("dgraph", 0, &[(at, 2, count + 1)]);
        let f = TempFile::new("g.trawl", &forged);
        let g = GraphFile::open(&f.path).unwrap();
        let e = g.verify_all().unwrap_err();
        assert_eq!(e.path, f.path);
        invalid_containing(e.kind, "claims");
        let e = g.scan_coded(|_, _, _| {}).unwrap_err();
        invalid_containing(e.kind, "claims");
    }
}

fn index_forged(kind: &str, nth: usize, fields: &[(usize, usize, u64)]) -> Vec<u8> {
    let mut b = harness::index_seed_file(kind, nth);
    for &(at, width, v) in fields {
        set_field(&mut b, at, width, v);
    }
    let k = harness::INDEX_KINDS
        .iter()
        .position(|&x| x == kind)
        .unwrap();
    harness::reseal_index(k, &mut b, true);
    b
}

#[test]
fn ivf_seeds_are_valid() {
    use trawl::kinds::ivf::file::IvfMeta;
    for nth in 0..2 {
        let f = TempFile::new("ivf.trawl", &harness::index_seed_file("ivf", nth));
        let m = IvfMeta::load(&f.path).unwrap();
        m.check_lists().unwrap();
        let mut b = harness::index_seed_file("ivf", nth);
        harness::reseal_index(0, &mut b, true);
        assert_eq!(b, harness::index_seed_file("ivf", nth));
    }
    for nth in 0..3 {
        let b = harness::index_seed_file("ivf_vectors", nth);
        let f = TempFile::new("ivf-vectors.trawl", &b);
        trawl::kinds::slot_file::SlotFile::open(&f.path).unwrap();
        let mut r = b.clone();
        harness::reseal_index(1, &mut r, true);
        assert_eq!(r, b);
    }
    let mut b = harness::index_seed_file("wal", 0);
    let f = TempFile::new("wal.trawl", &b);
    assert_eq!(
        trawl::kinds::graph::updates::wal::read_log(&f.path)
            .unwrap()
            .records
            .len(),
        4
    );
    harness::reseal_index(3, &mut b, true);
    assert_eq!(b, harness::index_seed_file("wal", 0));
}

/// The centroid graph's degree (payload offset 42) at 2^32 − 1 or 2^24 aborted on a
/// lists × degree allocation.
#[test]
fn ivf_huge_centroid_degree_is_refused() {
    use trawl::kinds::ivf::file::IvfMeta;
    for r in [u64::from(u32::MAX), 1 << 24, 65_536] {
        let b = index_forged("ivf", 0, &[(32 + 42, 4, r)]);
        invalid_containing(file_error(&b, "ivf.trawl", IvfMeta::load), "largest degree");
    }
    // A list count the payload cannot hold.
    let b = index_forged("ivf", 0, &[(32 + 14, 4, u64::from(u32::MAX))]);
    invalid_containing(file_error(&b, "ivf.trawl", IvfMeta::load), "do not fit");
}

/// A vector count (`n`, payload offset 0) beyond the ids the posting lists hold: the per-vector
/// tables of the list checks allocated 16 GiB (found by the `index_files` fuzz target).
#[test]
fn ivf_vector_count_beyond_the_lists_is_refused() {
    use trawl::kinds::ivf::file::IvfMeta;
    for n in [u64::from(u32::MAX) - 1, 1 << 30, 100_000] {
        let b = index_forged("ivf", 0, &[(32, 8, n)]);
        invalid_containing(
            file_error(&b, "ivf.trawl", IvfMeta::load),
            "posting lists hold",
        );
    }
}

/// NaN, infinite or overflowing centroids (payload offset 50 on) are refused.
#[test]
fn ivf_non_finite_centroids_are_refused() {
    use trawl::kinds::ivf::file::IvfMeta;
    for (bits, needle) in [
        (f32::NAN.to_bits(), "non-finite"),
        (f32::INFINITY.to_bits(), "non-finite"),
        (f32::NEG_INFINITY.to_bits(), "non-finite"),
        (3e38f32.to_bits(), "too large"),
    ] {
        let b = index_forged("ivf", 0, &[(32 + 50 + 4, 4, u64::from(bits))]);
        invalid_containing(file_error(&b, "ivf.trawl", IvfMeta::load), needle);
    }
}

/// A data-page count near `u64::MAX` overflowed the IVF vector file's size (`D · 4`).
#[test]
fn ivf_vectors_huge_page_count_is_refused() {
    for d in [u64::MAX, u64::MAX / 4 + 1, 1 << 62, 1 << 40] {
        let b = index_forged("ivf_vectors", 0, &[(28, 8, d)]);
        invalid_containing(
            file_error(&b, "ivf-vectors.trawl", |p| {
                trawl::kinds::slot_file::SlotFile::open(p)
            }),
            "data pages",
        );
    }
}

/// The refinement codes' seeds load; a forged count, bit width or dimension is refused by the
/// planner's header read and by the load, before anything is allocated for it. (A count near
/// 2^64 overflowed the size check once: found by the fuzzing smoke run.)
#[test]
fn refine_seeds_load_and_forged_headers_are_refused() {
    use trawl::kinds::graph::refine_file::{load, RefineHeader};
    for nth in 0..2 {
        let f = TempFile::new("refine.trawl", &harness::index_seed_file("refine", nth));
        let h = RefineHeader::read(&f.path).unwrap();
        let (codes, back) = load(&f.path, 12, 6, 0x5eed_0002, trawl::Metric::L2).unwrap();
        assert_eq!((codes.len(), back), (12, h));
    }
    let forged_fields = [
        (32 + 4, 8, 1u64 << 40),
        (32 + 4, 8, u64::MAX / 3),
        (32 + 16, 1, 3),
        (32 + 12, 4, 0),
    ];
    for (at, width, v) in forged_fields {
        let b = index_forged("refine", 0, &[(at, width, v)]);
        let f = TempFile::new("refine.trawl", &b);
        assert!(RefineHeader::read(&f.path).is_err(), "{at}: {v}");
        let e = load(&f.path, 12, 6, 0x5eed_0002, trawl::Metric::L2).unwrap_err();
        assert_eq!(e.path, f.path);
    }
}
