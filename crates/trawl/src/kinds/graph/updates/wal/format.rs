//! The log's bytes: its header and its records, encoded and decoded (the layout is in the
//! module documentation of [`super`]).

use std::path::Path;

use crate::dir::bytes::ByteReader;
use crate::dir::{FileError, FileErrorKind};
use crate::kernels::DType;

use super::{
    corrupt, LogAttrs, LogOp, LogRecord, LogVectors, WalError, HEADER_LEN, MAX_BODY_LEN, VERSION,
};

const MAGIC: [u8; 8] = *b"TRAWLWAL";
const KIND_NAME: &str = "trawl write-ahead log";
/// Bytes of a record's prefix: `u32 body_len`, `u32 crc32(body)`.
pub(super) const PREFIX_LEN: usize = 8;
/// Bytes of a body's fixed part: `u64 seq`, `u8 op`, `u32 count`.
pub(super) const FIXED_LEN: usize = 13;
/// Bytes of the fixed part of an insert or upsert: plus `u8 dtype`, `u32 dim`.
const FIXED_VEC_LEN: usize = 18;
/// Bytes of the fixed part of an insert or upsert with attributes: plus `u32 attrs_len`.
const FIXED_ATTRS_LEN: usize = 22;

pub(super) const OP_INSERT: u8 = 1;
const OP_DELETE: u8 = 2;
pub(super) const OP_UPSERT: u8 = 3;
/// Since version 2.
const OP_INSERT_ATTRS: u8 = 4;
/// Since version 2.
const OP_UPSERT_ATTRS: u8 = 5;

impl LogOp {
    fn code(&self) -> u8 {
        match self {
            Self::Insert { attrs: None, .. } => OP_INSERT,
            Self::Insert { .. } => OP_INSERT_ATTRS,
            Self::Delete { .. } => OP_DELETE,
            Self::Upsert { attrs: None, .. } => OP_UPSERT,
            Self::Upsert { .. } => OP_UPSERT_ATTRS,
        }
    }
}

pub(super) fn encode_header(base_seq: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&base_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[0..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

pub(super) fn le_u32(b: &[u8], at: usize) -> u32 {
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
pub(super) fn parse_header(path: &Path, data: &[u8]) -> Result<u64, WalError> {
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
pub(super) fn body_len(op: &LogOp) -> Result<u32, String> {
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
    if let Some(a) = op.attrs() {
        if a.bytes.len() > MAX_BODY_LEN as usize {
            return Err(format!("{} bytes of attributes", a.bytes.len()));
        }
        len += (FIXED_ATTRS_LEN - FIXED_VEC_LEN) as u64 + a.bytes.len() as u64;
    }
    u32::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_BODY_LEN)
        .ok_or_else(|| {
            format!("the record would be {len} bytes (at most {MAX_BODY_LEN}): split the batch")
        })
}

/// Appends one record (of an operation already checked by [`body_len`]) to `buf`.
pub(super) fn encode_record(buf: &mut Vec<u8>, seq: u64, op: &LogOp, body_len: u32) {
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
    if let Some(a) = op.attrs() {
        buf.extend_from_slice(&(a.bytes.len() as u32).to_le_bytes());
    }
    for id in ids {
        buf.extend_from_slice(&id.to_le_bytes());
    }
    if let Some(v) = op.vectors() {
        buf.extend_from_slice(&v.bytes);
    }
    if let Some(a) = op.attrs() {
        buf.extend_from_slice(&a.bytes);
    }
    let crc = crc32fast::hash(&buf[body_start..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes `ops` numbered from `first_seq` into one buffer (all checked before any is
/// encoded).
pub(super) fn encode_batch(
    ops: &[LogOp],
    first_seq: u64,
    path: &Path,
) -> Result<Vec<u8>, WalError> {
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
pub(super) fn decode_body(body: &[u8]) -> Result<LogRecord, String> {
    let short = |e: crate::dir::bytes::ShortPayload| format!("body too short: {e}");
    let mut r = ByteReader::new(body);
    let seq = r.u64().map_err(short)?;
    let op = r.u8().map_err(short)?;
    if !matches!(
        op,
        OP_INSERT | OP_DELETE | OP_UPSERT | OP_INSERT_ATTRS | OP_UPSERT_ATTRS
    ) {
        return Err(format!("unknown operation code {op}"));
    }
    let with_attrs = matches!(op, OP_INSERT_ATTRS | OP_UPSERT_ATTRS);
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
    let attrs_len = if with_attrs {
        Some(r.u32().map_err(short)? as usize)
    } else {
        None
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
    let attrs = match attrs_len {
        None => None,
        Some(len) => Some(LogAttrs {
            bytes: r
                .bytes(len)
                .map_err(|_| format!("{len} bytes of attributes do not fit in the record"))?
                .to_vec(),
        }),
    };
    if r.remaining() != 0 {
        return Err(format!(
            "{} bytes left over after the operation",
            r.remaining()
        ));
    }
    let op = match (op, vectors) {
        (OP_DELETE, _) => LogOp::Delete { ids },
        (OP_INSERT | OP_INSERT_ATTRS, Some(vectors)) => LogOp::Insert {
            ids,
            vectors,
            attrs,
        },
        (_, Some(vectors)) => LogOp::Upsert {
            ids,
            vectors,
            attrs,
        },
        (_, None) => return Err("vectors missing".into()),
    };
    Ok(LogRecord { seq, op })
}

/// The body length implied by the fixed fields at the start of a (possibly partial) body,
/// `None` when they are not all there or make no sense.
pub(super) fn implied_body_len(body_prefix: &[u8]) -> Option<u64> {
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
        OP_INSERT_ATTRS | OP_UPSERT_ATTRS => {
            let fixed = body_prefix.get(..FIXED_ATTRS_LEN)?;
            let dtype = DType::from_code(fixed[13])?;
            let dim = u64::from(le_u32(fixed, 14));
            let attrs = u64::from(le_u32(fixed, 18));
            let elems = count
                .checked_mul(dim)?
                .checked_mul(dtype.size_bytes() as u64)?;
            (FIXED_ATTRS_LEN as u64 + 8 * count)
                .checked_add(elems)?
                .checked_add(attrs)
        }
        _ => None,
    }
}
