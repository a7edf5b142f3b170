//! Tests of the write-ahead log: round trips, torn tails, damage, checkpoints, writers.

use std::fs::{self, File};

use super::format::{
    body_len, encode_header, encode_record, FIXED_LEN, OP_INSERT, OP_UPSERT, PREFIX_LEN,
};
use super::*;
use crate::kernels::DType;

fn f32_op(kind: u8, ids: &[u64], dim: usize, salt: f32) -> LogOp {
    let rows: Vec<f32> = (0..ids.len() * dim)
        .map(|i| i as f32 * 0.5 + salt)
        .collect();
    vec_op(kind, ids, LogVectors::from_rows(&rows, dim))
}

fn u8_op(kind: u8, ids: &[u64], dim: usize) -> LogOp {
    let rows: Vec<u8> = (0..ids.len() * dim).map(|i| (i * 7 % 256) as u8).collect();
    vec_op(kind, ids, LogVectors::from_rows(&rows, dim))
}

fn i8_op(kind: u8, ids: &[u64], dim: usize) -> LogOp {
    let rows: Vec<i8> = (0..ids.len() * dim)
        .map(|i| (i as i32 * 13 % 256 - 128) as i8)
        .collect();
    vec_op(kind, ids, LogVectors::from_rows(&rows, dim))
}

fn vec_op(kind: u8, ids: &[u64], vectors: LogVectors) -> LogOp {
    let ids = ids.to_vec();
    if kind == OP_INSERT {
        LogOp::Insert {
            ids,
            vectors,
            attrs: None,
        }
    } else {
        LogOp::Upsert {
            ids,
            vectors,
            attrs: None,
        }
    }
}

/// An op of `kind` whose vectors carry attributes (a label, a keyed label and a number each).
fn attrs_op(kind: u8, ids: &[u64], dim: usize) -> LogOp {
    let mut b = crate::filter::AttrsBuilder::new(ids.len()).unwrap();
    for r in 0..ids.len() as u32 {
        b.add_label(r, &format!("L{r}")).unwrap();
        b.add_label(r, "lang=en").unwrap();
        b.set_number("year", r, crate::filter::Number::I64(2000 + i64::from(r)))
            .unwrap();
    }
    let attrs = Some(LogAttrs::encode(&b.finish().unwrap()));
    match f32_op(kind, ids, dim, 0.5) {
        LogOp::Insert { ids, vectors, .. } => LogOp::Insert {
            ids,
            vectors,
            attrs,
        },
        LogOp::Upsert { ids, vectors, .. } => LogOp::Upsert {
            ids,
            vectors,
            attrs,
        },
        d => d,
    }
}

fn del(ids: &[u64]) -> LogOp {
    LogOp::Delete { ids: ids.to_vec() }
}

fn mixed_ops() -> Vec<LogOp> {
    vec![
        f32_op(OP_INSERT, &[1, 2, 3], 4, 0.25),
        u8_op(OP_UPSERT, &[9], 16),
        del(&[2, 77]),
        i8_op(OP_INSERT, &[10, 11], 3),
        f32_op(OP_UPSERT, &[3], 4, -1.0),
        u8_op(OP_INSERT, &[], 5),
        del(&[]),
        attrs_op(OP_INSERT, &[20, 21], 3),
        attrs_op(OP_UPSERT, &[20], 3),
        i8_op(OP_UPSERT, &[12, 13, 14], 2),
    ]
}

/// A log with `ops` appended one per batch; returns the path and each record's offset.
fn write_log(dir: &Path, base: u64, ops: &[LogOp]) -> (PathBuf, Vec<u64>) {
    let path = dir.join(FILE_NAME);
    let mut w = LogWriter::create(&path, base).unwrap();
    let mut offsets = Vec::new();
    for op in ops {
        offsets.push(w.len());
        w.append(std::slice::from_ref(op), true).unwrap();
    }
    (path, offsets)
}

fn records(base: u64, ops: &[LogOp]) -> Vec<LogRecord> {
    ops.iter()
        .enumerate()
        .map(|(i, op)| LogRecord {
            seq: base + 1 + i as u64,
            op: op.clone(),
        })
        .collect()
}

fn corrupt_offset(err: &WalError) -> u64 {
    match err {
        WalError::Corrupt { offset, .. } => *offset,
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn round_trip_all_ops_and_types_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let ops = mixed_ops();
    let mut w = LogWriter::create(&path, 100).unwrap();
    assert_eq!(w.next_seq(), 101);
    assert!(w.is_empty());
    assert_eq!(w.append(&ops[..3], true).unwrap(), 101..=103);
    assert_eq!(w.append(&ops[3..4], false).unwrap(), 104..=104);
    w.sync().unwrap();
    assert_eq!(w.len(), fs::metadata(&path).unwrap().len());
    assert_eq!(w.path(), path.as_path());
    drop(w);

    let c = read_log(&path).unwrap();
    assert_eq!(c.base_seq, 100);
    assert_eq!(c.records, records(100, &ops[..4]));
    assert_eq!(c.torn_tail, None);
    assert_eq!(c.valid_len, fs::metadata(&path).unwrap().len());
    assert_eq!(c.last_seq(), 104);

    let mut w = LogWriter::open_append(&path, &c).unwrap();
    assert_eq!(w.next_seq(), 105);
    assert_eq!(w.append(&ops[4..], true).unwrap(), 105..=110);
    let c = read_log(&path).unwrap();
    assert_eq!(c.records, records(100, &ops));

    // The element values survive.
    let LogOp::Insert { ids, vectors, .. } = &c.records[0].op else {
        panic!("not an insert")
    };
    assert_eq!(ids, &[1, 2, 3]);
    assert_eq!(vectors.count(), 3);
    let rows = vectors.rows::<f32>().unwrap();
    assert_eq!(rows.len(), 12);
    assert_eq!(rows[5], 2.75);
    assert!(vectors.rows::<u8>().is_none());
    let i8s = c.records[3].op.vectors().unwrap().rows::<i8>().unwrap();
    assert_eq!(i8s[1], -115); // 13 - 128
    assert_eq!(c.records[2].op.ids(), &[2, 77]);
}

#[test]
fn empty_log_reads_as_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    LogWriter::create(&path, 7).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), HEADER_LEN);
    assert!(!dir.path().join("wal.trawl.tmp").exists());
    let c = read_log(&path).unwrap();
    assert_eq!(c.base_seq, 7);
    assert!(c.records.is_empty());
    assert_eq!(c.valid_len, HEADER_LEN);
    assert_eq!(c.torn_tail, None);
    assert_eq!(c.last_seq(), 7);
    let mut w = LogWriter::open_append(&path, &c).unwrap();
    assert_eq!(w.next_seq(), 8);
    // An empty batch assigns nothing and writes nothing.
    let r = w.append(&[], true).unwrap();
    assert!(r.is_empty());
    assert_eq!(w.len(), HEADER_LEN);
    assert_eq!(w.append(&[del(&[1])], true).unwrap(), 8..=8);
}

#[test]
fn create_replaces_an_existing_log() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_log(dir.path(), 0, &mixed_ops());
    LogWriter::create(&path, 50).unwrap();
    let c = read_log(&path).unwrap();
    assert_eq!((c.base_seq, c.records.len()), (50, 0));
}

#[test]
fn torn_tail_at_every_cut_is_dropped_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, offsets) = write_log(dir.path(), 0, &ops);
    let full = fs::read(&path).unwrap();
    let last = *offsets.last().unwrap() as usize;
    let kept = records(0, &ops[..ops.len() - 1]);
    let extra = del(&[4242]);
    for cut in last + 1..full.len() {
        // Cut off, and cut off then zero-filled to the full length and beyond.
        for pad in [0, full.len() - cut, full.len() - cut + 100] {
            let mut bytes = full[..cut].to_vec();
            bytes.resize(cut + pad, 0);
            fs::write(&path, &bytes).unwrap();
            let c = read_log(&path).unwrap_or_else(|e| panic!("cut {cut} pad {pad}: {e}"));
            assert_eq!(c.records, kept, "cut {cut} pad {pad}");
            assert_eq!(c.valid_len, last as u64);
            assert_eq!(
                c.torn_tail,
                Some(TornTail {
                    offset: last as u64,
                    bytes: (cut + pad - last) as u64
                })
            );
            let mut w = LogWriter::open_append(&path, &c).unwrap();
            assert_eq!(fs::metadata(&path).unwrap().len(), last as u64);
            let seq = ops.len() as u64;
            assert_eq!(
                w.append(std::slice::from_ref(&extra), true).unwrap(),
                seq..=seq
            );
            let c = read_log(&path).unwrap();
            assert_eq!(c.torn_tail, None);
            assert_eq!(&c.records[..kept.len()], &kept[..]);
            assert_eq!(c.records.last().unwrap().op, extra);
            assert_eq!(c.records.last().unwrap().seq, seq);
        }
    }
}

#[test]
fn zero_filled_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, _) = write_log(dir.path(), 3, &ops);
    let good = fs::read(&path).unwrap();
    for zeros in [1, 7, 8, 9, 100, 5000] {
        let mut bytes = good.clone();
        bytes.resize(good.len() + zeros, 0);
        fs::write(&path, &bytes).unwrap();
        let c = read_log(&path).unwrap();
        assert_eq!(c.records, records(3, &ops));
        assert_eq!(
            c.torn_tail,
            Some(TornTail {
                offset: good.len() as u64,
                bytes: zeros as u64
            })
        );
        LogWriter::open_append(&path, &c).unwrap();
        assert_eq!(fs::read(&path).unwrap(), good);
    }
}

#[test]
fn short_nonzero_tail_is_torn() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_log(dir.path(), 0, &mixed_ops());
    let good = fs::read(&path).unwrap();
    for n in 1..PREFIX_LEN {
        let mut bytes = good.clone();
        bytes.resize(good.len() + n, 0xAB);
        fs::write(&path, &bytes).unwrap();
        let c = read_log(&path).unwrap();
        assert_eq!(c.records.len(), mixed_ops().len());
        assert_eq!(c.torn_tail.unwrap().bytes, n as u64);
    }
}

#[test]
fn flipped_byte_in_a_middle_record_is_corrupt_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, offsets) = write_log(dir.path(), 0, &ops);
    let good = fs::read(&path).unwrap();
    for rec in 0..ops.len() - 1 {
        let (start, end) = (offsets[rec] as usize, offsets[rec + 1] as usize);
        for at in start..end {
            for mask in [0x01u8, 0x80, 0xFF] {
                let mut bytes = good.clone();
                bytes[at] ^= mask;
                fs::write(&path, &bytes).unwrap();
                let err = read_log(&path).unwrap_err();
                assert_eq!(
                    corrupt_offset(&err),
                    start as u64,
                    "record {rec} byte {at}: {err}"
                );
                assert_eq!(err.kind(), ErrorKind::Corrupt);
                let msg = err.to_string();
                assert!(msg.contains(FILE_NAME), "{msg}");
                assert!(msg.contains(&format!("byte {start}")), "{msg}");
            }
        }
    }
}

#[test]
fn flipped_byte_in_the_last_record_is_torn() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, offsets) = write_log(dir.path(), 0, &ops);
    let good = fs::read(&path).unwrap();
    let last = *offsets.last().unwrap() as usize;
    // The checksum field and the body: the checksum fails and the record ends the file.
    for at in last + 4..good.len() {
        let mut bytes = good.clone();
        bytes[at] ^= 0x10;
        fs::write(&path, &bytes).unwrap();
        let c = read_log(&path).unwrap_or_else(|e| panic!("byte {at}: {e}"));
        assert_eq!(c.records, records(0, &ops[..ops.len() - 1]));
        assert_eq!(c.torn_tail.unwrap().offset, last as u64);
    }
    // A damaged length field of an intact record is damage, never a torn write.
    for mask in [0x01u8, 0x02, 0x40] {
        let mut bytes = good.clone();
        bytes[last] ^= mask;
        fs::write(&path, &bytes).unwrap();
        let err = read_log(&path).unwrap_err();
        assert_eq!(corrupt_offset(&err), last as u64, "{err}");
    }
}

#[test]
fn huge_length_in_the_middle_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, offsets) = write_log(dir.path(), 0, &ops);
    let good = fs::read(&path).unwrap();
    let at = offsets[2] as usize;
    for len in [u32::MAX, MAX_BODY_LEN + 1, MAX_BODY_LEN, 0x7FFF_FFFF] {
        let mut bytes = good.clone();
        bytes[at..at + 4].copy_from_slice(&len.to_le_bytes());
        fs::write(&path, &bytes).unwrap();
        let err = read_log(&path).unwrap_err();
        assert_eq!(corrupt_offset(&err), at as u64, "{len}: {err}");
    }
    // Also as the last record (nothing but the prefix after it).
    let mut bytes = good[..at + 8].to_vec();
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    fs::write(&path, &bytes).unwrap();
    assert_eq!(corrupt_offset(&read_log(&path).unwrap_err()), at as u64);
}

/// Writes a log whose records carry the given sequence numbers.
fn write_raw(path: &Path, base: u64, seqs: &[u64]) {
    let mut bytes = encode_header(base).to_vec();
    for (i, &seq) in seqs.iter().enumerate() {
        let op = del(&[i as u64]);
        let len = body_len(&op).unwrap();
        encode_record(&mut bytes, seq, &op, len);
    }
    fs::write(path, bytes).unwrap();
}

#[test]
fn sequence_gap_or_repeat_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let rec = (FIXED_LEN + 8 + PREFIX_LEN) as u64; // one delete of one id
    write_raw(&path, 10, &[11, 12, 13]);
    assert_eq!(read_log(&path).unwrap().records.len(), 3);
    for (seqs, bad) in [
        (vec![11, 12, 14], 2u64),
        (vec![11, 12, 12], 2),
        (vec![11, 13], 1),
        (vec![12], 0),
        (vec![10, 11], 0),
        (vec![11, 12, 13, 13], 3),
    ] {
        write_raw(&path, 10, &seqs);
        let err = read_log(&path).unwrap_err();
        assert_eq!(
            corrupt_offset(&err),
            HEADER_LEN + bad * rec,
            "{seqs:?}: {err}"
        );
        assert!(err.to_string().contains("sequence number"), "{err}");
    }
    // A base at the very end of the sequence space has no room for records.
    write_raw(&path, u64::MAX, &[0]);
    assert_eq!(corrupt_offset(&read_log(&path).unwrap_err()), HEADER_LEN);
    write_raw(&path, u64::MAX, &[]);
    let c = read_log(&path).unwrap();
    assert!(matches!(
        LogWriter::open_append(&path, &c),
        Err(WalError::Invalid(_))
    ));
    assert!(matches!(
        LogWriter::create(&path, u64::MAX),
        Err(WalError::Invalid(_))
    ));
}

#[test]
fn checksum_valid_but_undecodable_record_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let bodies: Vec<Vec<u8>> = vec![
        // unknown op
        [&1u64.to_le_bytes()[..], &[9], &0u32.to_le_bytes()].concat(),
        // unknown dtype
        [
            &1u64.to_le_bytes()[..],
            &[1],
            &0u32.to_le_bytes(),
            &[7],
            &1u32.to_le_bytes(),
        ]
        .concat(),
        // dimension 0
        [
            &1u64.to_le_bytes()[..],
            &[3],
            &0u32.to_le_bytes(),
            &[0],
            &0u32.to_le_bytes(),
        ]
        .concat(),
        // count larger than the body
        [
            &1u64.to_le_bytes()[..],
            &[2],
            &1000u32.to_le_bytes(),
            &[0; 8],
        ]
        .concat(),
        // bytes left over
        [&1u64.to_le_bytes()[..], &[2], &0u32.to_le_bytes(), &[1]].concat(),
        // vectors short by one byte
        [
            &1u64.to_le_bytes()[..],
            &[1],
            &1u32.to_le_bytes(),
            &[0],
            &2u32.to_le_bytes(),
            &5u64.to_le_bytes(),
            &[0; 7],
        ]
        .concat(),
        // body shorter than the fixed fields
        vec![1, 0, 0],
    ];
    for body in bodies {
        let mut bytes = encode_header(0).to_vec();
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        fs::write(&path, &bytes).unwrap();
        let err = read_log(&path).unwrap_err();
        assert_eq!(corrupt_offset(&err), HEADER_LEN, "{body:?}: {err}");
    }
}

#[test]
fn header_damage_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_log(dir.path(), 5, &mixed_ops()[..2]);
    let good = fs::read(&path).unwrap();
    for at in 0..HEADER_LEN as usize {
        let mut bytes = good.clone();
        bytes[at] ^= 0x04;
        fs::write(&path, &bytes).unwrap();
        let err = read_log(&path).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "byte {at}: {err}");
        assert!(err.to_string().contains(FILE_NAME), "{err}");
    }
    for cut in 0..HEADER_LEN as usize {
        fs::write(&path, &good[..cut]).unwrap();
        let err = read_log(&path).unwrap_err();
        assert_eq!(corrupt_offset(&err), 0, "cut {cut}");
        assert!(err.to_string().contains(FILE_NAME), "{err}");
    }
    // Non-zero reserved fields under a valid checksum.
    let mut h = encode_header(5);
    h[12] = 1;
    let crc = crc32fast::hash(&h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    fs::write(&path, h).unwrap();
    assert_eq!(corrupt_offset(&read_log(&path).unwrap_err()), 0);
}

#[test]
fn wrong_magic_and_newer_version_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut h = encode_header(0);
    h[..8].copy_from_slice(b"TRAWLPQ\0");
    fs::write(&path, h).unwrap();
    let err = read_log(&path).unwrap_err();
    assert!(
        matches!(&err, WalError::File(f) if matches!(f.kind, FileErrorKind::WrongMagic { .. })),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains(FILE_NAME));

    let mut h = encode_header(0);
    h[8..12].copy_from_slice(&3u32.to_le_bytes());
    let crc = crc32fast::hash(&h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    fs::write(&path, h).unwrap();
    let err = read_log(&path).unwrap_err();
    assert!(
        matches!(
            &err,
            WalError::File(f) if matches!(f.kind, FileErrorKind::UnsupportedVersion { found: 3, supported: 2 })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("version 3"), "{err}");
    assert_eq!(err.kind(), ErrorKind::Corrupt);

    let missing = read_log(&dir.path().join("nope")).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
}

#[test]
fn checkpoint_keeps_exactly_the_given_records() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, _) = write_log(dir.path(), 0, &ops);
    let c = read_log(&path).unwrap();
    let keep = c.records[5..].to_vec();
    let mut w = checkpoint(&path, 5, &keep).unwrap();
    assert!(!dir.path().join("wal.trawl.tmp").exists());
    assert_eq!(w.next_seq(), ops.len() as u64 + 1);
    assert_eq!(w.len(), fs::metadata(&path).unwrap().len());
    let after = read_log(&path).unwrap();
    assert_eq!(after.base_seq, 5);
    assert_eq!(after.records, keep);
    assert_eq!(after.torn_tail, None);

    let seq = ops.len() as u64 + 1;
    assert_eq!(w.append(&[del(&[1])], true).unwrap(), seq..=seq);
    let after = read_log(&path).unwrap();
    assert_eq!(after.records.len(), keep.len() + 1);
    drop(w);

    // Checkpoint to nothing.
    let w = checkpoint(&path, seq, &[]).unwrap();
    assert!(w.is_empty());
    let after = read_log(&path).unwrap();
    assert_eq!((after.base_seq, after.records.len()), (seq, 0));
}

#[test]
fn checkpoint_refuses_non_contiguous_records() {
    let dir = tempfile::tempdir().unwrap();
    let ops = mixed_ops();
    let (path, _) = write_log(dir.path(), 0, &ops);
    let before = fs::read(&path).unwrap();
    let recs = read_log(&path).unwrap().records;
    let gap = vec![recs[3].clone(), recs[5].clone()];
    let bad: [(u64, &[LogRecord]); 4] = [
        (3, &gap),                                // a gap
        (2, &recs[3..5]),                         // does not start at base + 1
        (4, &recs[3..5]),                         // at or below the base
        (0, &[recs[0].clone(), recs[0].clone()]), // a repeat
    ];
    for (base, keep) in bad {
        let err = checkpoint(&path, base, keep).unwrap_err();
        assert!(matches!(err, WalError::Invalid(_)), "{err}");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(fs::read(&path).unwrap(), before);
    }
    assert!(!dir.path().join("wal.trawl.tmp").exists());
}

#[test]
fn invalid_ops_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let mut w = LogWriter::create(&path, 0).unwrap();
    let short = LogOp::Insert {
        ids: vec![1, 2],
        vectors: LogVectors::from_rows(&[1.0f32, 2.0, 3.0], 2),
        attrs: None,
    };
    let dim0 = LogOp::Upsert {
        ids: vec![],
        vectors: LogVectors {
            dtype: DType::U8,
            dim: 0,
            bytes: vec![],
        },
        attrs: None,
    };
    for bad in [short, dim0] {
        let err = w.append(&[del(&[1]), bad], true).unwrap_err();
        assert!(matches!(err, WalError::Invalid(_)), "{err}");
        assert!(err.to_string().contains("operation 1"), "{err}");
        assert_eq!(w.len(), HEADER_LEN);
        assert_eq!(w.next_seq(), 1);
    }
    // The writer is still usable.
    assert_eq!(w.append(&[del(&[1])], true).unwrap(), 1..=1);
    assert_eq!(read_log(&path).unwrap().records.len(), 1);
}

#[test]
fn failed_write_poisons_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    LogWriter::create(&path, 0).unwrap();
    // A read-only handle: every write fails.
    let mut w = LogWriter {
        path: path.clone(),
        file: File::open(&path).unwrap(),
        len: HEADER_LEN,
        next_seq: 1,
        poisoned: false,
    };
    let err = w.append(&[del(&[1])], true).unwrap_err();
    assert!(matches!(err, WalError::File(_)), "{err}");
    assert_eq!(err.kind(), ErrorKind::Storage);
    let err = w.append(&[del(&[1])], true).unwrap_err();
    assert!(matches!(err, WalError::Poisoned { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Storage);
    assert!(err.to_string().contains("reopen"));
    assert!(matches!(w.sync(), Err(WalError::Poisoned { .. })));
    assert_eq!(w.next_seq(), 1);
    let c = read_log(&path).unwrap();
    assert!(c.records.is_empty());
    // Reopening works.
    let mut w = LogWriter::open_append(&path, &c).unwrap();
    assert_eq!(w.append(&[del(&[1])], true).unwrap(), 1..=1);
}

#[test]
fn open_append_refuses_contents_of_another_log() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_log(dir.path(), 0, &mixed_ops());
    let mut c = read_log(&path).unwrap();
    c.base_seq = 1;
    for r in &mut c.records {
        r.seq += 1;
    }
    assert!(matches!(
        LogWriter::open_append(&path, &c),
        Err(WalError::Invalid(_))
    ));
    let mut c = read_log(&path).unwrap();
    c.valid_len += 1;
    assert!(matches!(
        LogWriter::open_append(&path, &c),
        Err(WalError::Invalid(_))
    ));
}

#[test]
fn vectors_helpers() {
    let v = LogVectors::from_rows(&[1.5f32, -2.0, 3.25, 4.0], 2);
    assert_eq!(v.dtype, DType::F32);
    assert_eq!(v.count(), 2);
    assert_eq!(&v.bytes[..4], &1.5f32.to_le_bytes());
    assert_eq!(v.rows::<f32>().unwrap(), vec![1.5, -2.0, 3.25, 4.0]);
    assert!(v.rows::<i8>().is_none());
    let v = LogVectors::from_rows(&[-1i8, 5, 127], 3);
    assert_eq!(v.bytes, vec![0xFF, 5, 127]);
    assert_eq!(v.rows::<i8>().unwrap(), vec![-1, 5, 127]);
    let broken = LogVectors {
        dtype: DType::F32,
        dim: 1,
        bytes: vec![0; 5],
    };
    assert!(broken.rows::<f32>().is_none());
    let dim0 = LogVectors {
        dtype: DType::U8,
        dim: 0,
        bytes: vec![1],
    };
    assert_eq!(dim0.count(), 0);
}

#[test]
fn attributes_round_trip_and_a_version_1_log_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let ops = vec![attrs_op(OP_INSERT, &[5, 6, 7], 4)];
    let (path, _) = write_log(dir.path(), 0, &ops);
    let c = read_log(&path).unwrap();
    let a = c.records[0].op.attrs().unwrap().decode().unwrap();
    assert_eq!(a.n(), 3);
    assert_eq!(a.labels_of(2), vec!["lang=en", "L2"]);
    // A log of version 1 (no operation with attributes) reads as before.
    let mut bytes = encode_header(0).to_vec();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..28]);
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    let op = f32_op(OP_INSERT, &[1], 2, 0.0);
    let len = body_len(&op).unwrap();
    encode_record(&mut bytes, 1, &op, len);
    let old = dir.path().join("old.trawl");
    fs::write(&old, &bytes).unwrap();
    let c = read_log(&old).unwrap();
    assert_eq!(c.records.len(), 1);
    assert_eq!(c.records[0].op, op);
}
