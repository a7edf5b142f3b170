//! Page-aligned heap buffers for O_DIRECT reads.

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::io::{IoError, PAGE_BYTES};

/// A zeroed heap buffer whose address and length are multiples of [`PAGE_BYTES`], as O_DIRECT
/// reads require. The memory is freed when the buffer is dropped.
pub struct AlignedBuf {
    /// Start of the allocation (a dangling, page-aligned pointer when `len == 0`).
    ptr: NonNull<u8>,
    /// Length in bytes, a multiple of [`PAGE_BYTES`].
    len: usize,
}

// SAFETY: `AlignedBuf` owns its allocation exclusively (like a `Box<[u8]>`); nothing else
// refers to it, so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]` (reads); mutation needs `&mut self`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes; `len` must be a multiple of [`PAGE_BYTES`] (it may be 0).
    ///
    /// Fails with [`IoError::BadConfig`] when `len` is not a whole number of pages or the
    /// memory cannot be allocated.
    pub fn new(len: usize) -> Result<Self, IoError> {
        if !len.is_multiple_of(PAGE_BYTES) {
            return Err(IoError::BadConfig(format!(
                "buffer length {len} is not a multiple of {PAGE_BYTES} bytes"
            )));
        }
        if len == 0 {
            let ptr = NonNull::new(std::ptr::without_provenance_mut::<u8>(PAGE_BYTES))
                .unwrap_or(NonNull::dangling());
            return Ok(Self { ptr, len });
        }
        let layout = Self::layout(len)?;
        // SAFETY: `layout` has a non-zero size (`len > 0`) and a valid power-of-two alignment.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            IoError::BadConfig(format!("cannot allocate an I/O buffer of {len} bytes"))
        })?;
        Ok(Self { ptr, len })
    }

    /// A zeroed buffer of `pages` pages.
    pub fn with_pages(pages: usize) -> Result<Self, IoError> {
        let len = pages
            .checked_mul(PAGE_BYTES)
            .ok_or_else(|| IoError::BadConfig(format!("a buffer of {pages} pages is too large")))?;
        Self::new(len)
    }

    fn layout(len: usize) -> Result<Layout, IoError> {
        Layout::from_size_align(len, PAGE_BYTES)
            .map_err(|e| IoError::BadConfig(format!("buffer of {len} bytes: {e}")))
    }

    /// Length in bytes (a multiple of [`PAGE_BYTES`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Length in pages.
    pub fn pages(&self) -> usize {
        self.len / PAGE_BYTES
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for reads of `len` initialised (zeroed at allocation) bytes for
        // as long as `self` lives (or dangling and aligned with `len == 0`), and `&self`
        // excludes any mutable access through the buffer for the returned lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only access to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Start of the buffer (page-aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Start of the buffer (page-aligned), for writes (e.g. by the kernel). Creates no
    /// reference to the bytes.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // `new` built this same layout successfully, so it cannot fail here.
        if let Ok(layout) = Self::layout(self.len) {
            // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly this layout and has
            // not been freed (this is the only place that frees it).
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}
