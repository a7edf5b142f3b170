//! Reading a whole log back: its good records, and the torn tail a crash mid-append left.

use std::fs;
use std::path::Path;

use super::format::{decode_body, implied_body_len, le_u32, parse_header, PREFIX_LEN};
use super::{corrupt, file_err, LogRecord, WalError, HEADER_LEN, MAX_BODY_LEN};

/// An incomplete last record that [`read_log`] dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where it starts (the end of the last good record).
    pub offset: u64,
    /// Its bytes, up to the end of the file.
    pub bytes: u64,
}

/// A whole log as read by [`read_log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogContents {
    /// The header's base sequence number.
    pub base_seq: u64,
    /// The good records, in order, numbered `base_seq + 1`, `+ 2`, ...
    pub records: Vec<LogRecord>,
    /// Bytes up to the end of the last good record (the header's length when none).
    pub valid_len: u64,
    /// The incomplete last record that was dropped, if any.
    pub torn_tail: Option<TornTail>,
}

impl LogContents {
    /// Sequence number of the last good record (`base_seq` when there is none).
    pub fn last_seq(&self) -> u64 {
        self.records.last().map_or(self.base_seq, |r| r.seq)
    }
}

/// Whether the record at `pos` has a damaged length field: its contents imply another,
/// non-zero-declared length under which the stored checksum matches. A torn write cannot
/// produce that, so the record must not be dropped as torn.
fn length_field_damaged(data: &[u8], pos: usize, declared: u32, crc: u32) -> bool {
    if declared == 0 {
        return false; // a prefix that never landed
    }
    let body_start = pos + PREFIX_LEN;
    let Some(implied) = implied_body_len(&data[body_start..]) else {
        return false;
    };
    if implied == u64::from(declared) {
        return false;
    }
    usize::try_from(implied)
        .ok()
        .and_then(|n| body_start.checked_add(n))
        .and_then(|end| data.get(body_start..end))
        .is_some_and(|body| crc32fast::hash(body) == crc)
}

/// Reads the whole log at `path`: its header and every good record. An incomplete last
/// record (a crash mid-append) is dropped and reported in [`LogContents::torn_tail`]; any
/// other damage is [`WalError::Corrupt`].
pub fn read_log(path: &Path) -> Result<LogContents, WalError> {
    let data = fs::read(path).map_err(file_err(path))?;
    let base_seq = parse_header(path, &data)?;
    let mut records = Vec::new();
    let mut expected = base_seq.checked_add(1);
    let mut pos = HEADER_LEN as usize;
    let mut torn_tail = None;
    while pos < data.len() {
        let rest = &data[pos..];
        let off = pos as u64;
        let torn = TornTail {
            offset: off,
            bytes: rest.len() as u64,
        };
        if rest.len() < PREFIX_LEN || rest.iter().all(|&b| b == 0) {
            torn_tail = Some(torn);
            break;
        }
        let declared = le_u32(rest, 0);
        let crc = le_u32(rest, 4);
        if declared > MAX_BODY_LEN {
            return Err(corrupt(
                path,
                off,
                format!("record length {declared} exceeds the limit of {MAX_BODY_LEN} bytes"),
            ));
        }
        let end = pos + PREFIX_LEN + declared as usize;
        if end > data.len() {
            if length_field_damaged(&data, pos, declared, crc) {
                return Err(corrupt(
                    path,
                    off,
                    format!(
                        "record length {declared} runs past the end of the file but disagrees \
                         with the record's intact contents"
                    ),
                ));
            }
            torn_tail = Some(torn);
            break;
        }
        let body = &data[pos + PREFIX_LEN..end];
        if crc32fast::hash(body) != crc {
            if length_field_damaged(&data, pos, declared, crc) {
                return Err(corrupt(
                    path,
                    off,
                    format!("record length {declared} disagrees with the record's contents"),
                ));
            }
            if data[end..].iter().all(|&b| b == 0) {
                torn_tail = Some(torn);
                break;
            }
            return Err(corrupt(path, off, "record checksum mismatch"));
        }
        let record = decode_body(body).map_err(|why| corrupt(path, off, why))?;
        match expected {
            Some(e) if e == record.seq => expected = e.checked_add(1),
            Some(e) => {
                return Err(corrupt(
                    path,
                    off,
                    format!("sequence number {}, expected {e}", record.seq),
                ))
            }
            None => {
                return Err(corrupt(
                    path,
                    off,
                    format!("sequence number {} after the last possible one", record.seq),
                ))
            }
        }
        records.push(record);
        pos = end;
    }
    Ok(LogContents {
        base_seq,
        records,
        valid_len: pos as u64,
        torn_tail,
    })
}
