//! The write-ahead log of streaming updates (inserts, deletes and upserts of vectors):
//! `wal.trawl` in an index directory.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `TRAWLWAL` |
//! | 8 | 4 | format version (1), `u32` little-endian |
//! | 12 | 4 | reserved, zero |
//! | 16 | 8 | `base_seq`: the records that follow are numbered `base_seq + 1`, `+ 2`, ... |
//! | 24 | 4 | reserved, zero |
//! | 28 | 4 | CRC-32 of bytes 0..28 |
//! | 32 | | records, appended |
//!
//! A record is `u32 body_len`, `u32 crc32(body)`, then the body: `u64 seq`, `u8 op`, and
//!
//! - op 1 (insert) and op 3 (upsert): `u32 count`, `u8 dtype code` ([`DType::code`]),
//!   `u32 dim`, `count × u64 ids`, then `count × dim` elements, little-endian;
//! - op 2 (delete): `u32 count`, `count × u64 ids`.
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

use std::fs::{self, File};
use std::io;
use std::ops::RangeInclusive;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::dir::bytes::ByteReader;
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::{DType, Element};
use crate::ErrorKind;

/// File name of the write-ahead log inside an index directory.
pub const FILE_NAME: &str = crate::dir::LOG_FILE;

/// Format version written (and the newest read).
pub const VERSION: u32 = 1;

/// Bytes of the log's header.
pub const HEADER_LEN: u64 = 32;

/// Largest record body, in bytes (1 GiB): a longer declared length is damage. Split larger
/// batches into several operations.
pub const MAX_BODY_LEN: u32 = 1 << 30;

const MAGIC: [u8; 8] = *b"TRAWLWAL";
const KIND_NAME: &str = "trawl write-ahead log";
/// Bytes of a record's prefix: `u32 body_len`, `u32 crc32(body)`.
const PREFIX_LEN: usize = 8;
/// Bytes of a body's fixed part: `u64 seq`, `u8 op`, `u32 count`.
const FIXED_LEN: usize = 13;
/// Bytes of the fixed part of an insert or upsert: plus `u8 dtype`, `u32 dim`.
const FIXED_VEC_LEN: usize = 18;

const OP_INSERT: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_UPSERT: u8 = 3;

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

/// The vectors of an insert or upsert: `count × dim` elements, row-major, as raw
/// little-endian bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogVectors {
    /// Element type.
    pub dtype: DType,
    /// Dimension (at least 1).
    pub dim: usize,
    /// `count × dim × dtype.size_bytes()` bytes, little-endian elements, row-major.
    pub bytes: Vec<u8>,
}

impl LogVectors {
    /// Vectors of dimension `dim` from row-major elements (`rows.len()` should be a multiple
    /// of `dim`; [`LogWriter::append`] checks it against the operation's ids).
    pub fn from_rows<T: Element>(rows: &[T], dim: usize) -> Self {
        let mut bytes = bytemuck::cast_slice::<T, u8>(rows).to_vec();
        to_little_endian(&mut bytes, T::DTYPE.size_bytes());
        Self {
            dtype: T::DTYPE,
            dim,
            bytes,
        }
    }

    /// The elements, row-major; `None` when `T` is not the vectors' type or the bytes are not
    /// a whole number of elements.
    pub fn rows<T: Element>(&self) -> Option<Vec<T>> {
        let size = T::DTYPE.size_bytes();
        if T::DTYPE != self.dtype || !self.bytes.len().is_multiple_of(size) {
            return None;
        }
        let mut out = vec![T::default(); self.bytes.len() / size];
        let out_bytes = bytemuck::cast_slice_mut::<T, u8>(&mut out);
        out_bytes.copy_from_slice(&self.bytes);
        to_little_endian(out_bytes, size);
        Some(out)
    }

    /// Number of whole vectors the bytes hold (0 when `dim` is 0).
    pub fn count(&self) -> usize {
        let row = self.dim.saturating_mul(self.dtype.size_bytes());
        self.bytes.len().checked_div(row).unwrap_or(0)
    }
}

/// Converts between native and little-endian element bytes (the same swap both ways).
fn to_little_endian(bytes: &mut [u8], size: usize) {
    if cfg!(target_endian = "big") && size > 1 {
        for chunk in bytes.chunks_exact_mut(size) {
            chunk.reverse();
        }
    }
}

/// One logged operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogOp {
    /// New vectors under new ids.
    Insert {
        /// Their ids, one per vector.
        ids: Vec<u64>,
        /// The vectors.
        vectors: LogVectors,
    },
    /// Removal of ids.
    Delete {
        /// The ids removed.
        ids: Vec<u64>,
    },
    /// Vectors that replace those of existing ids, or are inserted when the id is absent.
    Upsert {
        /// Their ids, one per vector.
        ids: Vec<u64>,
        /// The vectors.
        vectors: LogVectors,
    },
}

impl LogOp {
    /// The ids the operation touches.
    pub fn ids(&self) -> &[u64] {
        match self {
            Self::Insert { ids, .. } | Self::Delete { ids } | Self::Upsert { ids, .. } => ids,
        }
    }

    /// The vectors of an insert or upsert.
    pub fn vectors(&self) -> Option<&LogVectors> {
        match self {
            Self::Insert { vectors, .. } | Self::Upsert { vectors, .. } => Some(vectors),
            Self::Delete { .. } => None,
        }
    }

    fn code(&self) -> u8 {
        match self {
            Self::Insert { .. } => OP_INSERT,
            Self::Delete { .. } => OP_DELETE,
            Self::Upsert { .. } => OP_UPSERT,
        }
    }
}

/// One record of the log: an operation and its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Sequence number (`base_seq + 1` for the first record, then contiguous).
    pub seq: u64,
    /// The operation.
    pub op: LogOp,
}

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

fn file_err(path: &Path) -> impl Fn(io::Error) -> WalError + '_ {
    move |e| WalError::File(FileError::new(path, FileErrorKind::Io(e)))
}

fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> WalError {
    WalError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}

fn encode_header(base_seq: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&base_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[0..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Checks the header at the start of `data`; returns `base_seq`.
fn parse_header(path: &Path, data: &[u8]) -> Result<u64, WalError> {
    let h = data.get(..HEADER_LEN as usize).ok_or_else(|| {
        corrupt(
            path,
            0,
            format!(
                "the file is {} bytes, shorter than the {HEADER_LEN}-byte header",
                data.len()
            ),
        )
    })?;
    if h[0..8] != MAGIC {
        let mut found = [0u8; 8];
        found.copy_from_slice(&h[0..8]);
        return Err(FileError::new(
            path,
            FileErrorKind::WrongMagic {
                expected: KIND_NAME,
                found,
            },
        )
        .into());
    }
    if crc32fast::hash(&h[0..28]) != le_u32(h, 28) {
        return Err(corrupt(path, 0, "header checksum mismatch"));
    }
    let version = le_u32(h, 8);
    if version == 0 || version > VERSION {
        return Err(FileError::new(
            path,
            FileErrorKind::UnsupportedVersion {
                found: version,
                supported: VERSION,
            },
        )
        .into());
    }
    if le_u32(h, 12) != 0 || le_u32(h, 24) != 0 {
        return Err(corrupt(path, 0, "reserved header fields are not zero"));
    }
    Ok(le_u64(h, 16))
}

/// Checks an operation and returns its body length.
fn body_len(op: &LogOp) -> Result<u32, String> {
    let ids = op.ids();
    let count = u32::try_from(ids.len())
        .map_err(|_| format!("{} ids in one operation (at most {})", ids.len(), u32::MAX))?;
    let mut len = FIXED_LEN as u64 + 8 * u64::from(count);
    if let Some(v) = op.vectors() {
        if v.dim == 0 {
            return Err("vectors of dimension 0".into());
        }
        let dim = u32::try_from(v.dim).map_err(|_| format!("dimension {} too large", v.dim))?;
        let expected = u64::from(count)
            .checked_mul(u64::from(dim))
            .and_then(|n| n.checked_mul(v.dtype.size_bytes() as u64));
        if expected != Some(v.bytes.len() as u64) {
            return Err(format!(
                "{} bytes of {} vectors for {count} ids of dimension {dim} (expected {})",
                v.bytes.len(),
                v.dtype,
                expected.map_or_else(|| "more than 2^64".to_string(), |e| e.to_string()),
            ));
        }
        len += (FIXED_VEC_LEN - FIXED_LEN) as u64 + v.bytes.len() as u64;
    }
    u32::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_BODY_LEN)
        .ok_or_else(|| {
            format!("the record would be {len} bytes (at most {MAX_BODY_LEN}): split the batch")
        })
}

/// Appends one record (of an operation already checked by [`body_len`]) to `buf`.
fn encode_record(buf: &mut Vec<u8>, seq: u64, op: &LogOp, body_len: u32) {
    let start = buf.len();
    buf.extend_from_slice(&body_len.to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    let body_start = buf.len();
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.push(op.code());
    let ids = op.ids();
    buf.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    if let Some(v) = op.vectors() {
        buf.push(v.dtype.code());
        buf.extend_from_slice(&(v.dim as u32).to_le_bytes());
    }
    for id in ids {
        buf.extend_from_slice(&id.to_le_bytes());
    }
    if let Some(v) = op.vectors() {
        buf.extend_from_slice(&v.bytes);
    }
    let crc = crc32fast::hash(&buf[body_start..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes `ops` numbered from `first_seq` into one buffer (all checked before any is
/// encoded).
fn encode_batch(ops: &[LogOp], first_seq: u64, path: &Path) -> Result<Vec<u8>, WalError> {
    let mut lens = Vec::with_capacity(ops.len());
    let mut total = 0usize;
    for (i, op) in ops.iter().enumerate() {
        let len = body_len(op).map_err(|why| {
            WalError::Invalid(format!(
                "{}: operation {i} of the batch: {why}",
                path.display()
            ))
        })?;
        total = total.saturating_add(PREFIX_LEN + len as usize);
        lens.push(len);
    }
    let mut buf = Vec::with_capacity(total);
    for (i, (op, len)) in ops.iter().zip(lens).enumerate() {
        encode_record(&mut buf, first_seq + i as u64, op, len);
    }
    Ok(buf)
}

/// Decodes a checksum-valid body.
fn decode_body(body: &[u8]) -> Result<LogRecord, String> {
    let short = |e: crate::dir::bytes::ShortPayload| format!("body too short: {e}");
    let mut r = ByteReader::new(body);
    let seq = r.u64().map_err(short)?;
    let op = r.u8().map_err(short)?;
    if !matches!(op, OP_INSERT | OP_DELETE | OP_UPSERT) {
        return Err(format!("unknown operation code {op}"));
    }
    let count = r.u32().map_err(short)? as usize;
    let vec_shape = if op == OP_DELETE {
        None
    } else {
        let code = r.u8().map_err(short)?;
        let dtype =
            DType::from_code(code).ok_or_else(|| format!("unknown element type code {code}"))?;
        let dim = r.u32().map_err(short)? as usize;
        if dim == 0 {
            return Err("vectors of dimension 0".into());
        }
        Some((dtype, dim))
    };
    let id_bytes = count
        .checked_mul(8)
        .ok_or_else(|| format!("{count} ids overflow"))?;
    let ids: Vec<u64> = r
        .bytes(id_bytes)
        .map_err(|_| format!("{count} ids do not fit in the record"))?
        .chunks_exact(8)
        .map(|c| le_u64(c, 0))
        .collect();
    let vectors = match vec_shape {
        None => None,
        Some((dtype, dim)) => {
            let n = count
                .checked_mul(dim)
                .and_then(|n| n.checked_mul(dtype.size_bytes()))
                .ok_or_else(|| format!("{count} vectors of dimension {dim} overflow"))?;
            let bytes = r
                .bytes(n)
                .map_err(|_| {
                    format!("{count} vectors of dimension {dim} ({dtype}) do not fit in the record")
                })?
                .to_vec();
            Some(LogVectors { dtype, dim, bytes })
        }
    };
    if r.remaining() != 0 {
        return Err(format!(
            "{} bytes left over after the operation",
            r.remaining()
        ));
    }
    let op = match (op, vectors) {
        (OP_DELETE, _) => LogOp::Delete { ids },
        (OP_INSERT, Some(vectors)) => LogOp::Insert { ids, vectors },
        (_, Some(vectors)) => LogOp::Upsert { ids, vectors },
        (_, None) => return Err("vectors missing".into()),
    };
    Ok(LogRecord { seq, op })
}

/// The body length implied by the fixed fields at the start of a (possibly partial) body,
/// `None` when they are not all there or make no sense.
fn implied_body_len(body_prefix: &[u8]) -> Option<u64> {
    let fixed = body_prefix.get(..FIXED_LEN)?;
    let op = fixed[8];
    let count = u64::from(le_u32(fixed, 9));
    match op {
        OP_DELETE => Some(FIXED_LEN as u64 + 8 * count),
        OP_INSERT | OP_UPSERT => {
            let fixed = body_prefix.get(..FIXED_VEC_LEN)?;
            let dtype = DType::from_code(fixed[13])?;
            let dim = u64::from(le_u32(fixed, 14));
            let elems = count
                .checked_mul(dim)?
                .checked_mul(dtype.size_bytes() as u64)?;
            (FIXED_VEC_LEN as u64 + 8 * count).checked_add(elems)
        }
        _ => None,
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

/// Appends records to a log: made by [`LogWriter::create`], [`LogWriter::open_append`] or
/// [`checkpoint`]. One writer per log: a second would interleave its records.
#[derive(Debug)]
pub struct LogWriter {
    path: PathBuf,
    file: File,
    len: u64,
    next_seq: u64,
    poisoned: bool,
}

fn tmp_path(path: &Path) -> Result<PathBuf, WalError> {
    let name = path
        .file_name()
        .ok_or_else(|| WalError::Invalid(format!("{}: not a file path", path.display())))?;
    let mut tmp = name.to_os_string();
    tmp.push(".tmp");
    Ok(path.with_file_name(tmp))
}

/// Makes the directory entry of `path` (a rename) durable.
fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Writes `contents` as the whole file `path` atomically (temporary file, sync, rename, sync
/// of the directory); returns the open file.
fn replace_atomically(path: &Path, contents: &[u8]) -> Result<File, WalError> {
    let tmp = tmp_path(path)?;
    let write = || -> io::Result<File> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all_at(contents, 0)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        Ok(file)
    };
    let file = write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        file_err(path)(e)
    })?;
    sync_parent(path).map_err(file_err(path))?;
    Ok(file)
}

impl LogWriter {
    /// Writes a new log at `path` holding only the header (replacing any file there,
    /// atomically), open for appending; its first record will be `base_seq + 1`.
    pub fn create(path: &Path, base_seq: u64) -> Result<LogWriter, WalError> {
        let next_seq = first_seq(path, base_seq)?;
        let file = replace_atomically(path, &encode_header(base_seq))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len: HEADER_LEN,
            next_seq,
            poisoned: false,
        })
    }

    /// Opens the log at `path`, just read into `contents` by [`read_log`], for appending:
    /// cuts the file to [`LogContents::valid_len`] (dropping a torn tail, synced) and
    /// continues the sequence after the last good record.
    pub fn open_append(path: &Path, contents: &LogContents) -> Result<LogWriter, WalError> {
        let n = contents.records.len() as u64;
        let consistent = contents.valid_len >= HEADER_LEN
            && contents
                .records
                .iter()
                .zip(1u64..)
                .all(|(r, i)| contents.base_seq.checked_add(i) == Some(r.seq));
        if !consistent {
            return Err(WalError::Invalid(format!(
                "{}: the log contents given are not a log read by read_log",
                path.display()
            )));
        }
        let next_seq = first_seq(path, contents.base_seq)?
            .checked_add(n)
            .ok_or_else(|| seq_overflow(path))?;
        let err = file_err(path);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(&err)?;
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut h, 0).map_err(&err)?;
        let len = file.metadata().map_err(&err)?.len();
        if h != encode_header(contents.base_seq) || len < contents.valid_len {
            return Err(WalError::Invalid(format!(
                "{}: the log changed since it was read (reread it)",
                path.display()
            )));
        }
        if len > contents.valid_len {
            file.set_len(contents.valid_len).map_err(&err)?;
            file.sync_data().map_err(&err)?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len: contents.valid_len,
            next_seq,
            poisoned: false,
        })
    }

    /// Appends `ops` as consecutive records with one write at the end of the file and, when
    /// `sync`, one `fdatasync` (group commit); returns the sequence numbers assigned (an empty
    /// range for no ops). Every operation is checked before anything is written. When the
    /// write or sync fails the file is cut back to its previous length (best effort) and the
    /// writer refuses further appends ([`WalError::Poisoned`]).
    pub fn append(&mut self, ops: &[LogOp], sync: bool) -> Result<RangeInclusive<u64>, WalError> {
        self.check_poisoned()?;
        let first = self.next_seq;
        let next = first
            .checked_add(ops.len() as u64)
            .ok_or_else(|| seq_overflow(&self.path))?;
        let buf = encode_batch(ops, first, &self.path)?;
        let written = (|| -> io::Result<()> {
            if !buf.is_empty() {
                self.file.write_all_at(&buf, self.len)?;
            }
            if sync {
                self.file.sync_data()?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            self.poisoned = true;
            if self.file.set_len(self.len).is_ok() {
                let _ = self.file.sync_data();
            }
            return Err(file_err(&self.path)(e));
        }
        self.len += buf.len() as u64;
        self.next_seq = next;
        // `first..=first - 1` is empty; `first >= 1` always (it follows base_seq).
        Ok(first..=next - 1)
    }

    /// Makes every record appended so far durable (`fdatasync`).
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.check_poisoned()?;
        self.file.sync_data().map_err(|e| {
            self.poisoned = true;
            file_err(&self.path)(e)
        })
    }

    /// Sequence number the next appended record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Bytes of the log (header and records).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log holds no records (only its header).
    pub fn is_empty(&self) -> bool {
        self.len <= HEADER_LEN
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_poisoned(&self) -> Result<(), WalError> {
        if self.poisoned {
            Err(WalError::Poisoned {
                path: self.path.clone(),
            })
        } else {
            Ok(())
        }
    }
}

fn seq_overflow(path: &Path) -> WalError {
    WalError::Invalid(format!(
        "{}: sequence numbers exhausted (past {})",
        path.display(),
        u64::MAX
    ))
}

/// The first sequence number after `base_seq`.
fn first_seq(path: &Path, base_seq: u64) -> Result<u64, WalError> {
    base_seq.checked_add(1).ok_or_else(|| seq_overflow(path))
}

/// Rewrites the log at `path` to hold only `keep` after a header of base `new_base_seq`,
/// atomically (temporary file, sync, rename, sync of the directory: a crash leaves the old or
/// the new log whole); returns a writer appending to the new log. `keep` must be numbered
/// `new_base_seq + 1`, `+ 2`, ... contiguously. Drop any writer of the old log first: its
/// appends would go to the replaced file.
pub fn checkpoint(
    path: &Path,
    new_base_seq: u64,
    keep: &[LogRecord],
) -> Result<LogWriter, WalError> {
    let first = first_seq(path, new_base_seq)?;
    for (i, r) in keep.iter().enumerate() {
        let want = first.checked_add(i as u64);
        if want != Some(r.seq) {
            return Err(WalError::Invalid(format!(
                "{}: checkpoint record {i} has sequence number {}, expected {} (records kept \
                 must follow the new base {new_base_seq} contiguously)",
                path.display(),
                r.seq,
                want.map_or_else(|| "none".to_string(), |w| w.to_string()),
            )));
        }
    }
    let next_seq = first
        .checked_add(keep.len() as u64)
        .ok_or_else(|| seq_overflow(path))?;
    let ops: Vec<LogOp> = keep.iter().map(|r| r.op.clone()).collect();
    let mut contents = encode_header(new_base_seq).to_vec();
    contents.extend_from_slice(&encode_batch(&ops, first, path)?);
    let file = replace_atomically(path, &contents)?;
    Ok(LogWriter {
        path: path.to_path_buf(),
        file,
        len: contents.len() as u64,
        next_seq,
        poisoned: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            LogOp::Insert { ids, vectors }
        } else {
            LogOp::Upsert { ids, vectors }
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
        assert_eq!(w.append(&ops[4..], true).unwrap(), 105..=108);
        let c = read_log(&path).unwrap();
        assert_eq!(c.records, records(100, &ops));

        // The element values survive.
        let LogOp::Insert { ids, vectors } = &c.records[0].op else {
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
        h[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32fast::hash(&h[..28]);
        h[28..].copy_from_slice(&crc.to_le_bytes());
        fs::write(&path, h).unwrap();
        let err = read_log(&path).unwrap_err();
        assert!(
            matches!(
                &err,
                WalError::File(f) if matches!(f.kind, FileErrorKind::UnsupportedVersion { found: 2, supported: 1 })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("version 2"), "{err}");
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
        };
        let dim0 = LogOp::Upsert {
            ids: vec![],
            vectors: LogVectors {
                dtype: DType::U8,
                dim: 0,
                bytes: vec![],
            },
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
}
