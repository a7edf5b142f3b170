use crate::dir::FileErrorKind;
use crate::io::PAGE_BYTES;
use crate::kernels::{DType, Metric};
use crate::kinds::graph::layout::decoupled::graph::{GraphFile, GraphWriter};
use crate::kinds::graph::layout::decoupled::vectors::{
    CompressedGeometry, CompressedVectorFile, CompressedVectorWriter, VectorParams, VectorPlanner,
};
use crate::kinds::graph::layout::packed::PackedMeta;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

fn meta(n: u64, r: usize) -> PackedMeta {
    PackedMeta {
        dtype: DType::F32,
        metric: Metric::L2,
        dim: 8,
        n,
        r,
        medoid: 0,
        pq_bytes: 4,
        pq_crc: 7,
        pq_codes_crc: 9,
        neighbor_code_bytes: 0,
        permuted: false,
    }
}

fn random_graph(n: usize, r: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let d = rng.gen_range(0..=r);
            let mut l: Vec<u32> = (0..d).map(|_| rng.gen_range(0..n as u32)).collect();
            l.sort_unstable();
            l.dedup();
            l
        })
        .collect()
}

fn write_graph(path: &std::path::Path, lists: &[Vec<u32>], r: usize) -> u64 {
    let mut w = GraphWriter::create(path, meta(lists.len() as u64, r)).unwrap();
    for l in lists {
        // Unsorted input is sorted by the writer.
        let mut rev = l.clone();
        rev.reverse();
        w.push(&rev).unwrap();
    }
    w.finish().unwrap()
}

fn read_page(path: &std::path::Path, page: u64) -> Vec<u8> {
    let all = std::fs::read(path).unwrap();
    all[page as usize * PAGE_BYTES..(page as usize + 1) * PAGE_BYTES].to_vec()
}

#[test]
fn graph_file_round_trips_every_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.trawl");
    // Lists at both ends: empty lists, full lists with the largest ids.
    let n = 3000;
    let mut lists = random_graph(n, 40, 1);
    lists[0] = vec![];
    lists[1] = ((n as u32 - 40)..n as u32).collect();
    lists[n - 1] = vec![n as u32 - 1];
    let bytes = write_graph(&path, &lists, 40);
    let g = GraphFile::open(&path).unwrap();
    assert_eq!(g.file_bytes(), bytes);
    assert_eq!(*g.meta(), meta(n as u64, 40));
    assert_eq!(g.edges(), lists.iter().map(|l| l.len() as u64).sum::<u64>());
    assert!(g.data_pages() > 1);
    let mut out = Vec::new();
    for (id, l) in lists.iter().enumerate() {
        let p = g.locate(id as u32);
        let page = read_page(&path, p);
        let (d, coded) = g.list_bytes(id as u32, p, &page, true).unwrap();
        assert_eq!(d, l.len());
        assert!(coded.len() <= g.cache_entry_bytes() - 4);
        g.decode_list(d, coded, &mut out).unwrap();
        assert_eq!(&out, l, "node {id}");
    }
    assert_eq!(g.verify_all().unwrap(), g.data_pages());
    // A list read from the wrong page is an error, not another node's list.
    let p = g.locate(0);
    let page = read_page(&path, p + 1);
    assert!(g.list_bytes(0, p, &page, true).is_err());
}

#[test]
fn graph_file_corruption_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.trawl");
    let lists = random_graph(2000, 32, 2);
    write_graph(&path, &lists, 32);
    let good = std::fs::read(&path).unwrap();
    let g = GraphFile::open(&path).unwrap();
    // A flipped bit anywhere in a data page fails its CRC.
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for _ in 0..50 {
        let p = rng.gen_range(1..=g.data_pages());
        let at = rng.gen_range(0..PAGE_BYTES);
        let mut page = good[p as usize * PAGE_BYTES..][..PAGE_BYTES].to_vec();
        page[at] ^= 1 << rng.gen_range(0..8);
        let first =
            crate::kinds::graph::layout::decoupled::graph::le32(&good, p as usize * PAGE_BYTES + 4);
        assert!(
            g.list_bytes(first, p, &page, true).is_err(),
            "page {p} byte {at}"
        );
        let mut bad = good.clone();
        bad[p as usize * PAGE_BYTES + at] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let err = GraphFile::open(&path).unwrap().verify_all().unwrap_err();
        assert!(
            matches!(err.kind, FileErrorKind::PageChecksum { .. }),
            "{err}"
        );
    }
    // Header, sparse index, truncation.
    for at in [0usize, 30, 100, good.len() - 10] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        assert!(GraphFile::open(&path).is_err(), "byte {at}");
    }
    std::fs::write(&path, &good[..good.len() - PAGE_BYTES]).unwrap();
    assert!(matches!(
        GraphFile::open(&path).unwrap_err().kind,
        FileErrorKind::SizeMismatch { .. }
    ));
}

#[test]
fn graph_writer_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let mut w = GraphWriter::create(&path, meta(10, 4)).unwrap();
    assert!(w.push(&[1, 2, 3, 4, 5]).is_err(), "above the degree bound");
    assert!(w.push(&[10]).is_err(), "id out of range");
    w.push(&[1]).unwrap();
    assert!(w.finish().is_err(), "too few lists");
    assert!(!path.exists());
    assert!(
        GraphWriter::create(&path, meta(10, 70_000)).is_err(),
        "degree above u16"
    );
    assert!(
        GraphWriter::create(&path, meta(1 << 31, 2000)).is_err(),
        "list above a page"
    );
    assert!(GraphWriter::create(&path, meta(1 << 31, 1000)).is_ok());
}

fn write_vectors(
    path: &std::path::Path,
    dtype: DType,
    dim: usize,
    data: &[u8],
    params: &VectorParams,
) -> CompressedVectorFile {
    let v = dim * dtype.size_bytes();
    let n = (data.len() / v) as u64;
    let geo = CompressedGeometry::new(dtype, dim, n, params).unwrap();
    let mut p = VectorPlanner::new(geo).unwrap();
    for x in data.chunks_exact(v) {
        p.push(x).unwrap();
    }
    let mut w = CompressedVectorWriter::create(path, p.finish().unwrap()).unwrap();
    for x in data.chunks_exact(v) {
        w.push(x).unwrap();
    }
    let rep = w.finish().unwrap();
    let f = CompressedVectorFile::open(path).unwrap();
    assert_eq!(*f.report(), rep);
    f
}

fn check_all(f: &CompressedVectorFile, path: &std::path::Path, data: &[u8]) {
    let v = f.geometry().vector_bytes();
    let all = std::fs::read(path).unwrap();
    let mut out = vec![0u8; v];
    for (id, x) in data.chunks_exact(v).enumerate() {
        let p = f.locate(id as u32);
        let page = &all[p as usize * PAGE_BYTES..][..PAGE_BYTES];
        f.decode(id as u32, p, page, true, &mut out).unwrap();
        assert_eq!(&out[..], x, "vector {id}");
    }
    let mut seen = 0usize;
    f.scan(|id, bytes| {
        assert_eq!(bytes, &data[id as usize * v..][..v]);
        seen += 1;
    })
    .unwrap();
    assert_eq!(seen, data.len() / v);
}

/// Small chunks and segments so a few thousand vectors span several of each.
fn small() -> VectorParams {
    VectorParams {
        beta: 0.05,
        segment_bytes: 64 << 10,
        ..VectorParams::default()
    }
}

#[test]
fn vectors_round_trip_bit_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v");
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    // f32 embeddings-like data (normalised Gaussian) plus adversarial rows.
    let dim = 48;
    let n = 3000;
    let mut rows: Vec<f32> = Vec::with_capacity(n * dim);
    for i in 0..n {
        match i % 97 {
            0 => rows.extend(std::iter::repeat_n(0.25f32, dim)), // constant
            1 => {
                rows.extend((0..dim).map(|j| f32::from_bits(0x3f80_0000 + j as u32 * 0x0101_0101)))
            }
            2 => rows.extend((0..dim).map(|_| f32::from_bits(rng.gen::<u32>() & 0x7f7f_ffff))),
            _ => {
                let v: Vec<f32> = (0..dim).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                rows.extend(v.iter().map(|x| x / norm));
            }
        }
    }
    let data: Vec<u8> = bytemuck::cast_slice(&rows).to_vec();
    let f = write_vectors(&path, DType::F32, dim, &data, &small());
    assert!(f.geometry().segments() > 1 && f.geometry().chunks() > f.geometry().segments());
    assert!(
        f.report().payload_bytes < data.len() as u64,
        "coding shrinks the vectors"
    );
    check_all(&f, &path, &data);

    // u8 data with all-distinct bytes in every vector, and constant u8 vectors.
    let dim = 256;
    let mut data = Vec::new();
    for i in 0..500 {
        if i % 2 == 0 {
            let mut row: Vec<u8> = (0..=255u8).collect();
            row.rotate_left(i % 256);
            data.extend(row);
        } else {
            data.extend(std::iter::repeat_n(i as u8, dim));
        }
    }
    let f = write_vectors(&path, DType::U8, dim, &data, &small());
    check_all(&f, &path, &data);
}

#[test]
fn incompressible_vectors_are_stored_raw() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v");
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let data: Vec<u8> = (0..64 * 400).map(|_| rng.gen()).collect();
    let f = write_vectors(&path, DType::U8, 64, &data, &VectorParams::default());
    assert!(f.report().raw_vectors > 0);
    check_all(&f, &path, &data);
}

#[test]
fn xor_is_chosen_when_it_lowers_the_entropy() {
    // Every vector is a fixed random pattern with one byte changed: XOR with the base leaves
    // mostly zeros.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v");
    let mut rng = rand::rngs::StdRng::seed_from_u64(6);
    let pattern: Vec<u8> = (0..128).map(|_| rng.gen()).collect();
    let mut data = Vec::new();
    for i in 0..2000 {
        let mut row = pattern.clone();
        row[i % 128] = rng.gen();
        data.extend(row);
    }
    let f = write_vectors(&path, DType::U8, 128, &data, &VectorParams::default());
    assert_eq!(f.report().xor_chunks, f.report().chunks);
    assert!(f.report().payload_bytes * 4 < data.len() as u64);
    check_all(&f, &path, &data);
}

#[test]
fn vector_file_corruption_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v");
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let rows: Vec<f32> = (0..32 * 2000)
        .map(|_| rng.gen_range(-1.0f32..1.0))
        .collect();
    let data: Vec<u8> = bytemuck::cast_slice(&rows).to_vec();
    let f = write_vectors(&path, DType::F32, 32, &data, &small());
    let good = std::fs::read(&path).unwrap();
    let mut out = vec![0u8; 128];
    for _ in 0..50 {
        let p = rng.gen_range(1..=f.data_pages());
        let at = rng.gen_range(0..PAGE_BYTES);
        let mut page = good[p as usize * PAGE_BYTES..][..PAGE_BYTES].to_vec();
        page[at] ^= 1 << rng.gen_range(0..8);
        let first =
            crate::kinds::graph::layout::decoupled::graph::le32(&good, p as usize * PAGE_BYTES + 4);
        assert!(f.decode(first, p, &page, true, &mut out).is_err());
        // Without the CRC check, decoding still never panics.
        let _ = f.decode(first, p, &page, false, &mut out);
    }
    for at in [0usize, 20, 100, good.len() - 5] {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        std::fs::write(&path, &bad).unwrap();
        assert!(CompressedVectorFile::open(&path).is_err(), "byte {at}");
    }
    std::fs::write(&path, &good[..good.len() - 1]).unwrap();
    assert!(CompressedVectorFile::open(&path).is_err());
}

#[test]
fn vector_geometry_follows_beta() {
    let g = CompressedGeometry::new(DType::F32, 100, 1_000_000, &VectorParams::default()).unwrap();
    // β = 0.001: C = 412 / (0.001 − 1/1024) ≈ 17.6 MB ≈ 44K vectors of 400 bytes.
    assert!((40_000..50_000).contains(&g.chunk_vectors), "{g:?}");
    assert_eq!(g.segment_vectors % g.chunk_vectors, 0);
    assert!(CompressedGeometry::new(
        DType::F32,
        100,
        10,
        &VectorParams {
            beta: 0.0009,
            ..VectorParams::default()
        }
    )
    .is_err());
    let big = CompressedGeometry::new(DType::F32, 1100, 10, &VectorParams::default()).unwrap();
    assert!(
        VectorPlanner::new(big).is_err(),
        "vectors above a page are refused"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_vector_sets_round_trip(dim in 1usize..40, n in 1usize..600, skew in 0u8..3, seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data: Vec<u8> = (0..dim * n).map(|_| match skew {
            0 => rng.gen(),
            1 => rng.gen_range(0..4),
            _ => 200,
        }).collect();
        let f = write_vectors(&path, DType::U8, dim, &data, &small());
        check_all(&f, &path, &data);
    }

    #[test]
    fn random_graphs_round_trip(n in 1usize..1500, r in 1usize..70, seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let lists = random_graph(n, r, seed);
        write_graph(&path, &lists, r);
        let g = GraphFile::open(&path).unwrap();
        g.verify_all().unwrap();
        let mut out = Vec::new();
        for (id, l) in lists.iter().enumerate() {
            let p = g.locate(id as u32);
            let page = read_page(&path, p);
            let (d, coded) = g.list_bytes(id as u32, p, &page, true).unwrap();
            g.decode_list(d, coded, &mut out).unwrap();
            prop_assert_eq!(&out, l);
        }
    }
}
