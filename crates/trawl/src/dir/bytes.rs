//! Little-endian payload encoding with bounds-checked decoding.

/// Appends little-endian values to a byte vector.
#[derive(Debug, Default)]
pub struct ByteWriter {
    buf: Vec<u8>,
}

impl ByteWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends an `f32`.
    pub fn f32(&mut self, v: f32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// Appends a slice of `f32` values.
    pub fn f32s(&mut self, v: &[f32]) {
        self.buf.reserve(v.len() * 4);
        for x in v {
            self.f32(*x);
        }
    }
    /// Appends a slice of `u32` values.
    pub fn u32s(&mut self, v: &[u32]) {
        self.buf.reserve(v.len() * 4);
        for x in v {
            self.u32(*x);
        }
    }
    /// The bytes written.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }
}

/// Error from [`ByteReader`]: the payload ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("payload ends at byte {len}, needed {needed} more bytes at offset {offset}")]
pub struct ShortPayload {
    /// Read position.
    pub offset: usize,
    /// Bytes requested.
    pub needed: usize,
    /// Payload length.
    pub len: usize,
}

/// Reads little-endian values from a byte slice, refusing to read past its end.
#[derive(Debug)]
pub struct ByteReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], ShortPayload> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(ShortPayload {
                offset: self.pos,
                needed: n,
                len: self.buf.len(),
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// Reads a `u8`.
    pub fn u8(&mut self) -> Result<u8, ShortPayload> {
        Ok(self.bytes(1)?[0])
    }
    /// Reads a `u32`.
    pub fn u32(&mut self) -> Result<u32, ShortPayload> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Reads a `u64`.
    pub fn u64(&mut self) -> Result<u64, ShortPayload> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Reads an `f32`.
    pub fn f32(&mut self) -> Result<f32, ShortPayload> {
        Ok(f32::from_bits(self.u32()?))
    }
    /// Reads `n` `f32` values.
    /// Large arrays are placed on huge pages (see [`crate::mem::advise_huge_pages`]).
    pub fn f32s(&mut self, n: usize) -> Result<Vec<f32>, ShortPayload> {
        let b = self.bytes(n.saturating_mul(4))?;
        let mut v = Vec::with_capacity(n);
        crate::mem::advise_huge_pages(&mut v);
        v.extend(
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        Ok(v)
    }
    /// Reads `n` `u32` values.
    /// Large arrays are placed on huge pages (see [`crate::mem::advise_huge_pages`]).
    pub fn u32s(&mut self, n: usize) -> Result<Vec<u32>, ShortPayload> {
        let b = self.bytes(n.saturating_mul(4))?;
        let mut v = Vec::with_capacity(n);
        crate::mem::advise_huge_pages(&mut v);
        v.extend(
            b.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
        Ok(v)
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}
