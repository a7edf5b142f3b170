//! `attrs.trawl`: an index's attributes, in the trawl envelope (magic, version, length,
//! CRC-32 of the payload and of the header).
//!
//! Payload (little-endian):
//!
//! | field | size |
//! |---|---|
//! | rows `n` | u32 |
//! | labels | u32 |
//! | per label: name length, name (UTF-8), bitmap length, bitmap (Roaring's portable format) | u32, bytes, u32, bytes |
//! | fields | u32 |
//! | per field: name length, name, type (0 `i64`, 1 `f64`), presence (0 every row, 1 a bitmap follows), [bitmap length, bitmap], `n` values (8 bytes each; 0 where absent), order length, order (rows by value) | u32, bytes, u8, u8, [u32, bytes], 8·n, u32, 4·len |
//!
//! Reading checks everything [`Attributes::from_parts`] checks: labels unique and well formed,
//! rows in range, values finite, each order a sort of its field's rows.

use std::path::Path;

use roaring::RoaringBitmap;

use crate::dir::bytes::{ByteReader, ByteWriter};
use crate::dir::file::{read_envelope, EnvelopeWriter, FileErrorKind};
use crate::dir::FileError;
use crate::filter::attrs::{Attributes, Column, Field};

/// The file name.
pub const FILE_NAME: &str = "attrs.trawl";
/// Magic.
pub const MAGIC: [u8; 8] = *b"TRAWLATR";
/// Format version.
pub const VERSION: u32 = 1;

/// Writes `attrs` to `path` (a temporary name, `fsync`, rename); returns the payload CRC.
pub fn save(attrs: &Attributes, path: &Path) -> Result<u64, FileError> {
    let payload = encode(attrs).map_err(|e| FileError::new(path, e.into()))?;
    let mut env = EnvelopeWriter::create(path, MAGIC, VERSION)?;
    env.write(&payload)?;
    env.finish()
}

/// The payload of `attrs` (the table above): what the file holds inside its envelope, and
/// what a log record of an insert carries.
pub fn encode(attrs: &Attributes) -> std::io::Result<Vec<u8>> {
    let mut w = ByteWriter::new();
    w.u32(attrs.n());
    let labels: Vec<_> = attrs.labels().collect();
    w.u32(labels.len() as u32);
    for (name, bits) in labels {
        w.u32(name.len() as u32);
        w.bytes(name.as_bytes());
        let mut b = Vec::with_capacity(bits.serialized_size());
        bits.serialize_into(&mut b)?;
        w.u32(b.len() as u32);
        w.bytes(&b);
    }
    w.u32(attrs.fields().len() as u32);
    for f in attrs.fields() {
        w.u32(f.name.len() as u32);
        w.bytes(f.name.as_bytes());
        match &f.values {
            Column::I64(v) => {
                w.u8(0);
                write_presence(&mut w, f.present.as_ref())?;
                for x in v {
                    w.u64(*x as u64);
                }
            }
            Column::F64(v) => {
                w.u8(1);
                write_presence(&mut w, f.present.as_ref())?;
                for x in v {
                    w.u64(x.to_bits());
                }
            }
        }
        w.u32(f.order.len() as u32);
        w.u32s(&f.order);
    }
    Ok(w.into_inner())
}

fn write_presence(w: &mut ByteWriter, present: Option<&RoaringBitmap>) -> std::io::Result<()> {
    match present {
        None => w.u8(0),
        Some(p) => {
            w.u8(1);
            let mut b = Vec::with_capacity(p.serialized_size());
            p.serialize_into(&mut b)?;
            w.u32(b.len() as u32);
            w.bytes(&b);
        }
    }
    Ok(())
}

/// Reads and checks the attribute file at `path`; `n` is the index's row count.
pub fn load(path: &Path, n: u64) -> Result<Attributes, FileError> {
    let (_, payload) = read_envelope(path, MAGIC, "trawl attributes", VERSION)?;
    let invalid = |m: String| FileError::new(path, FileErrorKind::Invalid(m));
    let attrs = decode(&payload).map_err(invalid)?;
    if u64::from(attrs.n()) != n {
        return Err(invalid(format!(
            "attributes of {} rows for an index of {n}",
            attrs.n()
        )));
    }
    Ok(attrs)
}

/// Reads and checks a payload written by [`encode`].
pub fn decode(payload: &[u8]) -> Result<Attributes, String> {
    let mut r = ByteReader::new(payload);
    let short = |e: crate::dir::bytes::ShortPayload| e.to_string();
    let n = r.u32().map_err(short)?;
    let labels = r.u32().map_err(short)? as usize;
    let mut out = Vec::with_capacity(labels.min(1 << 20));
    for _ in 0..labels {
        let name = text(&mut r)?;
        let bits = bitmap(&mut r)?;
        out.push((name, bits));
    }
    let nf = r.u32().map_err(short)? as usize;
    let mut fields = Vec::with_capacity(nf.min(1024));
    for _ in 0..nf {
        let name = text(&mut r)?;
        let ty = r.u8().map_err(short)?;
        let present = match r.u8().map_err(short)? {
            0 => None,
            1 => Some(bitmap(&mut r)?),
            p => return Err(format!("field {name:?}: presence flag {p}")),
        };
        let raw = r.bytes(n as usize * 8).map_err(short)?;
        let words = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()));
        let values = match ty {
            0 => Column::I64(words.map(|w| w as i64).collect()),
            1 => Column::F64(words.map(f64::from_bits).collect()),
            t => return Err(format!("field {name:?}: type {t}")),
        };
        let len = r.u32().map_err(short)? as usize;
        let order = r.u32s(len).map_err(short)?;
        fields.push(Field {
            name,
            values,
            present,
            order,
        });
    }
    if r.remaining() != 0 {
        return Err(format!("{} bytes after the last field", r.remaining()));
    }
    Attributes::from_parts(n, out, fields)
}

fn text(r: &mut ByteReader<'_>) -> Result<String, String> {
    let len = r.u32().map_err(|e| e.to_string())? as usize;
    let b = r.bytes(len).map_err(|e| e.to_string())?;
    String::from_utf8(b.to_vec()).map_err(|_| "a name that is not UTF-8".to_string())
}

fn bitmap(r: &mut ByteReader<'_>) -> Result<RoaringBitmap, String> {
    let len = r.u32().map_err(|e| e.to_string())? as usize;
    let b = r.bytes(len).map_err(|e| e.to_string())?;
    let bits = RoaringBitmap::deserialize_from(b).map_err(|e| format!("a damaged bitmap: {e}"))?;
    if bits.serialized_size() != len {
        return Err("a bitmap with bytes after its end".into());
    }
    Ok(bits)
}

/// Reads and checks the attribute file `name` of the index in `dir` of `n` rows: what its
/// component's check says (every kind registers one).
pub fn verify(dir: &Path, name: &str, n: u64) -> Result<String, FileError> {
    Ok(describe(&load(&dir.join(name), n)?))
}

/// What a check of the file found, in words.
pub fn describe(a: &Attributes) -> String {
    format!(
        "checksum matches; {} labels ({} occurrences, {} bytes of bitmaps), {} numeric fields",
        a.labels().count(),
        a.label_occurrences(),
        a.label_bytes(),
        a.fields().len()
    )
}
