//! Attributes from files: DiskANN's label file (one line per vector, labels separated by
//! commas; an empty line is a vector without labels) and JSON lines (one object per vector:
//! a number is a numeric field, a string, boolean or list of them are labels `key=value`, the
//! key `label` holds plain labels, `null` or an absent key is no value).

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::filter::attrs::{AttrsBuilder, Number, LABEL_FIELD};
use crate::filter::FilterError;

fn open(path: &Path) -> Result<BufReader<std::fs::File>, FilterError> {
    std::fs::File::open(path)
        .map(BufReader::new)
        .map_err(|source| FilterError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Lines of `path`, each handed to `each(row, line)`; the file must hold exactly `n` lines.
fn for_lines(
    path: &Path,
    n: usize,
    what: &str,
    each: &mut dyn FnMut(u32, &str) -> Result<(), String>,
) -> Result<(), FilterError> {
    let mut lines = 0usize;
    for line in open(path)?.lines() {
        let line = line.map_err(|source| FilterError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        lines += 1;
        if lines > n {
            continue;
        }
        each((lines - 1) as u32, line.trim_end_matches('\r')).map_err(|message| {
            FilterError::Input {
                path: path.to_path_buf(),
                line: lines,
                message,
            }
        })?;
    }
    if lines != n {
        return Err(FilterError::Shape {
            path: path.to_path_buf(),
            message: format!(
                "{what} has {lines} lines but the data has {n} vectors (one line per vector)"
            ),
        });
    }
    Ok(())
}

/// Reads a label file of `n` lines into `b`.
pub fn read_label_file(path: &Path, n: usize, b: &mut AttrsBuilder) -> Result<(), FilterError> {
    for_lines(path, n, "the label file", &mut |row, line| {
        for label in line.split(',').map(str::trim).filter(|l| !l.is_empty()) {
            b.add_label(row, label).map_err(|e| match e {
                FilterError::Attrs(m) => m,
                e => e.to_string(),
            })?;
        }
        Ok(())
    })
}

/// Reads a JSON-lines attribute file of `n` lines into `b`.
pub fn read_attrs_jsonl(path: &Path, n: usize, b: &mut AttrsBuilder) -> Result<(), FilterError> {
    for_lines(path, n, "the attribute file", &mut |row, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let serde_json::Value::Object(map) = v else {
            return Err("expected a JSON object (one per vector)".into());
        };
        for (key, value) in &map {
            add_json(b, row, key, value).map_err(|e| match e {
                FilterError::Attrs(m) => m,
                e => e.to_string(),
            })?;
        }
        Ok(())
    })
}

/// Adds one JSON attribute of `row`.
pub fn add_json(
    b: &mut AttrsBuilder,
    row: u32,
    key: &str,
    value: &serde_json::Value,
) -> Result<(), FilterError> {
    use serde_json::Value as J;
    let label = |b: &mut AttrsBuilder, text: &str| {
        if key == LABEL_FIELD || key == "labels" {
            b.add_label(row, text)
        } else {
            b.add_label(row, &format!("{key}={text}"))
        }
    };
    match value {
        J::Null => Ok(()),
        J::Number(x) => {
            if key == LABEL_FIELD || key == "labels" {
                return label(b, &x.to_string());
            }
            let v = match x.as_i64() {
                Some(i) => Number::I64(i),
                None => Number::F64(x.as_f64().unwrap_or(f64::NAN)),
            };
            b.set_number(key, row, v)
        }
        J::String(s) => label(b, s),
        J::Bool(t) => label(b, if *t { "true" } else { "false" }),
        J::Array(items) => {
            for item in items {
                match item {
                    J::String(s) => label(b, s)?,
                    J::Number(x) => label(b, &x.to_string())?,
                    J::Bool(t) => label(b, if *t { "true" } else { "false" })?,
                    _ => {
                        return Err(FilterError::Attrs(format!(
                            "{key:?}: a list holds strings, numbers or booleans only"
                        )))
                    }
                }
            }
            Ok(())
        }
        J::Object(_) => Err(FilterError::Attrs(format!(
            "{key:?}: nested objects are not attributes (flatten them: \"{key}.field\")"
        ))),
    }
}

/// Reads a numpy column (`.npy`, shape `(n,)`) into field `name` of `b`: integers (`i1`..`i8`,
/// `u1`..`u4`, and `u8` below 2^63) an `i64` field, floats (`f4`, `f8`; NaN and infinities
/// refused) an `f64` field, booleans the labels `name=true` / `name=false`.
pub fn read_npy_column(
    path: &Path,
    name: &str,
    n: usize,
    b: &mut AttrsBuilder,
) -> Result<(), FilterError> {
    let io = |source| FilterError::Io {
        path: path.to_path_buf(),
        source,
    };
    let shape = |message: String| FilterError::Shape {
        path: path.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(path).map_err(io)?;
    let head = bytes.get(..12).unwrap_or(&bytes);
    let (pre, len) = crate::data::npy::prefix_len(head).map_err(|e| shape(e.to_string()))?;
    let text = bytes
        .get(pre..pre + len)
        .and_then(|t| std::str::from_utf8(t).ok())
        .ok_or_else(|| shape("npy header cut off or not text".into()))?;
    let (descr, rows) =
        crate::data::npy::parse_column_dict(text).map_err(|e| shape(e.to_string()))?;
    if rows != n as u64 {
        return Err(shape(format!(
            "the column has {rows} values but the data has {n} vectors (one per vector)"
        )));
    }
    let kind = descr.trim_start_matches(['<', '|', '=']);
    let size: usize = kind.get(1..).and_then(|s| s.parse().ok()).unwrap_or(0);
    let data = &bytes[pre + len..];
    if !matches!(kind.as_bytes().first(), Some(b'i' | b'u' | b'f' | b'b'))
        || descr.starts_with('>')
        || !matches!(
            (kind.as_bytes()[0], size),
            (b'i' | b'u', 1 | 2 | 4 | 8) | (b'f', 4 | 8) | (b'b', 1)
        )
    {
        return Err(shape(format!(
            "dtype {descr}: an attribute column is integers, floats or booleans, little-endian"
        )));
    }
    if data.len() < n * size {
        return Err(shape(format!(
            "{} bytes of values for {n} values of {size} bytes: the file is cut off",
            data.len()
        )));
    }
    let bad = |row: usize, m: String| FilterError::Input {
        path: path.to_path_buf(),
        line: row + 1,
        message: m,
    };
    for row in 0..n {
        let c = &data[row * size..(row + 1) * size];
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(c);
        let v = match (kind.as_bytes()[0], size) {
            (b'b', _) => {
                b.add_label(row as u32, &format!("{name}={}", c[0] != 0))?;
                continue;
            }
            (b'f', 4) => Number::F64(f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
            (b'f', _) => Number::F64(f64::from_le_bytes(w)),
            (b'u', 8) => Number::I64(i64::try_from(u64::from_le_bytes(w)).map_err(|_| {
                bad(
                    row,
                    format!(
                        "value {} does not fit a 64-bit signed integer",
                        u64::from_le_bytes(w)
                    ),
                )
            })?),
            (b'u', _) => Number::I64(u64::from_le_bytes(w) as i64),
            (_, _) => {
                // Sign-extend from `size` bytes.
                let shift = 64 - 8 * size as u32;
                Number::I64((i64::from_le_bytes(w) << shift) >> shift)
            }
        };
        if let Number::F64(x) = v {
            if !x.is_finite() {
                return Err(bad(
                    row,
                    format!("value {x} is not a finite number (value {row})"),
                ));
            }
        }
        b.set_number(name, row as u32, v)?;
    }
    Ok(())
}
