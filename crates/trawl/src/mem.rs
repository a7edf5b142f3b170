//! Memory placement helpers for the large, randomly accessed arrays of a build.
//!
//! A Vamana build reads vectors and neighbour lists at random over tens to hundreds of MiB:
//! with 4 KiB pages nearly every access also misses the TLB and pays a page walk. Asking the
//! kernel for transparent huge pages (2 MiB) on those arrays removes most of the walks. Where
//! the system's THP mode is `madvise` (a common default) nothing happens without the request;
//! with `never` the request is a no-op. Only the placement changes, never the contents.

/// Size of a transparent huge page on x86-64 and most aarch64 kernels.
#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the capacity of `buf` with transparent huge pages. Best effort:
/// failure (or a non-Linux system) changes nothing. Call it before the memory is first
/// written, so the first touch already faults in huge pages.
pub fn advise_huge_pages<T>(buf: &mut Vec<T>) {
    let bytes = buf.capacity() * std::mem::size_of::<T>();
    advise_range(buf.as_mut_ptr().cast::<u8>(), bytes);
}

/// A vector of `len` copies of `T::default()`-like zero bits, placed on huge pages where the
/// system allows it.
pub fn zeroed_huge<T: bytemuck::Zeroable + Clone>(len: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    advise_huge_pages(&mut v);
    v.resize(len, T::zeroed());
    v
}

/// Drops the whole pages inside `part`, which must lie in a read-only file mapping, from this
/// process's resident set (`MADV_DONTNEED`). Contents do not change: the next read faults the
/// page in again from the file. Best effort; a no-op off Linux (and under Miri, which cannot
/// run `madvise`).
pub(crate) fn release_mapped<T>(part: &[T]) {
    #[cfg(all(target_os = "linux", not(miri)))]
    if let Some((start, end)) =
        aligned_inside(part.as_ptr() as usize, std::mem::size_of_val(part), PAGE)
    {
        // SAFETY: `[start, end)` is inside `part`, which the caller guarantees is part of a
        // read-only shared file mapping: MADV_DONTNEED only unmaps the pages, and a later
        // access maps the unchanged file contents again, so every live reference still
        // reads the same values.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = part;
}

/// A base page.
#[cfg(all(target_os = "linux", not(miri)))]
const PAGE: usize = 4096;

#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
/// The largest `[start, end)` with both ends multiples of `align` (a power of two) inside the
/// `bytes` bytes at address `begin`; `None` when it is empty (or the range wraps).
fn aligned_inside(begin: usize, bytes: usize, align: usize) -> Option<(usize, usize)> {
    let start = begin.checked_next_multiple_of(align)?;
    let end = begin.checked_add(bytes)? / align * align;
    (end > start).then_some((start, end))
}

#[cfg(all(target_os = "linux", not(miri)))]
fn advise_range(ptr: *mut u8, bytes: usize) {
    if let Some((start, end)) = aligned_inside(ptr as usize, bytes, HUGE_PAGE) {
        // SAFETY: `[start, end)` lies inside one live allocation owned by the caller; madvise
        // with MADV_HUGEPAGE only changes how the kernel backs those pages, never their
        // contents, and an error is ignored (the hint is best effort).
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// Off Linux, and under Miri (which cannot run `madvise`), the hint is skipped.
#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise_range(_ptr: *mut u8, _bytes: usize) {}

/// Asks the CPU to start loading the cache lines `bytes` spans (512 bytes' worth at most)
/// into L1 — every line it touches, the last one too when it starts mid-line (a 48-byte PQ
/// code crosses a line boundary half the time). A hint only: no effect on other
/// architectures, never faults.
#[inline]
pub fn prefetch_read(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if bytes.is_empty() {
            return;
        }
        let (back, span) = line_span(bytes.as_ptr() as usize, bytes.len().min(512));
        // The start of `bytes`' first line, derived from its pointer (never dereferenced).
        let base = bytes.as_ptr().cast::<i8>().wrapping_sub(back);
        let mut off = 0;
        while off <= span {
            // SAFETY: prefetch never faults; `base + off` is a line `bytes` overlaps.
            unsafe { _mm_prefetch(base.wrapping_add(off), _MM_HINT_T0) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// For `len ≥ 1` bytes at address `start`: how far back its first 64-byte line starts, and the
/// offset of its last line from its first (0 when it lies in one line).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline]
fn line_span(start: usize, len: usize) -> (usize, usize) {
    (start & 63, ((start + len - 1) & !63) - (start & !63))
}

/// The process's peak resident set (`VmHWM`), 0 where unknown.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_covers_every_line_touched() {
        // A 48-byte code at offset 0 or 16 of a line stays in it; at 32 or 48 it crosses.
        assert_eq!(line_span(1024, 48), (0, 0));
        assert_eq!(line_span(1024 + 16, 48), (16, 0));
        assert_eq!(line_span(1024 + 32, 48), (32, 64));
        assert_eq!(line_span(1024 + 48, 48), (48, 64));
        assert_eq!(line_span(1024 + 63, 130), (63, 192));
        assert_eq!(line_span(1024, 1), (0, 0));
        prefetch_read(&[]);
        prefetch_read(&[1u8; 700]);
    }

    /// Elements of the zeroed vector: past one huge page natively; small under Miri, which
    /// interprets every write.
    const ZEROED_LEN: usize = if cfg!(miri) { 4096 } else { 5_000_000 };

    #[test]
    fn helpers_keep_contents() {
        let z: Vec<f32> = zeroed_huge(ZEROED_LEN);
        assert_eq!(z.len(), ZEROED_LEN);
        assert!(z.iter().all(|&x| x == 0.0));
        let mut e: Vec<u8> = Vec::new();
        advise_huge_pages(&mut e);
        assert!(e.is_empty());
        let mut v: Vec<u32> = Vec::with_capacity(1000);
        advise_huge_pages(&mut v);
        v.extend(0..1000);
        assert!(v.iter().copied().eq(0..1000));
    }

    #[test]
    fn aligned_inside_keeps_whole_pages_only() {
        let huge = HUGE_PAGE;
        assert_eq!(aligned_inside(0, 3 * huge, huge), Some((0, 3 * huge)));
        assert_eq!(aligned_inside(1, 3 * huge, huge), Some((huge, 3 * huge)));
        assert_eq!(aligned_inside(1, 2 * huge, huge), Some((huge, 2 * huge)));
        assert_eq!(aligned_inside(1, 2 * huge - 2, huge), None);
        assert_eq!(aligned_inside(4096, 0, 4096), None);
        assert_eq!(aligned_inside(usize::MAX - 10, 100, 4096), None);
        assert_eq!(aligned_inside(usize::MAX - 5000, 5000, 4096), None);
        assert_eq!(aligned_inside(4095, 4098, 4096), Some((4096, 8192)));
    }
}
