use crate::dir::FileErrorKind;
use crate::kinds::graph::layout::packed::*;
use crate::progress::Control;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn meta(dtype: DType, dim: usize, n: u64, r: usize) -> PackedMeta {
    PackedMeta {
        dtype,
        metric: Metric::L2,
        dim,
        n,
        r,
        medoid: (n / 2) as u32,
        pq_bytes: 8,
        pq_crc: 0xdead_beef,
        pq_codes_crc: 7,
        neighbor_code_bytes: 0,
        permuted: false,
    }
}

/// Random vectors and adjacency lists of random degree ≤ r.
fn fixture<T: crate::Element>(
    n: usize,
    dim: usize,
    r: usize,
    gen: impl Fn(&mut ChaCha8Rng) -> T,
) -> (Vec<Vec<T>>, Vec<Vec<u32>>) {
    let mut rng = ChaCha8Rng::seed_from_u64(n as u64 * 31 + dim as u64);
    let vecs = (0..n)
        .map(|_| (0..dim).map(|_| gen(&mut rng)).collect())
        .collect();
    let adj = (0..n)
        .map(|_| {
            let d = rng.gen_range(0..=r);
            (0..d).map(|_| rng.gen_range(0..n as u32)).collect()
        })
        .collect();
    (vecs, adj)
}

fn write<T: crate::Element>(
    path: &std::path::Path,
    m: PackedMeta,
    vecs: &[Vec<T>],
    adj: &[Vec<u32>],
) -> u64 {
    let mut w = PackedWriter::create(path, m).unwrap();
    for (v, a) in vecs.iter().zip(adj) {
        w.push(v, a).unwrap();
    }
    w.finish().unwrap()
}

/// Reads every record back through the geometry, as a search would (whole pages at
/// `locate`), and compares it bit for bit.
fn check_round_trip<T: crate::Element>(
    dtype: DType,
    dim: usize,
    n: usize,
    r: usize,
    gen: impl Fn(&mut ChaCha8Rng) -> T,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let m = meta(dtype, dim, n as u64, r);
    let (vecs, adj) = fixture(n, dim, r, gen);
    let bytes = write(&path, m, &vecs, &adj);
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(raw.len() as u64, bytes);
    assert_eq!(raw.len() % PAGE_BYTES, 0);
    let f = PackedFile::open(&path).unwrap();
    assert_eq!(*f.meta(), m);
    let geo = *f.geometry();
    f.verify_all(&Control::silent()).unwrap();
    let mut scratch = Vec::new();
    for i in 0..n as u32 {
        let (page, at) = geo.locate(i);
        assert!(
            at + geo.record_bytes <= geo.read_pages() * PAGE_BYTES,
            "record straddles"
        );
        let start = page as usize * PAGE_BYTES;
        let pages = &raw[start..start + geo.read_pages() * PAGE_BYTES];
        f.check_pages(page, pages).unwrap();
        let rec = f.record(i, pages).unwrap();
        assert_eq!(
            rec.vector::<T>(&mut scratch),
            &vecs[i as usize][..],
            "vector {i}"
        );
        assert_eq!(
            rec.neighbors().collect::<Vec<_>>(),
            adj[i as usize],
            "list {i}"
        );
    }
}

#[test]
fn round_trip_records_sharing_pages() {
    // 5 records per page, last page partly filled.
    check_round_trip(DType::F32, 128, 1003, 64, |r| r.gen::<f32>());
    // u8 with an odd dimension: records of odd length.
    check_round_trip(DType::U8, 37, 777, 9, |r| r.gen::<u8>());
    check_round_trip(DType::I8, 3, 50, 1, |r| r.gen::<i8>());
    // A single node.
    check_round_trip(DType::F32, 4, 1, 3, |r| r.gen::<f32>());
}

#[test]
fn round_trip_many_records_per_page() {
    // 12-byte records: 341 per page, no cap on records per page.
    let m = meta(DType::U8, 4, 10, 1);
    assert_eq!(PackedGeometry::of(&m).unwrap().per_page, 341);
    check_round_trip(DType::U8, 4, 2000, 1, |r| r.gen::<u8>());
}

#[test]
fn round_trip_record_exactly_one_page_and_spanning_pages() {
    // 4·960 + 4 + 4·63 = 4096: exactly one record per page.
    let m = meta(DType::F32, 960, 10, 63);
    let g = PackedGeometry::of(&m).unwrap();
    assert_eq!(
        (g.record_bytes, g.per_page, g.pages_per_record),
        (4096, 1, 1)
    );
    check_round_trip(DType::F32, 960, 30, 63, |r| r.gen::<f32>());
    // 960-d with R = 64: 4100 bytes, two pages per record.
    let m = meta(DType::F32, 960, 10, 64);
    let g = PackedGeometry::of(&m).unwrap();
    assert_eq!((g.per_page, g.pages_per_record), (0, 2));
    check_round_trip(DType::F32, 960, 21, 64, |r| r.gen::<f32>());
    // Three pages per record.
    check_round_trip(DType::F32, 2500, 7, 16, |r| r.gen::<f32>());
}

#[test]
fn corruption_and_truncation_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let (vecs, adj) = fixture(300, 16, 8, |r| r.gen::<f32>());
    write(&path, meta(DType::F32, 16, 300, 8), &vecs, &adj);
    let good = std::fs::read(&path).unwrap();
    let f = PackedFile::open(&path).unwrap();
    let geo = *f.geometry();
    // Header bytes (any flip, including reserved ones): refused at open.
    for at in [
        0, 9, 17, 21, 25, 33, 37, 41, 53, 57, 73, 77, 100, 4000, 4093,
    ] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let err = PackedFile::open(&path).unwrap_err();
        assert!(
            matches!(
                err.kind,
                FileErrorKind::Checksum { .. } | FileErrorKind::WrongMagic { .. }
            ),
            "flip at {at}: {err}"
        );
    }
    // Checksum table: refused at open.
    let mut bad = good.clone();
    let table_at = (1 + geo.data_pages as usize) * PAGE_BYTES + 5;
    bad[table_at] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    assert!(matches!(
        PackedFile::open(&path).unwrap_err().kind,
        FileErrorKind::Checksum { .. }
    ));
    // A data page: opens, but the page check and full verification both fail.
    let mut bad = good.clone();
    bad[PAGE_BYTES * 3 + 77] ^= 4;
    std::fs::write(&path, &bad).unwrap();
    let f = PackedFile::open(&path).unwrap();
    assert_eq!(
        f.check_page(3, &bad[3 * PAGE_BYTES..4 * PAGE_BYTES]),
        Err(3)
    );
    assert!(f
        .check_page(2, &bad[2 * PAGE_BYTES..3 * PAGE_BYTES])
        .is_ok());
    let err = f.verify_all(&Control::silent()).unwrap_err();
    assert!(
        matches!(err.kind, FileErrorKind::PageChecksum { page: 3 }),
        "{err}"
    );
    // Truncated or extended: refused at open.
    for len in [0, 100, PAGE_BYTES, good.len() - PAGE_BYTES, good.len() - 1] {
        std::fs::write(&path, &good[..len]).unwrap();
        let err = PackedFile::open(&path).unwrap_err();
        assert!(
            matches!(err.kind, FileErrorKind::SizeMismatch { .. }),
            "len {len}: {err}"
        );
    }
    let mut longer = good.clone();
    longer.extend_from_slice(&[0u8; PAGE_BYTES]);
    std::fs::write(&path, &longer).unwrap();
    assert!(matches!(
        PackedFile::open(&path).unwrap_err().kind,
        FileErrorKind::SizeMismatch { .. }
    ));
    // Another kind of file.
    std::fs::write(&path, vec![7u8; 3 * PAGE_BYTES]).unwrap();
    assert!(matches!(
        PackedFile::open(&path).unwrap_err().kind,
        FileErrorKind::WrongMagic { .. }
    ));
}

#[test]
fn malformed_records_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let (vecs, adj) = fixture(40, 8, 4, |r| r.gen::<f32>());
    write(&path, meta(DType::F32, 8, 40, 4), &vecs, &adj);
    let f = PackedFile::open(&path).unwrap();
    let raw = std::fs::read(&path).unwrap();
    let mut page = raw[PAGE_BYTES..2 * PAGE_BYTES].to_vec();
    // Degree above R.
    page[32..36].copy_from_slice(&99u32.to_le_bytes());
    assert!(f.record(0, &page).is_err());
    // A neighbour id ≥ n.
    page[32..36].copy_from_slice(&1u32.to_le_bytes());
    page[36..40].copy_from_slice(&40u32.to_le_bytes());
    assert!(f.record(0, &page).is_err());
    // Too few bytes.
    assert!(f.record(1, &page[..10]).is_err());
}

#[test]
fn writer_refuses_bad_records_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut w = PackedWriter::create(&path, meta(DType::F32, 4, 3, 2)).unwrap();
    assert!(w.push(&[0f32; 3], &[]).is_err(), "wrong dimension");
    assert!(w.push(&[0u8; 4], &[]).is_err(), "wrong element type");
    assert!(w.push(&[0f32; 4], &[0, 1, 2]).is_err(), "degree above R");
    assert!(w.push(&[0f32; 4], &[3]).is_err(), "id ≥ n");
    w.push(&[0f32; 4], &[1]).unwrap();
    assert!(w.finish().is_err(), "too few records");
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "temporary file removed"
    );
}

/// A permuted file with neighbour codes: every record comes back at the slot the order table
/// gives, with its codes; `ids_on_page` and `records_on_page` follow the table, empty slots
/// included; a bad order is refused at creation.
#[test]
fn round_trip_permuted_with_neighbour_codes() {
    use rand::seq::SliceRandom;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.trawl");
    let (n, dim, r, c) = (203usize, 16usize, 6usize, 8usize);
    let m = PackedMeta {
        neighbor_code_bytes: c,
        ..meta(DType::F32, dim, n as u64, r)
    };
    let geo = PackedGeometry::of(&PackedMeta {
        permuted: true,
        ..m
    })
    .unwrap();
    let per = geo.per_page;
    assert!(per > 1);
    let (vecs, adj) = fixture(n, dim, r, |g| g.gen::<f32>());
    let code = |id: u32| -> Vec<u8> { (0..c).map(|k| (id as usize * 7 + k) as u8).collect() };
    // A random order with the empty slots spread over the pages.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.resize(geo.slots() as usize, EMPTY_SLOT);
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(9));
    assert!(PackedWriter::create(
        &path,
        PackedMeta {
            permuted: true,
            ..m
        }
    )
    .is_err());
    let mut dup = order.clone();
    let i = dup.iter().position(|&x| x != EMPTY_SLOT).unwrap();
    let j = dup.iter().rposition(|&x| x != EMPTY_SLOT).unwrap();
    dup[j] = dup[i];
    assert!(PackedWriter::create_permuted(&path, m, dup).is_err());
    let mut w = PackedWriter::create_permuted(&path, m, order.clone()).unwrap();
    let med = code(m.medoid);
    w.set_medoid_code(&med).unwrap();
    while let Some(id) = w.next_node() {
        let a = &adj[id as usize];
        let codes: Vec<u8> = a.iter().flat_map(|&x| code(x)).collect();
        w.push_with_codes(&vecs[id as usize], a, &codes).unwrap();
    }
    let bytes = w.finish().unwrap();
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(raw.len() as u64, bytes);
    let f = PackedFile::open(&path).unwrap();
    assert!(f.is_permuted());
    assert_eq!(f.order().unwrap(), &order[..]);
    assert_eq!(f.medoid_code(), &med[..]);
    f.verify_all(&Control::silent()).unwrap();
    let mut scratch = Vec::new();
    for id in 0..n as u32 {
        let slot = order.iter().position(|&x| x == id).unwrap() as u64;
        let (page, at) = f.locate(id);
        assert_eq!((page, at), geo.locate_slot(slot));
        let pages = &raw[page as usize * PAGE_BYTES..(page as usize + 1) * PAGE_BYTES];
        let rec = f.record(id, pages).unwrap();
        assert_eq!(rec.vector::<f32>(&mut scratch), &vecs[id as usize][..]);
        let nbs: Vec<u32> = rec.neighbors().collect();
        assert_eq!(nbs, adj[id as usize]);
        for (k, &x) in nbs.iter().enumerate() {
            assert_eq!(rec.neighbor_code(k).unwrap(), &code(x)[..]);
        }
        assert!(rec.neighbor_code(nbs.len()).is_none());
    }
    for page in 1..=geo.data_pages {
        let mut ids = Vec::new();
        f.ids_on_page(page, &mut ids);
        let first = (page - 1) as usize * per;
        let want: Vec<u32> = order[first..first + per]
            .iter()
            .copied()
            .filter(|&x| x != EMPTY_SLOT)
            .collect();
        assert_eq!(ids, want);
        assert_eq!(f.records_on_page(page), want.len() as u64);
    }
    // A flipped bit in the order table or the medoid code is caught at open.
    for at in [raw.len() - PAGE_BYTES + 5, 104] {
        let mut bad = raw.clone();
        bad[at] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert!(PackedFile::open(&path).is_err(), "byte {at}");
    }
}
