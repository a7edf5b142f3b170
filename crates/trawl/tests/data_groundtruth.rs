//! Ground-truth files: the DiskANN / big-ann layout (with and without distances) and `.ivecs`.

use proptest::prelude::*;
use trawl::data::{
    read_ground_truth, read_ivecs, write_ground_truth, write_ivecs, DataErrorKind, GroundTruth,
};

fn gt(nq: usize, k: usize, seed: u32, with_dists: bool) -> GroundTruth {
    let ids: Vec<u32> = (0..nq * k)
        .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 2)
        .collect();
    let dists = if with_dists {
        (0..nq * k).map(|i| i as f32 * 0.125).collect()
    } else {
        Vec::new()
    };
    GroundTruth { nq, k, ids, dists }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn ground_truth_round_trips(nq in 1usize..40, k in 1usize..20, seed in any::<u32>(), d in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let g = gt(nq, k, seed, d);
        let bin = dir.path().join("gt.bin");
        write_ground_truth(&bin, &g).unwrap();
        prop_assert_eq!(std::fs::metadata(&bin).unwrap().len() as usize, 8 + nq * k * if d { 8 } else { 4 });
        prop_assert_eq!(&read_ground_truth(&bin).unwrap(), &g);
        let iv = dir.path().join("gt.ivecs");
        write_ivecs(&iv, &g).unwrap();
        let back = read_ground_truth(&iv).unwrap();
        prop_assert_eq!(&back.ids, &g.ids);
        prop_assert!(!back.has_dists());
        prop_assert!(back.dists(0).is_empty());
        prop_assert_eq!(back, read_ivecs(&iv).unwrap());
    }
}

#[test]
fn bad_ground_truth_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("gt.bin");
    write_ground_truth(&p, &gt(3, 4, 1, true)).unwrap();
    let good = std::fs::read(&p).unwrap();
    std::fs::write(&p, &good[..good.len() - 1]).unwrap();
    let err = read_ground_truth(&p).unwrap_err();
    assert!(err.to_string().contains("gt.bin"), "{err}");
    assert!(matches!(
        err.kind,
        DataErrorKind::Truncated {
            expected: 104,
            actual: 103
        }
    ));
    std::fs::write(&p, [good.clone(), vec![0]].concat()).unwrap();
    assert!(matches!(
        read_ground_truth(&p).unwrap_err().kind,
        DataErrorKind::SizeMismatch { .. }
    ));
    std::fs::write(&p, [0u8; 8]).unwrap();
    assert!(matches!(
        read_ground_truth(&p).unwrap_err().kind,
        DataErrorKind::BadHeader(_)
    ));
    std::fs::write(&p, []).unwrap();
    assert!(matches!(
        read_ground_truth(&p).unwrap_err().kind,
        DataErrorKind::Empty
    ));

    let iv = dir.path().join("gt.ivecs");
    write_ivecs(&iv, &gt(3, 4, 1, false)).unwrap();
    let good = std::fs::read(&iv).unwrap();
    std::fs::write(&iv, &good[..good.len() - 1]).unwrap();
    assert!(matches!(
        read_ivecs(&iv).unwrap_err().kind,
        DataErrorKind::Truncated { .. }
    ));
    let mut bad = good.clone();
    bad[20..24].copy_from_slice(&5i32.to_le_bytes());
    std::fs::write(&iv, &bad).unwrap();
    assert!(matches!(
        read_ivecs(&iv).unwrap_err().kind,
        DataErrorKind::InconsistentDim {
            row: 1,
            found: 5,
            ..
        }
    ));
    let mut neg = good;
    neg[4..8].copy_from_slice(&(-1i32).to_le_bytes());
    std::fs::write(&iv, &neg).unwrap();
    assert!(matches!(
        read_ivecs(&iv).unwrap_err().kind,
        DataErrorKind::BadHeader(_)
    ));

    let mut inconsistent = gt(2, 2, 0, true);
    inconsistent.dists.pop();
    let out = dir.path().join("out.bin");
    assert!(write_ground_truth(&out, &inconsistent).is_err());
    assert!(!out.exists());
}
