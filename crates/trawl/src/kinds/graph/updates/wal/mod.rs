//! The write-ahead log of streaming updates (inserts, deletes and upserts of vectors):
//! `wal.trawl` in an index directory.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `TRAWLWAL` |
//! | 8 | 4 | format version (2; version 1 logs, without ops 4 and 5, are read), `u32` little-endian |
//! | 12 | 4 | reserved, zero |
//! | 16 | 8 | `base_seq`: the records that follow are numbered `base_seq + 1`, `+ 2`, ... |
//! | 24 | 4 | reserved, zero |
//! | 28 | 4 | CRC-32 of bytes 0..28 |
//! | 32 | | records, appended |
//!
//! A record is `u32 body_len`, `u32 crc32(body)`, then the body: `u64 seq`, `u8 op`, and
//!
//! - op 1 (insert) and op 3 (upsert): `u32 count`, `u8 dtype code`
//!   ([`DType::code`](crate::kernels::DType::code)), `u32 dim`, `count × u64 ids`, then
//!   `count × dim` elements, little-endian;
//! - op 2 (delete): `u32 count`, `count × u64 ids`;
//! - op 4 (insert with attributes) and op 5 (upsert with attributes): as ops 1 and 3 with a
//!   `u32 attrs_len` after `dim`, and after the elements `attrs_len` bytes: the vectors'
//!   attributes, one row per vector, as the payload of `attrs.trawl`
//!   ([`crate::filter::file`]).
//!
//! A body is at most [`MAX_BODY_LEN`] bytes; everything is little-endian.
//!
//! [`LogWriter::append`] encodes a batch of operations into one buffer, writes it with one
//! `write` at the end of the file and, when asked, makes it durable with one `fdatasync`
//! (group commit). A crash mid-append can leave the last record incomplete: [`read_log`]
//! reports such a *torn tail* and drops it (it was never acknowledged), and
//! [`LogWriter::open_append`] cuts it off before appending. A record is a torn tail when
//!
//! - fewer than 8 bytes remain for its prefix, or
//! - its declared body runs past the end of the file, or
//! - its checksum fails and nothing but zero bytes follows it, or
//! - every byte from its start to the end of the file is zero (the file grew, the data never
//!   landed).
//!
//! Any other damage — a bad record followed by data, a sequence gap, a checksum-valid body
//! that does not decode, a length field that disagrees with a checksum-valid body, a bad
//! header — is [`WalError::Corrupt`], naming the file and the byte offset of the record.
//!
//! [`LogWriter::create`] and [`checkpoint`] write a whole new log to a temporary name, sync
//! it and rename it over the old one, so a crash leaves either the old or the new log whole.

mod format;
mod read;
mod record;
#[cfg(test)]
mod tests;
mod write;

use std::io;
use std::path::{Path, PathBuf};

use crate::dir::{FileError, FileErrorKind};
use crate::ErrorKind;

pub use read::{read_log, LogContents, TornTail};
pub use record::{LogAttrs, LogOp, LogRecord, LogVectors};
pub use write::{checkpoint, LogWriter};

/// File name of the write-ahead log inside an index directory.
pub const FILE_NAME: &str = crate::dir::LOG_FILE;

/// Format version written (and the newest read).
pub const VERSION: u32 = 2;

/// Bytes of the log's header.
pub const HEADER_LEN: u64 = 32;

/// Largest record body, in bytes (1 GiB): a longer declared length is damage. Split larger
/// batches into several operations.
pub const MAX_BODY_LEN: u32 = 1 << 30;

/// Why the write-ahead log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// The log is damaged at `offset` (its header at 0, else the start of the bad record).
    #[error("{}: write-ahead log damaged at byte {offset}: {reason}", path.display())]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// Byte offset of the damaged header (0) or record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The operating system refused, or the file is of another kind or a newer version.
    #[error(transparent)]
    File(#[from] FileError),
    /// An earlier append or sync failed, so the end of the file is unknown: reopen the log
    /// ([`read_log`], then [`LogWriter::open_append`]).
    #[error(
        "{}: an earlier write to the write-ahead log failed; reopen the log before appending",
        path.display()
    )]
    Poisoned {
        /// The log file.
        path: PathBuf,
    },
    /// The caller asked for something the log cannot hold (an inconsistent operation, a
    /// non-contiguous checkpoint, a sequence number overflow).
    #[error("{0}")]
    Invalid(String),
}

impl WalError {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Corrupt { .. } => ErrorKind::Corrupt,
            Self::File(f) => f.kind(),
            Self::Poisoned { .. } => ErrorKind::Storage,
            Self::Invalid(_) => ErrorKind::InvalidInput,
        }
    }
}

/// The error of an I/O failure on the log at `path`.
fn file_err(path: &Path) -> impl Fn(io::Error) -> WalError + '_ {
    move |e| WalError::File(FileError::new(path, FileErrorKind::Io(e)))
}

/// Damage to the log at `path`, at byte `offset`.
fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> WalError {
    WalError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}
