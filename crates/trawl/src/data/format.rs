//! The vector file formats and format detection ([`probe`]).
//!
//! **bin** (`.fbin`, `.u8bin`, `.i8bin`, `.bin`; big-ann-benchmarks and DiskANN):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | `n`, rows (u32 LE; DiskANN writes int32, identical for valid values) |
//! | 4 | 4 | `d`, dimension (u32 LE, `1..2³¹`) |
//! | 8 | n·d·size | row-major elements, little-endian |
//!
//! **vecs** (`.fvecs` f32, `.bvecs` u8, `.ivecs` i32 ids; texmex; trawl also names i8 rows
//! `.i8vecs`), repeated per row:
//!
//! | offset in row | size | field |
//! |---:|---:|---|
//! | 0 | 4 | `d` (i32 LE, the same in every row) |
//! | 4 | d·size | the row's elements |
//!
//! **npy**: see [`crate::data::npy`].
//!
//! Detection: a file starting with the npy magic is npy. Otherwise the format comes from the
//! caller, else from the extension, else from the content: the bin layout fits when the size is
//! exactly `8 + n·d·size`; the vecs layout when the size is a multiple of `4 + d·size` and the
//! second row's header repeats `d`. The element type comes from the caller, else the extension,
//! else the row size (4-byte elements are f32; 1-byte elements need a hint to tell u8 from i8).
//! A file that fits several layouts, or none, is an [`DataErrorKind::Unrecognised`] error asking
//! for an explicit format.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::kernels::DType;

use crate::data::error::{DataError, DataErrorKind, Result};
use crate::data::npy;

/// A vector file layout. The element type is carried separately (see [`VectorFileInfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// big-ann / DiskANN `.fbin` `.u8bin` `.i8bin`: an 8-byte `(n, d)` header, then the rows.
    Bin,
    /// texmex `.fvecs` / `.bvecs`: every row is prefixed by its dimension.
    Vecs,
    /// NumPy `.npy`, a 2-D C-order array.
    Npy,
}

impl Format {
    /// Short name: `bin`, `vecs`, `npy`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Bin => "bin",
            Format::Vecs => "vecs",
            Format::Npy => "npy",
        }
    }

    /// The format and, when the extension implies one, the element type of `path`.
    pub fn from_path(path: &Path) -> Option<(Format, Option<DType>)> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "fbin" => (Format::Bin, Some(DType::F32)),
            "u8bin" => (Format::Bin, Some(DType::U8)),
            "i8bin" => (Format::Bin, Some(DType::I8)),
            "bin" => (Format::Bin, None),
            "fvecs" => (Format::Vecs, Some(DType::F32)),
            "bvecs" => (Format::Vecs, Some(DType::U8)),
            "i8vecs" => (Format::Vecs, Some(DType::I8)),
            "npy" => (Format::Npy, None),
            _ => return None,
        })
    }

    /// The conventional file extension for this format and element type.
    pub const fn extension(self, dtype: DType) -> &'static str {
        match (self, dtype) {
            (Format::Bin, DType::F32) => "fbin",
            (Format::Bin, DType::U8) => "u8bin",
            (Format::Bin, DType::I8) => "i8bin",
            (Format::Vecs, DType::F32) => "fvecs",
            (Format::Vecs, DType::U8) => "bvecs",
            (Format::Vecs, DType::I8) => "i8vecs",
            (Format::Npy, _) => "npy",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "bin" | "fbin" | "u8bin" | "i8bin" => Ok(Format::Bin),
            "vecs" | "fvecs" | "bvecs" | "i8vecs" => Ok(Format::Vecs),
            "npy" => Ok(Format::Npy),
            other => Err(format!(
                "unknown vector format `{other}` (expected bin, vecs or npy)"
            )),
        }
    }
}

/// What [`probe`] found out about a vector file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorFileInfo {
    /// The file.
    pub path: PathBuf,
    /// Its layout.
    pub format: Format,
    /// Its element type.
    pub dtype: DType,
    /// Number of vectors.
    pub n: u64,
    /// Elements per vector.
    pub dim: u64,
    /// Byte offset of the first row (for vecs, of the first row's dimension header).
    pub data_offset: u64,
}

impl VectorFileInfo {
    /// Bytes each row occupies in the file (for vecs, including its 4-byte header).
    pub fn row_stride(&self) -> u64 {
        let payload = self.dim * self.dtype.size_bytes() as u64;
        match self.format {
            Format::Vecs => payload + 4,
            Format::Bin | Format::Npy => payload,
        }
    }

    /// Whether the rows are one contiguous block (bin, npy), so the file can be memory-mapped.
    pub fn is_contiguous(&self) -> bool {
        self.format != Format::Vecs
    }

    /// Byte offset of row `i`.
    pub fn row_offset(&self, i: u64) -> u64 {
        self.data_offset + i * self.row_stride()
    }
}

/// How [`probe_with`] should interpret a file whose content cannot say everything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Force this layout (overrides the extension; an npy magic still wins when `None`).
    pub format: Option<Format>,
    /// Force this element type (overrides the extension).
    pub dtype: Option<DType>,
    /// The element type to pick when neither the caller, the extension nor the content tells
    /// (e.g. u8 vs i8 in a `.bin` file). Typed readers pass their own type here.
    pub fallback_dtype: Option<DType>,
}

/// Probes `path` by content and extension (see the module docs).
pub fn probe(path: &Path) -> Result<VectorFileInfo> {
    probe_with(path, ProbeOptions::default())
}

/// Probes `path` with explicit hints for what the content cannot tell.
pub fn probe_with(path: &Path, opts: ProbeOptions) -> Result<VectorFileInfo> {
    let fail = |kind| DataError::new(path, kind);
    let file = File::open(path).map_err(|e| DataError::io(path, e))?;
    let size = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    if size == 0 {
        return Err(fail(DataErrorKind::Empty));
    }
    let mut head = [0u8; 16];
    let got = read_prefix(&file, &mut head).map_err(|e| DataError::io(path, e))?;
    let head = &head[..got];
    let ext = Format::from_path(path);
    let is_npy = head.starts_with(npy::MAGIC);
    let format = opts
        .format
        .or(is_npy.then_some(Format::Npy))
        .or(ext.map(|e| e.0));
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ivecs"))
        && opts.format.is_none()
    {
        return Err(fail(DataErrorKind::UnsupportedDtype(
            "i32 (.ivecs holds integer ids: read it as ground truth / ids)".into(),
        )));
    }
    if format == Some(Format::Npy) {
        return probe_npy(&file, size, path);
    }
    let dtypes: Vec<DType> = match opts.dtype.or(ext.and_then(|e| e.1)) {
        Some(d) => vec![d],
        None => vec![DType::F32, DType::U8, DType::I8],
    };
    let formats: Vec<Format> = match format {
        Some(f) => vec![f],
        None => vec![Format::Bin, Format::Vecs],
    };
    let layout = |f: Format, d: DType, scan: bool| match f {
        Format::Bin => probe_bin(head, size, d),
        Format::Vecs => probe_vecs(&file, head, size, d, scan),
        Format::Npy => unreachable!("npy handled above"),
    };
    if let ([f], [d]) = (&formats[..], &dtypes[..]) {
        return layout(*f, *d, true).map(|i| i.at(path)).map_err(fail);
    }
    let mut fits: Vec<Layout> = Vec::new();
    for &f in &formats {
        for &d in &dtypes {
            if let Ok(l) = layout(f, d, false) {
                fits.push(l);
            }
        }
    }
    if let Some(fb) = opts.fallback_dtype.filter(|_| fits.len() > 1) {
        if fits.iter().any(|l| l.dtype == fb) {
            fits.retain(|l| l.dtype == fb);
        }
    }
    match &fits[..] {
        [one] => Ok(one.clone().at(path)),
        [] if formats.len() == 1 => {
            let d = opts.fallback_dtype.unwrap_or(DType::F32);
            layout(formats[0], d, true)
                .map(|i| i.at(path))
                .map_err(fail)
        }
        many => Err(fail(unrecognised(size, many))),
    }
}

/// The error for a file that fits no layout, or several.
fn unrecognised(size: u64, fits: &[Layout]) -> DataErrorKind {
    if fits.is_empty() {
        return DataErrorKind::Unrecognised(format!(
            "{size} bytes fit neither the bin layout (8-byte header n, d) nor the vecs layout \
             (per-row dimension); name the format explicitly"
        ));
    }
    let names: Vec<String> = fits
        .iter()
        .map(|l| format!("{} {} ({}×{})", l.format, l.dtype, l.n, l.dim))
        .collect();
    DataErrorKind::Unrecognised(format!(
        "ambiguous: the content fits {}; name the format and element type explicitly",
        names.join(" or ")
    ))
}

/// A probed layout, before the path is attached.
#[derive(Debug, Clone)]
struct Layout {
    format: Format,
    dtype: DType,
    n: u64,
    dim: u64,
    data_offset: u64,
}

impl Layout {
    fn at(self, path: &Path) -> VectorFileInfo {
        VectorFileInfo {
            path: path.to_path_buf(),
            format: self.format,
            dtype: self.dtype,
            n: self.n,
            dim: self.dim,
            data_offset: self.data_offset,
        }
    }
}

fn read_prefix(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    let mut f = file;
    while got < buf.len() {
        match f.read(&mut buf[got..])? {
            0 => break,
            k => got += k,
        }
    }
    Ok(got)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Compares the file size with the size a header implies.
fn check_size(expected: u64, actual: u64) -> std::result::Result<(), DataErrorKind> {
    if actual < expected {
        Err(DataErrorKind::Truncated { expected, actual })
    } else if actual > expected {
        Err(DataErrorKind::SizeMismatch { expected, actual })
    } else {
        Ok(())
    }
}

fn probe_bin(head: &[u8], size: u64, dtype: DType) -> std::result::Result<Layout, DataErrorKind> {
    if head.len() < 8 {
        return Err(DataErrorKind::Truncated {
            expected: 8,
            actual: size,
        });
    }
    let (n, dim) = (le_u32(head, 0) as u64, le_u32(head, 4) as u64);
    if dim == 0 || dim > i32::MAX as u64 {
        return Err(DataErrorKind::BadHeader(format!(
            "dimension {} (as int32) is not positive",
            dim as u32 as i32
        )));
    }
    let expected = n
        .checked_mul(dim)
        .and_then(|x| x.checked_mul(dtype.size_bytes() as u64))
        .and_then(|x| x.checked_add(8))
        .ok_or_else(|| DataErrorKind::BadHeader(format!("{n} × {dim} elements overflow")))?;
    check_size(expected, size)?;
    if n == 0 {
        return Err(DataErrorKind::Empty);
    }
    Ok(Layout {
        format: Format::Bin,
        dtype,
        n,
        dim,
        data_offset: 8,
    })
}

fn probe_vecs(
    file: &File,
    head: &[u8],
    size: u64,
    dtype: DType,
    scan: bool,
) -> std::result::Result<Layout, DataErrorKind> {
    if head.len() < 4 {
        return Err(DataErrorKind::Truncated {
            expected: 4,
            actual: size,
        });
    }
    let d = le_u32(head, 0) as i32;
    if d <= 0 {
        return Err(DataErrorKind::BadHeader(format!(
            "row 0 has dimension {d}, which is not positive"
        )));
    }
    let stride = 4 + d as u64 * dtype.size_bytes() as u64;
    if !size.is_multiple_of(stride) {
        if scan {
            if let Some((row, found)) = scan_vecs_dims(file, size, d, stride)? {
                return Err(DataErrorKind::InconsistentDim {
                    row,
                    expected: d as u64,
                    found: found as i64,
                });
            }
        }
        return Err(DataErrorKind::Truncated {
            expected: size.div_ceil(stride) * stride,
            actual: size,
        });
    }
    if size >= 2 * stride {
        let mut b = [0u8; 4];
        file.read_exact_at(&mut b, stride)?;
        let second = i32::from_le_bytes(b);
        if second != d {
            return Err(DataErrorKind::InconsistentDim {
                row: 1,
                expected: d as u64,
                found: second as i64,
            });
        }
    }
    Ok(Layout {
        format: Format::Vecs,
        dtype,
        n: size / stride,
        dim: d as u64,
        data_offset: 0,
    })
}

/// The first row whose dimension header differs from `d` (an error path: reads every header).
fn scan_vecs_dims(
    file: &File,
    size: u64,
    d: i32,
    stride: u64,
) -> std::io::Result<Option<(u64, i32)>> {
    use std::io::{BufReader, Seek, SeekFrom};
    // Buffered: rows of a few bytes would otherwise cost one system call each.
    let mut r = BufReader::with_capacity(1 << 16, file);
    r.seek(SeekFrom::Start(stride))?;
    let skip = i64::try_from(stride - 4).unwrap_or(i64::MAX);
    let mut off = stride;
    let mut row = 1;
    let mut b = [0u8; 4];
    while off.checked_add(4).is_some_and(|end| end <= size) {
        r.read_exact(&mut b)?;
        let found = i32::from_le_bytes(b);
        if found != d {
            return Ok(Some((row, found)));
        }
        r.seek_relative(skip)?;
        off = off.saturating_add(stride);
        row += 1;
    }
    Ok(None)
}

fn probe_npy(file: &File, size: u64, path: &Path) -> Result<VectorFileInfo> {
    let fail = |kind| DataError::new(path, kind);
    let mut head = [0u8; 12];
    let got = size.min(12) as usize;
    if got < 10 {
        return Err(fail(DataErrorKind::Truncated {
            expected: 10,
            actual: size,
        }));
    }
    file.read_exact_at(&mut head[..got], 0)
        .map_err(|e| DataError::io(path, e))?;
    let (prefix, hlen) = npy::prefix_len(&head[..got]).map_err(fail)?;
    let data_offset = (prefix + hlen) as u64;
    if size < data_offset {
        return Err(fail(DataErrorKind::Truncated {
            expected: data_offset,
            actual: size,
        }));
    }
    let mut dict = vec![0u8; hlen];
    file.read_exact_at(&mut dict, prefix as u64)
        .map_err(|e| DataError::io(path, e))?;
    let text = std::str::from_utf8(&dict)
        .map_err(|_| fail(DataErrorKind::BadHeader("npy header is not text".into())))?;
    let h = npy::parse_dict(text, data_offset).map_err(fail)?;
    if h.dim == 0 {
        return Err(fail(DataErrorKind::BadHeader("dimension 0".into())));
    }
    let expected =
        h.n.checked_mul(h.dim)
            .and_then(|x| x.checked_mul(h.dtype.size_bytes() as u64))
            .and_then(|x| x.checked_add(data_offset))
            .ok_or_else(|| {
                fail(DataErrorKind::BadHeader(format!(
                    "{} × {} elements overflow",
                    h.n, h.dim
                )))
            })?;
    check_size(expected, size).map_err(fail)?;
    if h.n == 0 {
        return Err(fail(DataErrorKind::Empty));
    }
    Ok(VectorFileInfo {
        path: path.to_path_buf(),
        format: Format::Npy,
        dtype: h.dtype,
        n: h.n,
        dim: h.dim,
        data_offset,
    })
}
