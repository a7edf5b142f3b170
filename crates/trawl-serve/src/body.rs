//! Request bodies: read within the size limit, and their vectors decoded from JSON, from a
//! `.npy` array (`Content-Type: application/x-npy`) or from raw little-endian values
//! (`application/octet-stream` with `X-Trawl-Dtype` and `X-Trawl-Shape` headers).

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use http_body_util::BodyExt;
use serde_json::Value;
use trawl::data::{AnyMatrix, Matrix};
use trawl::DType;

use crate::error::{ApiError, ApiResult};

/// How a request's vectors are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// A JSON object (the default without a `Content-Type`).
    Json,
    /// A `.npy` array; the other fields in the query string.
    Npy,
    /// Raw little-endian values with the dtype and shape in headers; the other fields in the
    /// query string.
    Raw,
}

/// The encoding a request's `Content-Type` names.
pub fn encoding(headers: &HeaderMap) -> ApiResult<Encoding> {
    let Some(ct) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return Ok(Encoding::Json);
    };
    let ct = ct.to_str().unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "application/json" | "" => Ok(Encoding::Json),
        "application/x-npy" | "application/npy" => Ok(Encoding::Npy),
        "application/octet-stream" => Ok(Encoding::Raw),
        _ => Err(ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Type {ct:?}: send application/json, application/x-npy or \
                 application/octet-stream"
            ),
        )),
    }
}

/// The whole body, refused with `413` beyond `limit` bytes (at once when `Content-Length`
/// says so).
pub async fn read(body: Body, headers: &HeaderMap, limit: usize) -> ApiResult<Bytes> {
    let too_large = || {
        ApiError::too_large(format!(
            "the request body is larger than the limit of {limit} bytes (--max-body-mb)"
        ))
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Err(e) => Err(ApiError::invalid(format!("reading the request body: {e}"))),
    }
}

/// The body as a JSON object.
pub fn json_object(bytes: &[u8]) -> ApiResult<serde_json::Map<String, Value>> {
    if bytes.is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::invalid("the request body must be a JSON object")),
        Err(e) => Err(ApiError::invalid(format!("malformed JSON: {e}"))),
    }
}

/// Vectors of a request, and whether they came as one vector (1-D) rather than a batch.
#[derive(Debug)]
pub struct Vectors {
    /// The vectors, of the index's element type.
    pub matrix: AnyMatrix,
    /// Given as one 1-D vector (answered as one).
    pub single: bool,
}

impl Vectors {
    /// Number of vectors.
    pub fn n(&self) -> usize {
        self.matrix.n()
    }
}

/// What the vectors must be: the index's element type and dimension.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Element type.
    pub dtype: DType,
    /// Dimension.
    pub dim: usize,
    /// Most vectors (`413` beyond).
    pub max: usize,
}

impl Expect {
    fn count(&self, n: usize) -> ApiResult<()> {
        if n > self.max {
            return Err(ApiError::too_large(format!(
                "{n} vectors in one request; the limit is {} (--max-vectors)",
                self.max
            )));
        }
        Ok(())
    }

    fn dim(&self, d: usize, row: usize) -> ApiResult<()> {
        if d != self.dim {
            return Err(ApiError::invalid(format!(
                "vector {row} has dimension {d}; the index has {}",
                self.dim
            )));
        }
        Ok(())
    }
}

/// The vectors of JSON field `field` (`[...]` one vector, `[[...], ...]` a batch), as the
/// index's element type: any finite number for `f32`, integers in range for `u8` / `i8`.
pub fn from_json(v: &Value, field: &str, e: Expect) -> ApiResult<Vectors> {
    let Value::Array(items) = v else {
        return Err(ApiError::invalid(format!(
            "{field:?} must be an array of numbers (one vector) or of arrays (vectors)"
        )));
    };
    let single = !items.first().is_some_and(Value::is_array);
    let rows: Vec<&[Value]> = if single {
        vec![items.as_slice()]
    } else {
        items
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Value::Array(r) => Ok(r.as_slice()),
                _ => Err(ApiError::invalid(format!(
                    "{field:?}[{i}] is not an array: give every vector as an array of numbers"
                ))),
            })
            .collect::<ApiResult<_>>()?
    };
    e.count(rows.len())?;
    for (i, r) in rows.iter().enumerate() {
        e.dim(r.len(), i)?;
    }
    let value = |i: usize, j: usize| -> ApiResult<f64> {
        rows[i][j].as_f64().ok_or_else(|| {
            ApiError::invalid(format!(
                "{field:?}: vector {i}, element {j} is {}, not a number",
                rows[i][j]
            ))
        })
    };
    let n = rows.len();
    let matrix = match e.dtype {
        DType::F32 => {
            let mut data = Vec::with_capacity(n * e.dim);
            for i in 0..n {
                for j in 0..e.dim {
                    let x = value(i, j)? as f32;
                    if !x.is_finite() {
                        return Err(ApiError::invalid(format!(
                            "{field:?}: vector {i}, element {j} does not fit a 32-bit float"
                        )));
                    }
                    data.push(x);
                }
            }
            AnyMatrix::F32(matrix(data, e.dim)?)
        }
        DType::U8 => AnyMatrix::U8(matrix(ints(n, e.dim, &value, field, 0.0, 255.0)?, e.dim)?),
        DType::I8 => AnyMatrix::I8(matrix(
            ints(n, e.dim, &value, field, -128.0, 127.0)?,
            e.dim,
        )?),
    };
    Ok(Vectors { matrix, single })
}

fn ints<T: TryFrom<i64>>(
    n: usize,
    dim: usize,
    value: &dyn Fn(usize, usize) -> ApiResult<f64>,
    field: &str,
    lo: f64,
    hi: f64,
) -> ApiResult<Vec<T>> {
    let mut data = Vec::with_capacity(n * dim);
    for i in 0..n {
        for j in 0..dim {
            let x = value(i, j)?;
            let t = (x.fract() == 0.0 && (lo..=hi).contains(&x))
                .then(|| T::try_from(x as i64).ok())
                .flatten()
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "{field:?}: vector {i}, element {j} is {x}: the index holds integers \
                         from {lo} to {hi}"
                    ))
                })?;
            data.push(t);
        }
    }
    Ok(data)
}

fn matrix<T: trawl::Element>(data: Vec<T>, dim: usize) -> ApiResult<Matrix<T>> {
    Matrix::from_vec(data, dim).ok_or_else(|| ApiError::invalid("the vectors are not whole rows"))
}

/// The element type named by a `.npy` `descr` or an `X-Trawl-Dtype` header.
fn dtype_named(name: &str) -> Option<DType> {
    match name {
        "<f4" | "float32" | "f32" => Some(DType::F32),
        "|u1" | "<u1" | "u1" | "uint8" | "u8" => Some(DType::U8),
        "|i1" | "<i1" | "i1" | "int8" | "i8" => Some(DType::I8),
        _ => None,
    }
}

/// Vectors from little-endian `data` of type `dtype` and `shape` (`[d]` one vector, `[n, d]`).
fn from_le(data: &[u8], dtype: DType, shape: &[usize], e: Expect) -> ApiResult<Vectors> {
    let (n, d, single) = match *shape {
        [d] => (1, d, true),
        [n, d] => (n, d, false),
        _ => {
            return Err(ApiError::invalid(format!(
                "the vectors have shape {shape:?}: give one vector (d) or a batch (n, d)"
            )))
        }
    };
    if dtype != e.dtype {
        return Err(ApiError::invalid(format!(
            "the vectors are {}, the index holds {} vectors",
            dtype.name(),
            e.dtype.name()
        )));
    }
    e.count(n)?;
    if n > 0 {
        e.dim(d, 0)?;
    }
    let want = n
        .checked_mul(d)
        .and_then(|x| x.checked_mul(dtype.size_bytes()));
    if want != Some(data.len()) {
        return Err(ApiError::invalid(format!(
            "the body holds {} bytes of vectors; shape ({n}, {d}) of {} needs {}",
            data.len(),
            dtype.name(),
            want.map_or("more".to_string(), |w| w.to_string())
        )));
    }
    let dim = e.dim;
    let matrix = match dtype {
        DType::F32 => {
            let v: Vec<f32> = data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            AnyMatrix::F32(matrix(v, dim)?)
        }
        DType::U8 => AnyMatrix::U8(matrix(data.to_vec(), dim)?),
        DType::I8 => AnyMatrix::I8(matrix(data.iter().map(|&b| b as i8).collect(), dim)?),
    };
    Ok(Vectors { matrix, single })
}

/// Vectors from a raw body: `X-Trawl-Dtype` (`float32`, `uint8`, `int8`) and `X-Trawl-Shape`
/// (`n,d`, or `d` for one vector).
pub fn from_raw(data: &[u8], headers: &HeaderMap, e: Expect) -> ApiResult<Vectors> {
    let header = |name: &str| -> ApiResult<&str> {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "a raw body needs the {name} header (X-Trawl-Dtype: float32 | uint8 | \
                     int8; X-Trawl-Shape: n,d)"
                ))
            })
    };
    let dt = header("x-trawl-dtype")?;
    let dtype = dtype_named(dt.trim()).ok_or_else(|| {
        ApiError::invalid(format!("X-Trawl-Dtype {dt:?}: float32, uint8 or int8"))
    })?;
    let shape = parse_shape(header("x-trawl-shape")?)?;
    from_le(data, dtype, &shape, e)
}

fn parse_shape(text: &str) -> ApiResult<Vec<usize>> {
    text.split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ApiError::invalid(format!("X-Trawl-Shape {text:?}: expected n,d or d")))
}

/// Vectors from a `.npy` file (format 1.0–3.0, C order, `<f4`, `|u1` or `|i1`).
pub fn from_npy(data: &[u8], e: Expect) -> ApiResult<Vectors> {
    let (descr, shape, start) = npy_header(data)?;
    let dtype = dtype_named(&descr).ok_or_else(|| {
        ApiError::invalid(format!(
            ".npy dtype {descr:?}: send float32 ('<f4'), uint8 or int8 little-endian"
        ))
    })?;
    from_le(&data[start..], dtype, &shape, e)
}

/// A `.npy` file (format 1.0, C order) of `descr` (`<f4`, `|u1`, `|i1`), `shape` as numpy
/// writes it (`(n, d)`, `(d,)`) and `payload` (the little-endian values): what the service
/// takes as a binary body (its clients and tests write them with this).
pub fn encode_npy(descr: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // The header ends with a newline at a multiple of 64 bytes, as numpy pads it.
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// `(descr, shape, data offset)` of a `.npy` file.
fn npy_header(data: &[u8]) -> ApiResult<(String, Vec<usize>, usize)> {
    let bad = |m: &str| ApiError::invalid(format!("not a .npy array: {m}"));
    if data.len() < 10 || &data[..6] != b"\x93NUMPY" {
        return Err(bad("the magic \\x93NUMPY is missing"));
    }
    let (len, start): (usize, usize) = match data[6] {
        1 => (u16::from_le_bytes([data[8], data[9]]) as usize, 10),
        2 | 3 if data.len() >= 12 => (
            u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("format version {v}"))),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= data.len())
        .ok_or_else(|| bad("the header is cut short"))?;
    let header =
        std::str::from_utf8(&data[start..end]).map_err(|_| bad("the header is not text"))?;
    let field = |key: &str| -> ApiResult<&str> {
        let at = header
            .find(&format!("'{key}':"))
            .ok_or_else(|| bad(&format!("the header has no '{key}'")))?;
        Ok(header[at + key.len() + 3..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| bad("'descr' is not a string"))?
        .to_string();
    if field("fortran_order")?.starts_with("True") {
        return Err(bad("Fortran order: send a C-contiguous array"));
    }
    let shape = field("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("'shape' is not a tuple"))?;
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad("'shape' holds a non-integer"))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    Ok((descr, shape, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
        encode_npy(descr, shape, payload)
    }

    #[test]
    fn npy_raw_and_json_give_the_same_vectors_and_bad_ones_are_named() {
        let e = Expect {
            dtype: DType::F32,
            dim: 2,
            max: 10,
        };
        let payload: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let a = from_npy(&npy("<f4", "(2, 2)", &payload), e).unwrap();
        let j: Value = serde_json::from_str("[[1, 2], [3, 4.0]]").unwrap();
        let b = from_json(&j, "vectors", e).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-trawl-dtype", "float32".parse().unwrap());
        h.insert("x-trawl-shape", "2,2".parse().unwrap());
        let c = from_raw(&payload, &h, e).unwrap();
        for v in [&a, &b, &c] {
            match &v.matrix {
                AnyMatrix::F32(m) => assert_eq!(m.as_slice(), &[1.0, 2.0, 3.0, 4.0]),
                _ => panic!("not f32"),
            }
            assert!(!v.single);
        }
        let one = from_npy(&npy("<f4", "(2,)", &payload[..8]), e).unwrap();
        assert!(one.single);
        let err = |r: ApiResult<Vectors>| r.unwrap_err().message;
        assert!(err(from_npy(&npy("<f8", "(1, 2)", &[0; 16]), e)).contains("<f8"));
        assert!(err(from_npy(&npy("<f4", "(2, 3)", &[0; 24]), e)).contains("dimension 3"));
        assert!(err(from_npy(&npy("<f4", "(2, 2)", &[0; 15]), e)).contains("15 bytes"));
        assert!(err(from_npy(b"\x93NUMPY\x01\x00\xff\xff{", e)).contains("cut short"));
        assert!(err(from_npy(b"hello", e)).contains("magic"));
        let j: Value = serde_json::from_str("[[1, 2], [3, \"x\"]]").unwrap();
        assert!(err(from_json(&j, "vectors", e)).contains("element 1"));
        let j: Value = serde_json::from_str("[[1, 2], [3]]").unwrap();
        assert!(err(from_json(&j, "vectors", e)).contains("vector 1 has dimension 1"));
        let j: Value = serde_json::from_str("[[1e300, 2]]").unwrap();
        assert!(err(from_json(&j, "vectors", e)).contains("32-bit"));
        let u = Expect {
            dtype: DType::U8,
            ..e
        };
        let j: Value = serde_json::from_str("[[1, 256]]").unwrap();
        assert!(err(from_json(&j, "vectors", u)).contains("from 0 to 255"));
        let many: Value = serde_json::from_str(&format!("[{}]", ["[1,2]"; 11].join(","))).unwrap();
        assert_eq!(from_json(&many, "vectors", e).unwrap_err().status, 413);
    }
}
