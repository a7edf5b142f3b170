//! Vector file formats: round trips for every format × element type, detection, streaming
//! reads, memory mapping and atomic writes.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use trawl::data::{
    map_matrix, probe, probe_with, read_matrix, read_matrix_any, read_matrix_any_with,
    read_matrix_with, read_rows, write_matrix, AnyMatrix, DataErrorKind, Format, Matrix,
    ProbeOptions, VectorReader, VectorWriter,
};
use trawl::{DType, Element};

const FORMATS: [Format; 3] = [Format::Bin, Format::Vecs, Format::Npy];

fn path_for(dir: &Path, stem: &str, format: Format, dtype: DType) -> PathBuf {
    dir.join(format!("{stem}.{}", format.extension(dtype)))
}

fn random_matrix<T: Element>(bytes: &[u8], dim: usize) -> Matrix<T> {
    let n = bytes.len() / (dim * std::mem::size_of::<T>());
    let mut data = vec![T::default(); n * dim];
    let dst = bytemuck::cast_slice_mut::<T, u8>(&mut data);
    dst.copy_from_slice(&bytes[..dst.len()]);
    // Keep floats finite and comparable (no NaN payloads): map through a safe range.
    if T::DTYPE == DType::F32 {
        for x in bytemuck::cast_slice_mut::<T, f32>(&mut data) {
            if !x.is_finite() {
                *x = 1.5;
            }
        }
    }
    Matrix::from_vec(data, dim).unwrap()
}

fn round_trip<T: Element>(dir: &Path, m: &Matrix<T>) {
    for format in FORMATS {
        let path = path_for(dir, "rt", format, T::DTYPE);
        let info = write_matrix(&path, format, m).unwrap();
        assert_eq!((info.n, info.dim), (m.n() as u64, m.dim() as u64));
        let probed = probe(&path).unwrap();
        assert_eq!(
            (probed.format, probed.dtype, probed.n, probed.dim),
            (format, T::DTYPE, m.n() as u64, m.dim() as u64)
        );
        let back = read_matrix::<T>(&path).unwrap();
        assert_eq!(&back, m, "{format} {}", T::DTYPE);
        assert!(!back.is_mapped(), "read_matrix reads, it never maps");
        let mapped = map_matrix::<T>(&path, ProbeOptions::default()).unwrap();
        assert_eq!(&mapped, m);
        assert_eq!(mapped.is_mapped(), format != Format::Vecs);
        assert_eq!(read_matrix_any(&path).unwrap().dtype(), T::DTYPE);
        let blocks: Vec<T> = VectorReader::<T>::open(&path)
            .unwrap()
            .blocks(7)
            .flat_map(|b| b.unwrap().into_vec())
            .collect();
        assert_eq!(blocks, m.as_slice());
        let start = m.n() / 3;
        let part = read_rows::<T>(&path, start as u64, 5).unwrap();
        assert_eq!(part, m.slice_rows(start, 5));
        assert!(!dir
            .join(format!("rt.{}.tmp", format.extension(T::DTYPE)))
            .exists());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_format_and_type_round_trips(
        dim in 1usize..40,
        rows in 1usize..60,
        seed in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..rows * dim * 4)
            .map(|i| {
                let x = seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                (x.wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 40) as u8
            })
            .collect();
        round_trip(dir.path(), &random_matrix::<f32>(&bytes, dim));
        round_trip(dir.path(), &random_matrix::<u8>(&bytes[..rows * dim], dim));
        round_trip(dir.path(), &random_matrix::<i8>(&bytes[..rows * dim], dim));
    }
}

fn kind_of(r: Result<impl std::fmt::Debug, trawl::data::DataError>, path: &Path) -> DataErrorKind {
    let err = r.unwrap_err();
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        err.to_string().contains(name),
        "message does not name the file: {err}"
    );
    err.kind
}

fn sample_f32(n: usize, dim: usize) -> Matrix<f32> {
    Matrix::from_vec((0..n * dim).map(|x| x as f32 * 0.5).collect(), dim).unwrap()
}

#[test]
fn content_detection_without_extension() {
    let dir = tempfile::tempdir().unwrap();
    let m = sample_f32(9, 6);
    for format in FORMATS {
        let named = path_for(dir.path(), "a", format, DType::F32);
        write_matrix(&named, format, &m).unwrap();
        let anon = dir.path().join(format!("{format}.dat"));
        std::fs::rename(&named, &anon).unwrap();
        let info = probe(&anon).unwrap();
        assert_eq!(
            (info.format, info.dtype, info.n, info.dim),
            (format, DType::F32, 9, 6)
        );
        assert_eq!(read_matrix::<f32>(&anon).unwrap(), m);
    }
    // One-byte elements: u8 and i8 cannot be told apart without a hint.
    let bytes = Matrix::<u8>::from_vec((0..40).collect(), 4).unwrap();
    let path = dir.path().join("bytes.bin");
    write_matrix(&path, Format::Bin, &bytes).unwrap();
    assert!(matches!(
        kind_of(probe(&path), &path),
        DataErrorKind::Unrecognised(_)
    ));
    assert!(matches!(
        kind_of(read_matrix_any(&path), &path),
        DataErrorKind::Unrecognised(_)
    ));
    let hinted = ProbeOptions {
        dtype: Some(DType::I8),
        ..Default::default()
    };
    assert!(matches!(
        read_matrix_any_with(&path, hinted).unwrap(),
        AnyMatrix::I8(_)
    ));
    assert_eq!(read_matrix::<u8>(&path).unwrap(), bytes);
    assert_eq!(read_matrix::<i8>(&path).unwrap().n(), 10);
}

#[test]
fn a_file_fitting_two_layouts_is_ambiguous() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("both.dat");
    // As vecs: two f32 rows of dimension 1. As bin: one f32 row of dimension 2.
    let words: [u32; 4] = [1, 2, 1, 0x3f80_0000];
    std::fs::write(&path, bytemuck::cast_slice(&words)).unwrap();
    match kind_of(probe(&path), &path) {
        DataErrorKind::Unrecognised(m) => assert!(m.contains("ambiguous"), "{m}"),
        other => panic!("{other:?}"),
    }
    let vecs = ProbeOptions {
        format: Some(Format::Vecs),
        ..Default::default()
    };
    assert_eq!(probe_with(&path, vecs).unwrap().n, 2);
    let bin = ProbeOptions {
        format: Some(Format::Bin),
        ..Default::default()
    };
    assert_eq!(probe_with(&path, bin).unwrap().dim, 2);
    std::fs::write(&path, [7u8; 13]).unwrap();
    assert!(matches!(
        kind_of(probe(&path), &path),
        DataErrorKind::Unrecognised(_)
    ));
}

fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn truncated_and_oversized_files() {
    let dir = tempfile::tempdir().unwrap();
    let m = sample_f32(5, 3);
    for format in FORMATS {
        let path = path_for(dir.path(), "t", format, DType::F32);
        write_matrix(&path, format, &m).unwrap();
        let good = std::fs::read(&path).unwrap();
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        let kind = kind_of(read_matrix::<f32>(&path), &path);
        assert!(
            matches!(kind, DataErrorKind::Truncated { .. }),
            "{format}: {kind:?}"
        );
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 4]);
        std::fs::write(&path, &longer).unwrap();
        let r = read_matrix::<f32>(&path);
        if format == Format::Vecs {
            // Four extra bytes are the start of a sixth row.
            assert!(matches!(
                kind_of(r, &path),
                DataErrorKind::InconsistentDim { row: 5, .. }
            ));
        } else {
            assert!(matches!(
                kind_of(r, &path),
                DataErrorKind::SizeMismatch { .. }
            ));
        }
    }
    // A header n one too big.
    let mut bin = Vec::new();
    bin.extend_from_slice(&6u32.to_le_bytes());
    bin.extend_from_slice(&3u32.to_le_bytes());
    bin.extend_from_slice(bytemuck::cast_slice(m.as_slice()));
    let p = write_bytes(dir.path(), "big.fbin", &bin);
    match kind_of(read_matrix::<f32>(&p), &p) {
        DataErrorKind::Truncated { expected, actual } => assert_eq!((expected, actual), (80, 68)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_bin_headers() {
    let dir = tempfile::tempdir().unwrap();
    let header = |n: u32, d: u32| [n.to_le_bytes(), d.to_le_bytes()].concat();
    let cases: [(&str, Vec<u8>); 4] = [
        ("zero_dim.fbin", header(3, 0)),
        ("negative_dim.fbin", header(3, u32::MAX)),
        ("overflow.fbin", header(u32::MAX, i32::MAX as u32)),
        ("short.fbin", vec![1, 0, 0]),
    ];
    for (name, bytes) in cases {
        let p = write_bytes(dir.path(), name, &bytes);
        let kind = kind_of(read_matrix::<f32>(&p), &p);
        let ok = match name {
            "short.fbin" => matches!(kind, DataErrorKind::Truncated { .. }),
            _ => matches!(kind, DataErrorKind::BadHeader(_)),
        };
        assert!(ok, "{name}: {kind:?}");
    }
    let p = write_bytes(dir.path(), "zero_rows.fbin", &header(0, 4));
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::Empty
    ));
    let p = write_bytes(dir.path(), "empty.fbin", &[]);
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::Empty
    ));
    let p = write_bytes(dir.path(), "empty.fvecs", &[]);
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::Empty
    ));
    let p = write_bytes(dir.path(), "missing.fbin", &[]);
    std::fs::remove_file(&p).unwrap();
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::Io(_)
    ));
}

#[test]
fn dtype_mismatch_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.u8bin");
    write_matrix(
        &p,
        Format::Bin,
        &Matrix::<u8>::from_vec(vec![1; 8], 4).unwrap(),
    )
    .unwrap();
    match kind_of(read_matrix::<f32>(&p), &p) {
        DataErrorKind::DtypeMismatch { file, wanted } => {
            assert_eq!((file, wanted), (DType::U8, DType::F32))
        }
        other => panic!("{other:?}"),
    }
}

fn fvecs_rows(rows: &[(i32, Vec<f32>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (d, vals) in rows {
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(bytemuck::cast_slice(vals));
    }
    out
}

#[test]
fn fvecs_rows_must_share_one_dimension() {
    let dir = tempfile::tempdir().unwrap();
    // Row 2 (index 1) has 4 values instead of 3: the size no longer fits.
    let bytes = fvecs_rows(&[(3, vec![1.0; 3]), (4, vec![2.0; 4]), (3, vec![3.0; 3])]);
    let p = write_bytes(dir.path(), "wrong.fvecs", &bytes);
    match kind_of(read_matrix::<f32>(&p), &p) {
        DataErrorKind::InconsistentDim {
            row,
            expected,
            found,
        } => {
            assert_eq!((row, expected, found), (1, 3, 4))
        }
        other => panic!("{other:?}"),
    }
    // Row 3 (index 2) claims 5 but the size still fits: found while reading.
    let bytes = fvecs_rows(&[(3, vec![1.0; 3]), (3, vec![2.0; 3]), (5, vec![3.0; 3])]);
    let p = write_bytes(dir.path(), "hidden.fvecs", &bytes);
    assert_eq!(probe(&p).unwrap().n, 3);
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::InconsistentDim {
            row: 2,
            found: 5,
            ..
        }
    ));
    let p = write_bytes(dir.path(), "negative.fvecs", &fvecs_rows(&[(-3, vec![])]));
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::BadHeader(_)
    ));
    let p = write_bytes(dir.path(), "ids.ivecs", &fvecs_rows(&[(1, vec![0.0])]));
    assert!(matches!(
        kind_of(probe(&p), &p),
        DataErrorKind::UnsupportedDtype(_)
    ));
}

fn npy_bytes(dict: &str, data: &[u8], pad_to: usize) -> Vec<u8> {
    let mut text = dict.to_string();
    while !(10 + text.len() + 1).is_multiple_of(pad_to) {
        text.push(' ');
    }
    text.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn npy_dtypes_orders_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..24).collect();
    let dict = |descr: &str, fortran: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': (2, 3), }}")
    };
    let p = write_bytes(
        dir.path(),
        "f.npy",
        &npy_bytes(&dict("<f4", "True"), &data, 64),
    );
    match kind_of(read_matrix::<f32>(&p), &p) {
        DataErrorKind::BadHeader(m) => assert!(m.contains("fortran"), "{m}"),
        other => panic!("{other:?}"),
    }
    let p = write_bytes(
        dir.path(),
        "d.npy",
        &npy_bytes(&dict("<f8", "False"), &data, 64),
    );
    match kind_of(read_matrix_any(&p), &p) {
        DataErrorKind::UnsupportedDtype(d) => assert_eq!(d, "<f8"),
        other => panic!("{other:?}"),
    }
    for (descr, dtype) in [("<u1", DType::U8), ("|i1", DType::I8), ("<i1", DType::I8)] {
        let p = write_bytes(
            dir.path(),
            "b.npy",
            &npy_bytes(&dict(descr, "False"), &data[..6], 64),
        );
        let m = read_matrix_any(&p).unwrap();
        assert_eq!((m.dtype(), m.n(), m.dim()), (dtype, 2, 3));
    }
    // Version 2.0 header (4-byte length) and a data offset that is not 4-byte aligned: the f32
    // reader copies instead of mapping.
    let mut v2 = npy_bytes(&dict("<f4", "False"), &data, 2);
    if (10 + u16::from_le_bytes([v2[8], v2[9]]) as usize).is_multiple_of(4) {
        v2 = npy_bytes(&format!("{} ", dict("<f4", "False")), &data, 2);
    }
    let p = write_bytes(dir.path(), "odd.npy", &v2);
    let m = read_matrix::<f32>(&p).unwrap();
    assert!(!m.is_mapped());
    assert_eq!(bytemuck::cast_slice::<f32, u8>(m.as_slice()), &data[..]);
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    let text = format!("{}     \n", dict("<f4", "False"));
    v2.extend_from_slice(&(text.len() as u32).to_le_bytes());
    v2.extend_from_slice(text.as_bytes());
    v2.extend_from_slice(&data);
    let p = write_bytes(dir.path(), "v2.npy", &v2);
    assert_eq!(read_matrix::<f32>(&p).unwrap().dim(), 3);
    let zero = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }";
    let p = write_bytes(dir.path(), "zero.npy", &npy_bytes(zero, &[], 64));
    assert!(matches!(
        kind_of(read_matrix::<f32>(&p), &p),
        DataErrorKind::Empty
    ));
}

#[test]
fn nan_rows_are_found_by_validation() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = vec![0.25f32; 40];
    v[2 * 8 + 6] = f32::NAN;
    let p = dir.path().join("nan.fbin");
    write_matrix(&p, Format::Bin, &Matrix::from_vec(v, 8).unwrap()).unwrap();
    let m = read_matrix::<f32>(&p).unwrap();
    let err = trawl::data::validate_finite(&m).unwrap_err();
    assert!(
        matches!(err.kind, DataErrorKind::NonFinite { row: 2, col: 6, .. }),
        "{err}"
    );
}

#[test]
fn unfinished_writers_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    for format in FORMATS {
        let p = path_for(dir.path(), "w", format, DType::F32);
        let mut w = VectorWriter::create(&p, format, DType::F32, 4).unwrap();
        w.write_rows(&[1.0f32; 8]).unwrap();
        assert!(!p.exists(), "visible before finish");
        let kind = w.write_rows(&[1u8; 4]).unwrap_err().kind;
        assert!(matches!(kind, DataErrorKind::DtypeMismatch { .. }));
        let kind = w.write_rows(&[1.0f32; 3]).unwrap_err().kind;
        assert!(matches!(kind, DataErrorKind::InvalidInput(_)));
        drop(w);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{format}"
        );
        let mut w = VectorWriter::create(&p, format, DType::F32, 4).unwrap();
        w.write_rows(&[1.0f32; 8]).unwrap();
        w.write_rows(&[2.0f32; 4]).unwrap();
        assert_eq!(w.rows_written(), 3);
        let info = w.finish().unwrap();
        assert_eq!(probe(&p).unwrap(), info);
        std::fs::remove_file(&p).unwrap();
    }
    let p = dir.path().join("zero.fbin");
    assert!(VectorWriter::create(&p, Format::Bin, DType::F32, 0).is_err());
}

#[test]
fn mapped_matrices_outlive_nothing_and_clone_cheaply() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.fbin");
    let m = sample_f32(100, 16);
    write_matrix(&p, Format::Bin, &m).unwrap();
    let mapped = map_matrix::<f32>(&p, ProbeOptions::default()).unwrap();
    assert!(mapped.is_mapped());
    let c = mapped.clone();
    assert_eq!(c.as_slice().as_ptr(), mapped.as_slice().as_ptr());
    drop(mapped);
    assert_eq!(c, m);
    let moved = std::thread::spawn(move || c.row(99).to_vec())
        .join()
        .unwrap();
    assert_eq!(moved, m.row(99));
    let hint = ProbeOptions {
        format: Some(Format::Bin),
        ..Default::default()
    };
    assert_eq!(read_matrix_with::<f32>(&p, hint).unwrap(), m);
    assert!(matches!(
        kind_of(read_rows::<f32>(&p, 101, 1), &p),
        DataErrorKind::InvalidInput(_)
    ));
    assert_eq!(read_rows::<f32>(&p, 100, 5).unwrap().n(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Arbitrary bytes under any name give a value or a typed error, never a panic.
    #[test]
    fn garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ext in prop::sample::select(vec!["fbin", "u8bin", "bin", "fvecs", "bvecs", "npy", "dat", "ivecs"]),
        npy_prefix in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut content = if npy_prefix { b"\x93NUMPY\x01\x00".to_vec() } else { Vec::new() };
        content.extend_from_slice(&bytes);
        let p = write_bytes(dir.path(), &format!("g.{ext}"), &content);
        if let Ok(m) = read_matrix_any(&p) {
            prop_assert!(m.n() > 0 && m.dim() > 0);
        }
        let _ = read_matrix::<u8>(&p);
        let _ = trawl::data::read_ground_truth(&p);
        if let Ok(r) = VectorReader::<f32>::open(&p) {
            for block in r.blocks(3) {
                let _ = block;
            }
        }
    }
}

/// An 8 GiB (sparse) file is mapped, not read: only the touched pages are paged in.
#[test]
fn files_larger_than_memory_are_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("huge.u8bin");
    let (n, dim) = (1u32 << 20, 8192u32);
    let f = std::fs::File::create(&p).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[n.to_le_bytes(), dim.to_le_bytes()].concat(), 0)
        .unwrap();
    f.set_len(8 + n as u64 * dim as u64).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[7u8; 8192], 8 + (n as u64 - 1) * 8192).unwrap();
    drop(f);
    let m = map_matrix::<u8>(&p, ProbeOptions::default()).unwrap();
    assert!(m.is_mapped());
    assert_eq!((m.n(), m.dim()), (n as usize, dim as usize));
    assert!(m.row(n as usize - 1).iter().all(|&x| x == 7));
    assert!(m.row(12345).iter().all(|&x| x == 0));
    let mut r = VectorReader::<u8>::open(&p).unwrap();
    r.seek_row(n as u64 - 2).unwrap();
    let tail = r.read_block(10).unwrap().unwrap();
    assert_eq!(tail.n(), 2);
    assert_eq!(tail.row(1)[0], 7);
    assert!(r.read_block(10).unwrap().is_none());
}
