//! The io_uring engine: one ring per engine, reads into one page-aligned block of slot buffers.

use std::os::fd::AsRawFd;
use std::thread::ThreadId;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use crate::io::file::check_request;
use crate::io::ring_slots::RingSlots;
use crate::io::{
    Completion, EngineConfig, EngineCounters, EngineInfo, IoEngine, IoError, IoFile, ReadRequest,
    Slot, TaskRun, PAGE_BYTES,
};

/// How long the SQPOLL kernel thread spins without work before it sleeps.
const SQPOLL_IDLE_MS: u32 = 50;

/// io_uring reads: one ring per engine (make one engine per thread), requests batched into
/// one `io_uring_enter` per [`IoEngine::wait`].
///
/// The slot buffers are one page-aligned allocation (`depth × max_pages_per_read` pages),
/// registered with the ring when `register_buffers` is set and the kernel accepts it (it
/// refuses above the memlock limit for processes without `CAP_IPC_LOCK`; the engine then uses
/// plain reads, see [`EngineInfo::registered_buffers`]). The file descriptor is registered too
/// when possible. Dropping the engine waits for every read still in flight.
pub struct UringEngine {
    ring: IoUring,
    /// Keeps the descriptor the SQEs name open.
    file: IoFile,
    /// The slots and their buffers, freed (after `Drop` has waited for every read in the
    /// ring) only when no read is left in the ring, leaked otherwise. Declared after `ring`,
    /// so the ring is closed first.
    slots: RingSlots,
    /// SQEs pushed since the last `io_uring_enter`.
    unsubmitted: bool,
    max_pages: usize,
    file_pages: u64,
    direct: bool,
    registered: bool,
    fixed_file: bool,
    sqpoll: bool,
    /// How completions are posted (after fallback).
    taskrun: TaskRun,
    /// The thread a [`TaskRun::Defer`] ring belongs to (`None` for the other modes).
    owner: Option<ThreadId>,
    /// The configuration, to rebuild the ring in another thread.
    cfg: EngineConfig,
    counters: EngineCounters,
}

/// The calling thread (cached per thread); `None` while the thread's locals are being
/// destroyed.
fn current_thread() -> Option<ThreadId> {
    thread_local!(static ID: ThreadId = std::thread::current().id());
    ID.try_with(|id| *id).ok()
}

/// A new ring with its registrations.
struct Ring {
    ring: IoUring,
    registered: bool,
    fixed_file: bool,
    taskrun: TaskRun,
}

impl Ring {
    /// A ring of `cfg.depth` (rounded up to a power of two) entries reading `file` into
    /// `slots` (none of which may be in a ring). The task-run mode falls back to
    /// [`TaskRun::Interrupt`] where the kernel refuses it (before 5.19 / 6.1, or with SQPOLL).
    fn open(cfg: &EngineConfig, file: &IoFile, slots: &mut RingSlots) -> Result<Self, IoError> {
        // `validate` bounds depth by MAX_DEPTH = 2^15, so this fits a u32 and the ring limit.
        let entries = cfg.depth.next_power_of_two() as u32;
        let build = |taskrun: TaskRun| {
            let mut builder = IoUring::builder();
            if cfg.sqpoll {
                builder.setup_sqpoll(SQPOLL_IDLE_MS);
            }
            match taskrun {
                TaskRun::Interrupt => {}
                TaskRun::Coop => {
                    builder.setup_coop_taskrun().setup_taskrun_flag();
                }
                TaskRun::Defer => {
                    builder
                        .setup_single_issuer()
                        .setup_defer_taskrun()
                        .setup_taskrun_flag();
                }
            }
            builder.build(entries)
        };
        let (ring, taskrun) = match build(cfg.taskrun) {
            Ok(ring) => (ring, cfg.taskrun),
            Err(_) if cfg.taskrun != TaskRun::Interrupt => (
                build(TaskRun::Interrupt).map_err(IoError::UringUnavailable)?,
                TaskRun::Interrupt,
            ),
            Err(e) => return Err(IoError::UringUnavailable(e)),
        };
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(IoError::UringUnavailable)?;
        if !probe.is_supported(opcode::Read::CODE) {
            return Err(IoError::UringUnavailable(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the kernel's io_uring lacks IORING_OP_READ",
            )));
        }
        let registered = cfg.register_buffers && cfg.depth <= usize::from(u16::MAX) + 1 && {
            let iovecs = slots.iovecs();
            // SAFETY: each iovec covers one slot inside the slot buffers, which stay allocated
            // while they are registered: the engine's `Drop` unregisters them (after every read
            // has completed) before `slots` frees them, a replaced ring is closed (which
            // unregisters them) while no read is in it, and the buffers are leaked if a read
            // may still be running.
            let res = unsafe { ring.submitter().register_buffers(&iovecs) };
            // ENOMEM/EPERM above the memlock limit, EINVAL past the kernel's buffer count:
            // plain reads work on the same memory.
            res.is_ok()
        };
        let fixed_file = ring.submitter().register_files(&file.raw_fds()).is_ok();
        Ok(Self {
            ring,
            registered,
            fixed_file,
            taskrun,
        })
    }
}

impl UringEngine {
    /// An engine reading `file` through a new ring of `cfg.depth` (rounded up to a power of
    /// two) entries.
    ///
    /// Errors: [`IoError::BadConfig`] on unusable parameters, [`IoError::UringUnavailable`]
    /// when the kernel refuses to create the ring (or, with `cfg.sqpoll`, its polling thread)
    /// or lacks the read operation.
    pub fn new(file: &IoFile, cfg: EngineConfig) -> Result<Self, IoError> {
        cfg.validate()?;
        let mut slots = RingSlots::new(cfg.depth, cfg.slot_bytes())?;
        let ring = Ring::open(&cfg, file, &mut slots)?;
        Ok(Self {
            owner: (ring.taskrun == TaskRun::Defer)
                .then(current_thread)
                .flatten(),
            ring: ring.ring,
            file: file.clone(),
            slots,
            unsubmitted: false,
            max_pages: cfg.max_pages_per_read,
            file_pages: file.pages(),
            direct: file.is_direct(),
            registered: ring.registered,
            fixed_file: ring.fixed_file,
            sqpoll: cfg.sqpoll,
            taskrun: ring.taskrun,
            cfg,
            counters: EngineCounters::default(),
        })
    }

    /// A [`TaskRun::Defer`] ring serves only the thread that made it: called before every
    /// submission and system call, this rebuilds the ring (and its registrations) in the calling thread when
    /// the engine has moved to another one with no read in the ring (searchers hand their
    /// engines back between queries, and a pool may pass them to any thread). An engine moved
    /// with reads in the ring cannot collect them: an error.
    fn follow_thread(&mut self) -> Result<(), IoError> {
        let Some(owner) = self.owner else {
            return Ok(());
        };
        let me = current_thread();
        if me == Some(owner) {
            return Ok(());
        }
        if self.slots.in_ring() > 0 {
            return Err(IoError::Read {
                offset: 0,
                source: std::io::Error::other(
                    "an io_uring engine in defer mode was moved to another thread with reads \
                     in flight",
                ),
            });
        }
        let Some(me) = me else {
            return Err(IoError::Read {
                offset: 0,
                source: std::io::Error::other("io_uring engine used while its thread exits"),
            });
        };
        let ring = Ring::open(&self.cfg, &self.file, &mut self.slots)?;
        // The old ring holds no read: closing it (on assignment) cancels nothing.
        self.ring = ring.ring;
        self.registered = ring.registered;
        self.fixed_file = ring.fixed_file;
        self.taskrun = ring.taskrun;
        self.owner = (ring.taskrun == TaskRun::Defer).then_some(me);
        Ok(())
    }

    /// The SQE reading `len` bytes at `offset` into slot `slot`.
    fn read_entry(
        &mut self,
        slot: u32,
        part: usize,
        fd: i32,
        offset: u64,
        len: u32,
    ) -> squeue::Entry {
        let buf = self.slots.slot_ptr(slot);
        // `validate` bounds depth by 2^15 and registration needs depth ≤ 2^16, so the slot
        // index fits the u16 buffer index.
        let index = slot as u16;
        let fixed = types::Fixed(part as u32);
        let entry = match (self.registered, self.fixed_file) {
            (true, true) => opcode::ReadFixed::new(fixed, buf, len, index)
                .offset(offset)
                .build(),
            (true, false) => opcode::ReadFixed::new(types::Fd(fd), buf, len, index)
                .offset(offset)
                .build(),
            (false, true) => opcode::Read::new(fixed, buf, len).offset(offset).build(),
            (false, false) => opcode::Read::new(types::Fd(fd), buf, len)
                .offset(offset)
                .build(),
        };
        entry.user_data(u64::from(slot))
    }

    /// Submits the pushed SQEs and waits for `want` completions in the ring (collecting the
    /// completions a coop / defer ring holds back); retries on EINTR.
    fn enter(&mut self, want: usize) -> Result<(), IoError> {
        self.follow_thread()?;
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => {
                    // Without SQPOLL an SQE left in the queue (the kernel stopped at a bad
                    // one) is submitted by the next enter; with SQPOLL the kernel thread
                    // takes them on its own.
                    self.unsubmitted = !self.sqpoll && !self.ring.submission().is_empty();
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(IoError::Read { offset: 0, source }),
            }
        }
    }

    /// Records every completion in the ring (they move to the ready queue).
    fn harvest(&mut self) {
        for cqe in self.ring.completion() {
            // Every SQE carries its slot; anything else is not ours and is ignored.
            self.slots.complete(cqe.user_data(), cqe.result());
        }
    }

    /// Waits until the kernel has finished every read pushed into the ring (their
    /// completions move to the ready queue). `false` if the ring failed, in which case reads
    /// may still be running.
    pub(crate) fn drain_ring(&mut self) -> bool {
        if self.slots.in_ring() > 0 && self.follow_thread().is_err() {
            return false;
        }
        while self.slots.in_ring() > 0 {
            self.harvest();
            if self.slots.in_ring() == 0 {
                break;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => self.unsubmitted = false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Reads in the ring whose completion has not been harvested (tests).
    #[cfg(test)]
    pub(crate) fn in_ring(&self) -> usize {
        self.slots.in_ring()
    }
}

impl IoEngine for UringEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "uring",
            direct: self.direct,
            registered_buffers: self.registered,
            sqpoll: self.sqpoll,
            taskrun: self.taskrun,
        }
    }

    fn depth(&self) -> usize {
        self.slots.depth()
    }

    fn max_pages_per_read(&self) -> usize {
        self.max_pages
    }

    fn file_pages(&self) -> u64 {
        self.file_pages
    }

    fn in_flight(&self) -> usize {
        self.slots.in_ring() + self.slots.ready()
    }

    fn can_submit(&self) -> bool {
        !self.slots.free().is_empty()
    }

    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        // Before the SQE goes into a ring that may belong to another thread.
        self.follow_thread()?;
        let slot = check_request(
            self.slots.free(),
            self.depth(),
            &req,
            self.max_pages,
            self.file_pages,
        )?;
        let (part, file, offset) = self.file.part(req.first_page, u64::from(req.pages))?;
        let fd = file.as_raw_fd();
        // pages ≤ MAX_PAGES_PER_READ = 2^15, so the length is below 2^27.
        let len = req.pages * PAGE_BYTES as u32;
        let entry = self.read_entry(slot, part, fd, offset, len);
        // SAFETY: the SQE makes the kernel write `len` bytes into slot `slot` of the slot
        // buffers and read from `self.file`. The slot lies inside the buffers (`len ≤
        // slot_bytes`) and is free: no other read targets it and no reference to it is handed
        // out until its completion has been harvested (`buffer` only serves held slots). The
        // buffers stay allocated until that completion: `slots` frees them only when no read
        // is in the ring (`Drop` waits for them first), and a forgotten engine leaks them.
        // The file is kept open by `self.file` (and the ring's registered-file table).
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // The queue has ≥ depth entries and at most depth − 1 reads are pending, so
            // this does not happen; report it rather than lose the read.
            return Err(IoError::Read {
                offset,
                source: std::io::Error::other("io_uring submission queue is full"),
            });
        }
        self.slots.push(slot, tag, req.first_page, req.pages);
        self.unsubmitted = true;
        self.counters.requests += 1;
        self.counters.pages += u64::from(req.pages);
        Ok(())
    }

    /// Submits pushed reads, waits for `min` completions (clamped to [`IoEngine::in_flight`])
    /// and appends every ready completion. On an error (a failed or short read) nothing is
    /// appended: the failed read's slot is freed and the other completions stay queued for
    /// the next call.
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        let min = min.min(self.in_flight());
        let mut entered = false;
        loop {
            self.harvest();
            if let Some(err) = self.slots.take_failed() {
                return Err(err);
            }
            let need = min.saturating_sub(self.slots.ready());
            if need == 0 && (!self.unsubmitted || entered) {
                // A coop / defer ring posts finished reads only when the thread enters the
                // kernel; the flag (one load) says some are pending: collect them once.
                if !entered
                    && self.taskrun != TaskRun::Interrupt
                    && self.slots.in_ring() > 0
                    && self.ring.submission().taskrun()
                {
                    self.enter(0)?;
                    entered = true;
                    continue;
                }
                break;
            }
            self.enter(need)?;
            entered = true;
        }
        let n = self.slots.deliver(out, &mut self.counters);
        Ok(n)
    }

    /// The bytes of a completed read; empty for a slot that is not held (in flight, never
    /// completed, released, or out of range).
    fn buffer(&self, slot: Slot) -> &[u8] {
        self.slots.buffer(slot)
    }

    /// Hands a held slot back; a slot that is not held is ignored (an in-flight slot in
    /// particular stays reserved for its read).
    fn release(&mut self, slot: Slot) {
        self.slots.release(slot);
    }

    fn counters(&self) -> EngineCounters {
        self.counters
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // The kernel writes into the slot buffers until each read completes: wait for all of
        // them. If that fails, reads may still be running, and `slots` leaks the buffers when
        // it is dropped rather than free memory the kernel may write (closing the ring cancels
        // or finishes those reads).
        if self.drain_ring() && self.registered {
            // Best effort: closing the ring unregisters them anyway.
            let _ = self.ring.submitter().unregister_buffers();
        }
    }
}

impl std::fmt::Debug for UringEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringEngine")
            .field("slots", &self.slots)
            .field("max_pages", &self.max_pages)
            .field("file_pages", &self.file_pages)
            .field("direct", &self.direct)
            .field("registered", &self.registered)
            .field("fixed_file", &self.fixed_file)
            .field("sqpoll", &self.sqpoll)
            .field("taskrun", &self.taskrun)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}
