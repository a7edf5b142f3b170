//! The NumPy `.npy` header: parsing versions 1.0, 2.0 and 3.0, and writing 1.0 (2.0 when long).
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 6 | magic `\x93NUMPY` |
//! | 6 | 1 | major version (1, 2 or 3) |
//! | 7 | 1 | minor version (0) |
//! | 8 | 2 (v1) or 4 (v2, v3) | header length `h`, little-endian |
//! | 10 or 12 | h | a Python dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (n, d), }`, padded with spaces and ending in `\n` |
//! | 10/12 + h | n·d·size | row-major (C-order) elements |
//!
//! trawl reads 2-D C-order arrays of `<f4`, `|u1` and `|i1` (`<`/`>`/`=` byte orders are
//! accepted for one-byte types). Writers pad the header so the data starts on a 64-byte boundary.

use crate::kernels::DType;

use crate::data::error::DataErrorKind;

/// The npy magic string.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// What the header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Element type.
    pub dtype: DType,
    /// Rows.
    pub n: u64,
    /// Columns.
    pub dim: u64,
    /// Byte offset of the first element.
    pub data_offset: u64,
}

/// Length of the fixed prefix before the dict, and the dict's length, from the first 12 bytes.
pub fn prefix_len(head: &[u8]) -> Result<(usize, usize), DataErrorKind> {
    if head.len() < 10 || &head[..6] != MAGIC {
        return Err(DataErrorKind::BadHeader("not an npy file".into()));
    }
    match head[6] {
        1 => Ok((10, u16::from_le_bytes([head[8], head[9]]) as usize)),
        2 | 3 if head.len() >= 12 => Ok((
            12,
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
        )),
        2 | 3 => Err(DataErrorKind::BadHeader("npy header cut off".into())),
        v => Err(DataErrorKind::BadHeader(format!(
            "npy format version {v}.{} is not supported (1.0, 2.0, 3.0 are)",
            head[7]
        ))),
    }
}

/// Parses the header dict `text` (the bytes after the length field).
pub fn parse_dict(text: &str, data_offset: u64) -> Result<NpyHeader, DataErrorKind> {
    let bad = |m: String| DataErrorKind::BadHeader(m);
    let descr = dict_value(text, "descr").ok_or_else(|| bad("npy header has no 'descr'".into()))?;
    let descr = unquote(descr).ok_or_else(|| {
        DataErrorKind::UnsupportedDtype(format!("{descr} (structured dtypes are not supported)"))
    })?;
    let dtype = match descr {
        "<f4" | "=f4" => DType::F32,
        "|u1" | "<u1" | ">u1" | "=u1" | "u1" | "B" => DType::U8,
        "|i1" | "<i1" | ">i1" | "=i1" | "i1" | "b" => DType::I8,
        other => return Err(DataErrorKind::UnsupportedDtype(other.to_string())),
    };
    let fortran = dict_value(text, "fortran_order")
        .ok_or_else(|| bad("npy header has no 'fortran_order'".into()))?;
    match fortran.trim() {
        "False" => {}
        "True" => {
            return Err(bad(
                "fortran_order=True (column-major) arrays are not supported; save a C-order array"
                    .into(),
            ))
        }
        other => return Err(bad(format!("bad fortran_order value `{other}`"))),
    }
    let shape = dict_value(text, "shape").ok_or_else(|| bad("npy header has no 'shape'".into()))?;
    let dims = parse_shape(shape).ok_or_else(|| bad(format!("bad shape `{shape}`")))?;
    let [n, dim] = dims[..] else {
        return Err(bad(format!(
            "shape {shape} has {} dimensions; trawl reads 2-D arrays (n, dim)",
            dims.len()
        )));
    };
    Ok(NpyHeader {
        dtype,
        n,
        dim,
        data_offset,
    })
}

/// Parses the header dict of a one-column array (an attribute column): its `descr` and rows
/// (shape `(n,)` or `(n, 1)`, C order).
pub fn parse_column_dict(text: &str) -> Result<(String, u64), DataErrorKind> {
    let bad = |m: String| DataErrorKind::BadHeader(m);
    let descr = dict_value(text, "descr").ok_or_else(|| bad("npy header has no 'descr'".into()))?;
    let descr = unquote(descr)
        .ok_or_else(|| DataErrorKind::UnsupportedDtype(format!("{descr} (structured dtype)")))?;
    if dict_value(text, "fortran_order").map(str::trim) != Some("False") {
        return Err(bad(
            "a column must be a C-order array (fortran_order False)".into(),
        ));
    }
    let shape = dict_value(text, "shape").ok_or_else(|| bad("npy header has no 'shape'".into()))?;
    match parse_shape(shape).as_deref() {
        Some(&[n]) | Some(&[n, 1]) => Ok((descr.to_string(), n)),
        _ => Err(bad(format!(
            "shape {shape}: an attribute column is one value per vector, shape (n,)"
        ))),
    }
}

/// The raw text of the value of `key` in a flat Python dict literal.
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pos = text
        .find(&format!("'{key}'"))
        .or_else(|| text.find(&format!("\"{key}\"")))?;
    let rest = text[pos + key.len() + 2..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else if let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
        rest[1..].find(q)? + 2
    } else {
        rest.find([',', '}']).unwrap_or(rest.len())
    };
    Some(&rest[..end])
}

fn unquote(s: &str) -> Option<&str> {
    let s = s.trim();
    s.strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
}

fn parse_shape(s: &str) -> Option<Vec<u64>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.trim_end_matches('L').parse().ok())
        .collect()
}

/// The descr string written for `dtype`.
pub fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
    }
}

/// A complete header (magic to padding) for an `n × dim` array, padded so that the data starts
/// on a 64-byte boundary. The length depends only on `dim` and `dtype`, never on `n`, so a
/// streaming writer can patch `n` in place.
pub fn encode_header(dtype: DType, n: u64, dim: u64) -> Vec<u8> {
    // Reserve room for the widest possible row count so the length never depends on `n`.
    let width = u64::MAX.to_string().len();
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({n}, {dim}), }}",
        descr(dtype)
    );
    let reserve = dict.len() + width - n.to_string().len();
    let mut total = 10 + reserve + 1;
    let (prefix, major) = if total.div_ceil(64) * 64 - 10 > u16::MAX as usize {
        total += 2;
        (12, 2u8)
    } else {
        (10, 1u8)
    };
    let padded = total.div_ceil(64) * 64;
    let hlen = padded - prefix;
    let mut out = Vec::with_capacity(padded);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(padded - 1, b' ');
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<NpyHeader, DataErrorKind> {
        let (p, h) = prefix_len(bytes)?;
        let text = std::str::from_utf8(&bytes[p..p + h]).unwrap();
        parse_dict(text, (p + h) as u64)
    }

    #[test]
    fn header_round_trips_and_is_aligned() {
        for dtype in [DType::F32, DType::U8, DType::I8] {
            for (n, dim) in [(0u64, 1u64), (5, 128), (u64::MAX, 960), (1, 1)] {
                let h = encode_header(dtype, n, dim);
                assert_eq!(h.len() % 64, 0);
                assert_eq!(h.len(), encode_header(dtype, 7, dim).len());
                let parsed = parse(&h).unwrap();
                assert_eq!(parsed.dtype, dtype);
                assert_eq!((parsed.n, parsed.dim), (n, dim));
                assert_eq!(parsed.data_offset, h.len() as u64);
            }
        }
    }

    #[test]
    fn numpy_written_headers_parse() {
        let text = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }    \n";
        assert_eq!(parse_dict(text, 128).unwrap().dim, 4);
        let text = "{\"descr\":\"|u1\",\"fortran_order\":False,\"shape\":(3,4)}";
        assert_eq!(parse_dict(text, 128).unwrap().dtype, DType::U8);
        let text = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }";
        assert!(
            matches!(parse_dict(text, 0), Err(DataErrorKind::UnsupportedDtype(d)) if d == "<f8")
        );
        let text = "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }";
        assert!(
            matches!(parse_dict(text, 0), Err(DataErrorKind::BadHeader(m)) if m.contains("fortran"))
        );
        let text = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
        assert!(matches!(
            parse_dict(text, 0),
            Err(DataErrorKind::BadHeader(_))
        ));
        let text = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3, 4), }";
        assert!(matches!(
            parse_dict(text, 0),
            Err(DataErrorKind::UnsupportedDtype(_))
        ));
    }

    #[test]
    fn version_checks() {
        let mut h = encode_header(DType::F32, 1, 1);
        h[6] = 4;
        assert!(prefix_len(&h).is_err());
        assert!(prefix_len(b"\x93NUMPY\x02\x00\x01").is_err());
        assert!(prefix_len(b"PK\x03\x04xxxxxxxx").is_err());
    }
}
