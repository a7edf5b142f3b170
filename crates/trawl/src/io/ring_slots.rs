//! The slot bookkeeping of [`crate::io::UringEngine`], kept apart from the ring: which slot is free,
//! in the ring, completed or held, and the one page-aligned block of slot buffers the kernel
//! reads into. Nothing here makes a system call, so its tests run under Miri, which checks every
//! pointer this module hands to the kernel or reads through.

use std::collections::VecDeque;
use std::mem::ManuallyDrop;

use crate::io::{AlignedBuf, Completion, EngineCounters, IoError, Slot, PAGE_BYTES};

/// Where a slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Free for a submission.
    Free,
    /// Pushed into the ring: the kernel may be writing the buffer.
    InRing {
        tag: u64,
        first_page: u64,
        pages: u32,
    },
    /// Completed (the kernel is done with the buffer), waiting in the ready queue with the
    /// read's result (bytes read, or a negated errno).
    Ready {
        tag: u64,
        first_page: u64,
        pages: u32,
        res: i32,
    },
    /// Completion returned by [`RingSlots::deliver`]; the caller reads the bytes until
    /// [`RingSlots::release`].
    Held { pages: u32 },
}

/// The slots of an io_uring engine and their buffers.
///
/// Slot `i` owns bytes `i × slot_bytes .. (i + 1) × slot_bytes` of one page-aligned
/// allocation. The kernel writes a slot only while it is [`State::InRing`]; the caller reads it
/// only while it is held. Dropping the table frees the buffers only when no read is in the ring
/// (the kernel may still write into them otherwise, so they are leaked).
pub(super) struct RingSlots {
    bufs: ManuallyDrop<AlignedBuf>,
    slot_bytes: usize,
    state: Vec<State>,
    /// Free slots; the next submission takes the last one.
    free: Vec<u32>,
    /// Reads pushed into the ring whose completion has not been recorded.
    in_ring: usize,
    /// Completed slots not yet delivered, in completion order.
    ready: VecDeque<u32>,
}

impl RingSlots {
    /// `depth` free slots of `slot_bytes` bytes each (a multiple of [`PAGE_BYTES`]), zeroed.
    pub fn new(depth: usize, slot_bytes: usize) -> Result<Self, IoError> {
        let too_large = || IoError::BadConfig(format!("{depth} slots of {slot_bytes} bytes"));
        if !slot_bytes.is_multiple_of(PAGE_BYTES) {
            return Err(too_large());
        }
        let total = depth.checked_mul(slot_bytes).ok_or_else(too_large)?;
        let count = u32::try_from(depth).map_err(|_| too_large())?;
        Ok(Self {
            bufs: ManuallyDrop::new(AlignedBuf::new(total)?),
            slot_bytes,
            state: vec![State::Free; depth],
            // Popped from the back: slot 0 is handed out first.
            free: (0..count).rev().collect(),
            in_ring: 0,
            ready: VecDeque::with_capacity(depth),
        })
    }

    /// Number of slots.
    pub fn depth(&self) -> usize {
        self.state.len()
    }

    /// The free slots; the next submission must use the last one.
    pub fn free(&self) -> &[u32] {
        &self.free
    }

    /// Reads pushed into the ring whose completion has not been recorded.
    pub fn in_ring(&self) -> usize {
        self.in_ring
    }

    /// Recorded completions not yet delivered.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Start of the buffer of slot `slot` (`< depth`), for the kernel to write into. Creates no
    /// reference to the bytes, so it does not conflict with a held slot being read.
    pub fn slot_ptr(&mut self, slot: u32) -> *mut u8 {
        assert!((slot as usize) < self.depth(), "slot {slot} out of range");
        self.bufs
            .as_mut_ptr()
            .wrapping_add(slot as usize * self.slot_bytes)
    }

    /// One `iovec` per slot, in slot order, for registering the buffers with the ring.
    pub fn iovecs(&mut self) -> Vec<libc::iovec> {
        (0..self.depth() as u32)
            .map(|slot| libc::iovec {
                iov_base: self.slot_ptr(slot).cast(),
                iov_len: self.slot_bytes,
            })
            .collect()
    }

    /// Records that a read of `pages` pages starting at `first_page` into `slot` is in the
    /// ring. `slot` must be the last free slot (the one [`crate::io::file::check_request`]
    /// returned for [`RingSlots::free`]) and `pages × PAGE_BYTES` must fit in a slot.
    pub fn push(&mut self, slot: u32, tag: u64, first_page: u64, pages: u32) {
        assert_eq!(
            self.free.last(),
            Some(&slot),
            "slot {slot} is not the next free slot"
        );
        assert!(pages as usize * PAGE_BYTES <= self.slot_bytes);
        self.free.pop();
        self.state[slot as usize] = State::InRing {
            tag,
            first_page,
            pages,
        };
        self.in_ring += 1;
    }

    /// Records the completion of the read carrying `user_data` with result `res`. Returns
    /// `false`, changing nothing, when `user_data` names no slot in the ring (every read this
    /// engine pushes carries its slot; anything else is not ours).
    pub fn complete(&mut self, user_data: u64, res: i32) -> bool {
        let Some(i) = usize::try_from(user_data)
            .ok()
            .filter(|&i| i < self.state.len())
        else {
            return false;
        };
        let State::InRing {
            tag,
            first_page,
            pages,
        } = self.state[i]
        else {
            return false;
        };
        self.state[i] = State::Ready {
            tag,
            first_page,
            pages,
            res,
        };
        self.in_ring -= 1;
        self.ready.push_back(i as u32);
        true
    }

    /// Takes the first failed or short completion out of the ready queue, frees its slot and
    /// returns its error.
    pub fn take_failed(&mut self) -> Option<IoError> {
        let pos = self.ready.iter().position(|&slot| {
            matches!(self.state[slot as usize], State::Ready { pages, res, .. }
                if res < 0 || (res as usize) < pages as usize * PAGE_BYTES)
        })?;
        let slot = self.ready.remove(pos)?;
        let State::Ready {
            first_page,
            pages,
            res,
            ..
        } = self.state[slot as usize]
        else {
            unreachable!("the ready queue holds only ready slots");
        };
        self.state[slot as usize] = State::Free;
        self.free.push(slot);
        let offset = first_page * PAGE_BYTES as u64;
        Some(if res < 0 {
            IoError::Read {
                offset,
                source: std::io::Error::from_raw_os_error(-res),
            }
        } else {
            IoError::ShortRead {
                offset,
                expected: pages as usize * PAGE_BYTES,
                got: res as usize,
            }
        })
    }

    /// Appends every ready completion to `out` in completion order (their slots become held),
    /// counts them in `counters` and returns how many. Call [`RingSlots::take_failed`] first:
    /// this delivers failed reads too.
    pub fn deliver(&mut self, out: &mut Vec<Completion>, counters: &mut EngineCounters) -> usize {
        let n = self.ready.len();
        out.reserve(n);
        for slot in self.ready.drain(..) {
            let i = slot as usize;
            if let State::Ready { tag, pages, .. } = self.state[i] {
                self.state[i] = State::Held { pages };
                counters.bytes += u64::from(pages) * PAGE_BYTES as u64;
                counters.completions += 1;
                out.push(Completion {
                    tag,
                    slot: Slot(slot),
                });
            }
        }
        n
    }

    /// The bytes of a held slot; empty for a slot that is not held (in the ring, ready,
    /// released, or out of range).
    pub fn buffer(&self, slot: Slot) -> &[u8] {
        let i = slot.0 as usize;
        let Some(&State::Held { pages }) = self.state.get(i) else {
            return &[];
        };
        let start = self.bufs.as_ptr().wrapping_add(i * self.slot_bytes);
        // SAFETY: slot `i` lies inside `bufs` (`i < depth`, `pages × PAGE_BYTES ≤ slot_bytes`,
        // checked by `push`) and its bytes are initialised (zeroed at allocation, then written by
        // the finished read). Its completion has been recorded, so the kernel no longer writes
        // there, and no new read can target it before `release`, which needs `&mut self` and
        // so outlives this borrow. Reads in the ring write only other, disjoint slots, through
        // pointers that are not derived from this reference.
        unsafe { std::slice::from_raw_parts(start, pages as usize * PAGE_BYTES) }
    }

    /// Hands a held slot back; a slot that is not held is ignored (a slot in the ring in
    /// particular stays reserved for its read).
    pub fn release(&mut self, slot: Slot) {
        if let Some(s @ State::Held { .. }) = self.state.get_mut(slot.0 as usize) {
            *s = State::Free;
            self.free.push(slot.0);
        }
    }
}

impl Drop for RingSlots {
    fn drop(&mut self) {
        if self.in_ring > 0 {
            // The kernel may still write into the buffers: leak them rather than free memory
            // it may write (closing the ring cancels or finishes those reads).
            return;
        }
        // SAFETY: every read pushed into the ring has completed (`in_ring == 0`), so the kernel
        // holds no pending write into `bufs`; this is the only place `bufs` is dropped and it is
        // not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.bufs) };
    }
}

impl std::fmt::Debug for RingSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingSlots")
            .field("depth", &self.state.len())
            .field("slot_bytes", &self.slot_bytes)
            .field("free", &self.free.len())
            .field("in_ring", &self.in_ring)
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the "kernel" writes into page `p` of a read: the page number in every byte.
    fn fill(ptr: *mut u8, first_page: u64, pages: u32) {
        for p in 0..pages as usize {
            // SAFETY: the caller passes the start of a slot in the ring holding `pages` pages.
            unsafe {
                std::ptr::write_bytes(
                    ptr.wrapping_add(p * PAGE_BYTES),
                    first_page as u8 + p as u8,
                    PAGE_BYTES,
                )
            };
        }
    }

    fn check(buf: &[u8], first_page: u64, pages: u32) {
        assert_eq!(buf.len(), pages as usize * PAGE_BYTES);
        for (p, page) in buf.chunks(PAGE_BYTES).enumerate() {
            assert!(
                page.iter().all(|&b| b == first_page as u8 + p as u8),
                "page {p}"
            );
        }
    }

    /// A full life: push, the kernel writes, completion, delivery, reading, release; slots are
    /// handed out in order and come back; the buffers are freed at drop (Miri's leak check
    /// fails the run otherwise).
    #[test]
    fn slots_go_round() {
        let mut s = RingSlots::new(3, 2 * PAGE_BYTES).unwrap();
        assert_eq!(s.free(), &[2, 1, 0], "slot 0 is handed out first");
        let mut counters = EngineCounters::default();
        let mut out = Vec::new();
        let pages_of = |slot: u32| if slot == 0 { 1 } else { 2 };
        for round in 0..2u64 {
            for _ in 0..3 {
                let slot = *s.free().last().unwrap();
                let first = round * 10 + u64::from(slot);
                let ptr = s.slot_ptr(slot);
                s.push(slot, first + 100, first, pages_of(slot));
                fill(ptr, first, pages_of(slot));
            }
            assert_eq!((s.in_ring(), s.free().len()), (3, 0));
            // Completions arrive out of order; a slot is unreadable until delivered.
            for slot in [2u32, 0, 1] {
                let bytes = s.slot_bytes as i32;
                assert!(s.complete(u64::from(slot), bytes / 2 * pages_of(slot) as i32));
                assert!(s.buffer(Slot(slot)).is_empty());
            }
            assert!(s.take_failed().is_none());
            out.clear();
            assert_eq!(s.deliver(&mut out, &mut counters), 3);
            let order: Vec<u32> = out.iter().map(|c| c.slot.0).collect();
            assert_eq!(order, [2, 0, 1]);
            for c in &out {
                let first = c.tag - 100;
                check(s.buffer(c.slot), first, pages_of(c.slot.0));
            }
            for c in &out {
                s.release(c.slot);
                assert!(s.buffer(c.slot).is_empty());
            }
            s.release(Slot(1));
            assert_eq!(s.free().len(), 3, "a second release changes nothing");
        }
        assert_eq!(counters.completions, 6);
        assert_eq!(counters.bytes, 2 * 5 * PAGE_BYTES as u64);
    }

    /// The kernel writes a slot in the ring while the caller reads another, held one: the
    /// shared reference to the held slot stays valid and unchanged (the accesses touch
    /// disjoint bytes and the kernel's pointer does not derive from the reference).
    #[test]
    fn kernel_writes_beside_a_held_slot() {
        let mut s = RingSlots::new(2, PAGE_BYTES).unwrap();
        let p0 = s.slot_ptr(0);
        s.push(0, 7, 3, 1);
        fill(p0, 3, 1);
        assert!(s.complete(0, PAGE_BYTES as i32));
        let mut out = Vec::new();
        s.deliver(&mut out, &mut EngineCounters::default());
        let p1 = s.slot_ptr(1);
        s.push(1, 8, 9, 1);
        let held = s.buffer(Slot(0));
        fill(p1, 9, 1);
        check(held, 3, 1);
        assert!(s.buffer(Slot(1)).is_empty());
        assert!(s.complete(1, PAGE_BYTES as i32));
        out.clear();
        s.deliver(&mut out, &mut EngineCounters::default());
        check(s.buffer(Slot(1)), 9, 1);
        check(s.buffer(Slot(0)), 3, 1);
    }

    /// A failed and a short read are taken out of the ready queue with their offsets and free
    /// their slots; good completions queued around them stay for delivery.
    #[test]
    fn failed_and_short_reads_free_their_slots() {
        let mut s = RingSlots::new(4, 2 * PAGE_BYTES).unwrap();
        for (slot, first) in [(0u32, 5u64), (1, 6), (2, 7), (3, 8)] {
            s.push(slot, u64::from(slot), first, 2);
        }
        let full = 2 * PAGE_BYTES as i32;
        assert!(s.complete(0, full));
        assert!(s.complete(1, -libc::EIO));
        assert!(s.complete(2, full - 1));
        assert!(s.complete(3, full));
        match s.take_failed() {
            Some(IoError::Read { offset, source }) => {
                assert_eq!(offset, 6 * PAGE_BYTES as u64);
                assert_eq!(source.raw_os_error(), Some(libc::EIO));
            }
            other => panic!("{other:?}"),
        }
        match s.take_failed() {
            Some(IoError::ShortRead {
                offset,
                expected,
                got,
            }) => assert_eq!(
                (offset, expected, got),
                (7 * PAGE_BYTES as u64, 2 * PAGE_BYTES, 2 * PAGE_BYTES - 1)
            ),
            other => panic!("{other:?}"),
        }
        assert!(s.take_failed().is_none());
        assert_eq!(s.free(), &[1, 2]);
        let mut out = Vec::new();
        assert_eq!(s.deliver(&mut out, &mut EngineCounters::default()), 2);
        let tags: Vec<u64> = out.iter().map(|c| c.tag).collect();
        assert_eq!(tags, [0, 3]);
        assert_eq!(s.buffer(Slot(3)).len(), 2 * PAGE_BYTES);
    }

    /// Completions naming no slot in the ring (out of range, free, already completed, held)
    /// change nothing; neither do releases of slots that are not held.
    #[test]
    fn foreign_completions_and_releases_are_ignored() {
        let mut s = RingSlots::new(2, PAGE_BYTES).unwrap();
        assert!(!s.complete(0, 0), "free slot");
        assert!(!s.complete(2, 0), "out of range");
        assert!(!s.complete(u64::MAX, 0), "out of range");
        s.push(0, 1, 0, 1);
        s.release(Slot(0));
        assert_eq!(
            (s.in_ring(), s.free()),
            (1, &[1][..]),
            "in the ring stays reserved"
        );
        assert!(s.complete(0, PAGE_BYTES as i32));
        assert!(!s.complete(0, PAGE_BYTES as i32), "completed twice");
        assert_eq!((s.in_ring(), s.ready()), (0, 1));
        s.release(Slot(0));
        assert_eq!(s.free(), &[1], "ready is not held");
        let mut out = Vec::new();
        s.deliver(&mut out, &mut EngineCounters::default());
        assert!(!s.complete(0, PAGE_BYTES as i32), "held");
        assert!(s.buffer(Slot(5)).is_empty());
        s.release(Slot(5));
        s.release(Slot(0));
        assert_eq!(s.free(), &[1, 0]);
    }

    /// The registration `iovec`s tile the allocation: page-aligned, one slot each, writable
    /// end to end (Miri checks every byte is in bounds).
    #[test]
    fn iovecs_cover_disjoint_slots() {
        let mut s = RingSlots::new(3, 2 * PAGE_BYTES).unwrap();
        let iov = s.iovecs();
        assert_eq!(iov.len(), 3);
        let base = iov[0].iov_base as usize;
        assert_eq!(base % PAGE_BYTES, 0);
        for (i, v) in iov.iter().enumerate() {
            assert_eq!(v.iov_base as usize, base + i * 2 * PAGE_BYTES);
            assert_eq!(v.iov_len, 2 * PAGE_BYTES);
        }
        for (slot, v) in iov.iter().enumerate() {
            s.push(slot as u32, 0, slot as u64 * 2, 2);
            fill(v.iov_base.cast(), slot as u64 * 2, 2);
            assert!(s.complete(slot as u64, 2 * PAGE_BYTES as i32));
        }
        let mut out = Vec::new();
        s.deliver(&mut out, &mut EngineCounters::default());
        for slot in 0..3u32 {
            check(s.buffer(Slot(slot)), u64::from(slot) * 2, 2);
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(matches!(
            RingSlots::new(usize::MAX, PAGE_BYTES),
            Err(IoError::BadConfig(_))
        ));
        assert!(matches!(RingSlots::new(3, 100), Err(IoError::BadConfig(_))));
        assert!(matches!(
            RingSlots::new(4096, 100),
            Err(IoError::BadConfig(_))
        ));
        let empty = RingSlots::new(0, PAGE_BYTES).unwrap();
        assert_eq!((empty.depth(), empty.free().len()), (0, 0));
    }

    /// Pushing any slot but the next free one is a bug in the engine, not a silent reuse.
    #[test]
    #[should_panic(expected = "not the next free slot")]
    fn push_of_another_slot_panics() {
        let mut s = RingSlots::new(2, PAGE_BYTES).unwrap();
        s.push(1, 0, 0, 1);
    }
}
