//! Tests of the range ground-truth file: round trips and every way a file can be damaged.

use super::*;

fn sample() -> RangeResults {
    let mut r = RangeResults::new();
    r.push([(3, -1.5), (0, -0.0), (7, 0.0)]);
    r.push([]);
    r.push([(i32::MAX as u64, 2.5)]);
    r.push([]);
    r.push([(1, f32::INFINITY), (2, 1e-30)]);
    r
}

fn file_bytes(nq: i32, total: i32, counts: &[i32], ids: &[i32], dists: &[f32]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&nq.to_le_bytes());
    b.extend_from_slice(&total.to_le_bytes());
    for c in counts {
        b.extend_from_slice(&c.to_le_bytes());
    }
    for id in ids {
        b.extend_from_slice(&id.to_le_bytes());
    }
    for d in dists {
        b.extend_from_slice(&d.to_le_bytes());
    }
    b
}

fn read_bytes(bytes: &[u8]) -> Result<RangeResults> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("range.bin");
    std::fs::write(&path, bytes).unwrap();
    read_range_results(&path)
}

fn round_trip(r: &RangeResults) -> RangeResults {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("range.bin");
    write_range_results(&path, r).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(len, 8 + 4 * r.nq() as u64 + 8 * r.total() as u64);
    assert!(!dir.path().join("range.bin.tmp").exists());
    read_range_results(&path).unwrap()
}

fn bits(d: &[f32]) -> Vec<u32> {
    d.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn round_trip_keeps_everything_bit_for_bit() {
    let r = sample();
    let back = round_trip(&r);
    assert_eq!(back.lims, r.lims);
    assert_eq!(back.ids, r.ids);
    assert_eq!(bits(&back.dists), bits(&r.dists));
    assert_eq!(back.nq(), 5);
    assert_eq!(back.ids_of(0), &[3, 0, 7]);
    assert!(back.ids_of(1).is_empty());
    assert_eq!(back.dists_of(4)[0], f32::INFINITY);
}

#[test]
fn round_trip_of_queries_without_results() {
    let mut r = RangeResults::new();
    for _ in 0..4 {
        r.push([]);
    }
    let back = round_trip(&r);
    assert_eq!(back, r);
    assert_eq!(back.lims, vec![0; 5]);
    assert_eq!(back.total(), 0);
}

#[test]
fn round_trip_of_zero_queries() {
    let back = round_trip(&RangeResults::new());
    assert_eq!(back, RangeResults::new());
    assert_eq!(back.nq(), 0);
    // The derived default (no lims at all) is zero queries too.
    assert_eq!(round_trip(&RangeResults::default()), RangeResults::new());
}

#[test]
fn writer_rejects_inconsistent_or_oversized_results() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.bin");
    let mut bad = Vec::new();
    let mut r = sample();
    r.lims.swap(2, 3); // [0, 3, 4, 3, ..]: not monotone
    bad.push(r);
    let mut r = sample();
    r.lims[0] = 1;
    bad.push(r);
    let mut r = sample();
    r.lims.pop(); // does not end at ids.len()
    bad.push(r);
    let mut r = sample();
    r.dists.pop();
    bad.push(r);
    let mut r = sample();
    r.ids[0] = i32::MAX as u64 + 1;
    bad.push(r);
    bad.push(RangeResults {
        lims: Vec::new(),
        ids: vec![1],
        dists: vec![0.0],
    });
    for r in bad {
        let err = write_range_results(&path, &r).unwrap_err();
        assert!(
            matches!(err.kind, DataErrorKind::InvalidInput(_)),
            "{r:?}: {err}"
        );
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(!path.exists());
    }
}

#[test]
fn truncated_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("range.bin");
    write_range_results(&path, &sample()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    for cut in 0..bytes.len() {
        let err = read_bytes(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(err.kind, DataErrorKind::Truncated { .. }),
            "cut at {cut}: {err}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let err = read_bytes(&longer).unwrap_err();
    assert!(
        matches!(err.kind, DataErrorKind::SizeMismatch { .. }),
        "{err}"
    );
}

#[test]
fn forged_headers_are_rejected_before_allocating() {
    // Huge counts announced by a tiny file: refused by the size check.
    for (nq, total) in [(1, i32::MAX), (i32::MAX, 0), (i32::MAX, i32::MAX)] {
        let err = read_bytes(&file_bytes(nq, total, &[1], &[0], &[0.5])).unwrap_err();
        match err.kind {
            DataErrorKind::Truncated { expected, actual } => {
                assert_eq!(expected, 8 + 4 * nq as u64 + 8 * total as u64);
                assert_eq!(actual, 20);
            }
            other => panic!("{nq} × {total}: {other}"),
        }
    }
    for (nq, total) in [(-1, 0), (0, -1), (i32::MIN, i32::MIN)] {
        let err = read_bytes(&file_bytes(nq, total, &[], &[], &[])).unwrap_err();
        assert!(matches!(err.kind, DataErrorKind::BadHeader(_)), "{err}");
    }
}

#[test]
fn inconsistent_counts_and_negative_ids_are_rejected() {
    let bad = [
        // Counts sum to 1, the header says 2.
        file_bytes(2, 2, &[1, 0], &[0, 1], &[0.0, 1.0]),
        // Counts sum to 3, the header says 2.
        file_bytes(2, 2, &[1, 2], &[0, 1], &[0.0, 1.0]),
        // A negative count (the sum still matches).
        file_bytes(2, 2, &[3, -1], &[0, 1], &[0.0, 1.0]),
        // A huge count.
        file_bytes(2, 2, &[i32::MAX, 2], &[0, 1], &[0.0, 1.0]),
        // A negative id.
        file_bytes(1, 2, &[2], &[0, -5], &[0.0, 1.0]),
    ];
    for bytes in bad {
        let err = read_bytes(&bytes).unwrap_err();
        assert!(matches!(err.kind, DataErrorKind::BadHeader(_)), "{err}");
        assert!(err.to_string().contains("range.bin"), "{err}");
    }
    let good = read_bytes(&file_bytes(2, 2, &[0, 2], &[4, 1], &[0.0, 1.0])).unwrap();
    assert_eq!(good.lims, vec![0, 0, 2]);
    assert_eq!(good.ids, vec![4, 1]);
}

#[test]
fn missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = read_range_results(&dir.path().join("absent.bin")).unwrap_err();
    assert!(matches!(err.kind, DataErrorKind::Io(_)), "{err}");
}
