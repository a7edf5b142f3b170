//! Page reads from an index file: the [`IoEngine`] trait, its engines and their aligned buffers.
//!
//! An engine reads whole 4 KiB pages of one file ([`IoFile`]) into buffers it owns. The caller
//! submits tagged requests ([`IoEngine::submit`]) into a bounded queue of `depth` slots, collects
//! completions ([`IoEngine::wait`]), reads the bytes of a completed slot
//! ([`IoEngine::buffer`]) and hands the slot back ([`IoEngine::release`]). A slot is busy from
//! its submission until its release, so at most `depth` reads are in flight or held.
//!
//! - [`UringEngine`]: io_uring, one ring per engine (one engine per search thread), O_DIRECT,
//!   buffers registered with the ring when the memlock limit allows (else plain reads), SQPOLL
//!   optional and off by default (the kernel poller costs a core).
//! - [`PreadEngine`]: `pread` on the O_DIRECT file; the fallback where io_uring is missing.
//! - [`MemEngine`]: the whole file in memory, reads served without copying (a search with the
//!   device taken away, for comparison).
//! - [`CountingEngine`]: wraps any engine and counts what passes through it, independently of
//!   the engine's own counters (used to check the search statistics).
//!
//! A short read is an error ([`IoError::ShortRead`]), never a panic or a partially filled page.
//! Dropping an engine waits for every read still in flight before its buffers are freed.

mod aligned;
mod counting;
mod file;
mod mem;
mod pool;
mod pread;
mod ring_slots;
mod sync_slots;
#[cfg(test)]
mod tests;
mod uring;

pub use aligned::AlignedBuf;
pub use counting::{CountedIo, CountingEngine};
pub use file::IoFile;
pub use mem::MemEngine;
pub use pool::EnginePool;
pub use pread::PreadEngine;
pub use uring::UringEngine;

use std::path::PathBuf;

/// The unit of every read: one 4 KiB page.
pub const PAGE_BYTES: usize = 4096;

/// One engine slot: the index of a buffer the engine owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot(pub u32);

/// A read of `pages` consecutive pages starting at page `first_page` of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// First page (file offset / [`PAGE_BYTES`]).
    pub first_page: u64,
    /// Number of pages, `1 ≤ pages ≤` the engine's `max_pages_per_read`.
    pub pages: u32,
}

/// A finished read: the caller's tag and the slot holding the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The tag given to [`IoEngine::submit`].
    pub tag: u64,
    /// Where the bytes are; read them with [`IoEngine::buffer`], then [`IoEngine::release`].
    pub slot: Slot,
}

/// How an engine is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Slots: reads in flight or completed-but-unreleased at most. `≥ 1`.
    pub depth: usize,
    /// Largest read in pages (a record spanning several pages is read in one request). `≥ 1`.
    pub max_pages_per_read: usize,
    /// io_uring: register the slot buffers with the ring (falls back to unregistered buffers
    /// when the kernel refuses, e.g. above the memlock limit). Ignored by other engines.
    pub register_buffers: bool,
    /// io_uring: a kernel thread polls the submission queue (costs a core). Off by default.
    pub sqpoll: bool,
    /// io_uring: how the kernel posts completions to the thread. Ignored by other engines.
    pub taskrun: TaskRun,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            depth: 32,
            max_pages_per_read: 1,
            register_buffers: true,
            sqpoll: false,
            taskrun: TaskRun::default(),
        }
    }
}

/// How an io_uring ring posts the completions of reads ([`EngineConfig::taskrun`]).
///
/// A finished O_DIRECT read is posted to the completion queue by task work that runs in the
/// submitting thread. By default the kernel interrupts that thread for it (an inter-processor
/// interrupt when it runs on another core); the two other modes let the thread pick the
/// moment, trading that interrupt for a system call that posts every pending completion at
/// once. The engine checks the ring's `IORING_SQ_TASKRUN` flag (one load) whenever it looks
/// for completions and enters the kernel only when work is pending, so polling stays a
/// user-space loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskRun {
    /// The kernel's default (and trawl's): each completion interrupts the thread to be posted.
    #[default]
    Interrupt,
    /// `COOP_TASKRUN` + `TASKRUN_FLAG`: no interrupt; completions are posted at the thread's
    /// next kernel entry, which the engine makes when the flag says they are pending. Measured
    /// on GloVe-400K (`bench/results/cpu-per-read.md`): with polling, QPS ratio to `Interrupt`
    /// median 1.025 over 13 paired repetitions (0.92–1.31) and far less completion work; without
    /// polling ~1 µs more CPU per page (the system call that collects completions) and up to
    /// 10% fewer QPS for beam search — so not the default.
    Coop,
    /// `SINGLE_ISSUER` + `DEFER_TASKRUN` + `TASKRUN_FLAG`: completions are posted only when
    /// the thread asks for them, in one batch; the ring belongs to one thread, so an engine
    /// used from another thread (with no read in flight) rebuilds its ring there first.
    Defer,
}

impl TaskRun {
    /// The mode's name, as [`TaskRun::from_str`](std::str::FromStr) reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "interrupt",
            Self::Coop => "coop",
            Self::Defer => "defer",
        }
    }
}

impl std::fmt::Display for TaskRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TaskRun {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "interrupt" => Ok(Self::Interrupt),
            "coop" => Ok(Self::Coop),
            "defer" => Ok(Self::Defer),
            other => Err(format!(
                "unknown task-run mode {other:?} (interrupt, coop, defer)"
            )),
        }
    }
}

/// Most slots an engine may have (the io_uring submission queue holds at most 32768 entries).
pub const MAX_DEPTH: usize = 1 << 15;

/// Largest read in pages an engine may be configured for (128 MiB; Linux reads at most
/// 2 GiB − 4 KiB at once).
pub const MAX_PAGES_PER_READ: usize = 1 << 15;

impl EngineConfig {
    /// Checks the parameters: `1 ≤ depth ≤` [`MAX_DEPTH`], `1 ≤ max_pages_per_read ≤`
    /// [`MAX_PAGES_PER_READ`], and all slot buffers together addressable. Every engine calls
    /// this when it is created.
    pub fn validate(&self) -> Result<(), IoError> {
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(IoError::BadConfig(format!(
                "depth {} is not in 1..={MAX_DEPTH}",
                self.depth
            )));
        }
        if self.max_pages_per_read == 0 || self.max_pages_per_read > MAX_PAGES_PER_READ {
            return Err(IoError::BadConfig(format!(
                "max_pages_per_read {} is not in 1..={MAX_PAGES_PER_READ}",
                self.max_pages_per_read
            )));
        }
        self.total_buffer_bytes().ok_or_else(|| {
            IoError::BadConfig(format!(
                "{} slots of {} pages do not fit in memory",
                self.depth, self.max_pages_per_read
            ))
        })?;
        Ok(())
    }

    /// Bytes of one slot buffer (`max_pages_per_read × PAGE_BYTES`).
    pub fn slot_bytes(&self) -> usize {
        self.max_pages_per_read.saturating_mul(PAGE_BYTES)
    }

    /// Bytes of all slot buffers together, `None` if that overflows (or exceeds `isize::MAX`).
    pub fn total_buffer_bytes(&self) -> Option<usize> {
        self.max_pages_per_read
            .checked_mul(PAGE_BYTES)?
            .checked_mul(self.depth)
            .filter(|&b| b <= isize::MAX as usize)
    }
}

/// Which engine to create ([`IoFile::engine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// io_uring when the kernel offers it, else pread.
    #[default]
    Auto,
    /// io_uring; an error where it is unavailable.
    Uring,
    /// pread.
    Pread,
    /// The file loaded into memory ([`MemEngine`]): no I/O at search time.
    Memory,
    /// The file loaded into memory, each read completing after a modelled device delay
    /// ([`LatencyModel`]): a reproducible stand-in for an SSD whose latency does not depend on
    /// the queue depth, to separate a search's algorithm from the device it runs on.
    Simulated(LatencyModel),
}

impl EngineKind {
    /// Whether the engine serves reads from a resident copy of the file
    /// ([`IoFile::load_resident`] must run before [`IoFile::engine`]).
    pub fn needs_resident(&self) -> bool {
        matches!(self, Self::Memory | Self::Simulated(_))
    }
}

/// A device model for [`EngineKind::Simulated`]: a read submitted at `t` completes at
/// `max(t + latency, previous completion + 1 / iops)` — a fixed service latency and a
/// throughput ceiling, with completions in submission order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyModel {
    /// Service latency of one read, in microseconds.
    pub latency_us: u32,
    /// Most reads per second the device completes; 0 = no ceiling.
    pub iops: u32,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "uring" | "io_uring" => Ok(Self::Uring),
            "pread" => Ok(Self::Pread),
            "memory" | "mem" => Ok(Self::Memory),
            sim if sim.starts_with("sim:") => {
                let bad = || {
                    format!(
                        "bad simulated engine {sim:?}: expected sim:LATENCY_US[:IOPS], \
                         latency 1..=1000000 µs, e.g. sim:80:500000"
                    )
                };
                let mut parts = sim["sim:".len()..].split(':');
                let latency_us: u32 = parts
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|v| (1..=1_000_000).contains(v))
                    .ok_or_else(bad)?;
                let iops: u32 = match parts.next() {
                    Some(v) => v.parse().map_err(|_| bad())?,
                    None => 0,
                };
                if parts.next().is_some() {
                    return Err(bad());
                }
                Ok(Self::Simulated(LatencyModel { latency_us, iops }))
            }
            other => Err(format!(
                "unknown I/O engine {other:?} (auto, uring, pread, memory, sim:LATENCY_US[:IOPS])"
            )),
        }
    }
}

/// What an engine counted itself since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Requests submitted.
    pub requests: u64,
    /// Pages requested.
    pub pages: u64,
    /// Bytes read (completed).
    pub bytes: u64,
    /// Completions delivered.
    pub completions: u64,
}

/// How an engine actually runs (after fallbacks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineInfo {
    /// `"uring"` or `"pread"` (or a wrapper's name).
    pub name: &'static str,
    /// The file was opened with O_DIRECT.
    pub direct: bool,
    /// Buffers are registered with the ring.
    pub registered_buffers: bool,
    /// A kernel thread polls the submission queue.
    pub sqpoll: bool,
    /// How completions are posted ([`TaskRun::Interrupt`] for engines without a ring, and
    /// where the kernel refused the mode asked for).
    pub taskrun: TaskRun,
}

/// Why an I/O operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The file could not be opened (missing, permissions). Check the path.
    #[error("{}: cannot open: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file system refuses O_DIRECT (tmpfs, some network file systems). Put the index on
    /// a local disk, or open without direct I/O (figures then include the page cache).
    #[error("{}: the file system does not support O_DIRECT: {source}", path.display())]
    DirectUnsupported {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The kernel refused to set up io_uring (old kernel, seccomp, disabled by sysctl). Use
    /// the pread engine.
    #[error("io_uring is unavailable: {0}")]
    UringUnavailable(std::io::Error),
    /// The engine parameters are unusable (zero depth, zero pages per read).
    #[error("invalid engine configuration: {0}")]
    BadConfig(String),
    /// Every slot is busy: wait for completions and release slots before submitting more.
    #[error("I/O queue full ({depth} slots busy)")]
    QueueFull {
        /// Engine depth.
        depth: usize,
    },
    /// A request of zero pages or more than the engine's largest read.
    #[error("read of {pages} pages is not allowed (1 to {max})")]
    BadLength {
        /// Requested pages.
        pages: u32,
        /// Largest read.
        max: usize,
    },
    /// A request beyond the end of the file: the index is truncated or the caller is wrong.
    #[error("read of pages {first}..{end} beyond the file's {file_pages} pages")]
    OutOfRange {
        /// First page.
        first: u64,
        /// One past the last page.
        end: u64,
        /// Pages in the file.
        file_pages: u64,
    },
    /// The device returned fewer bytes than asked: the file shrank or the device failed.
    #[error("short read at byte {offset}: {got} of {expected} bytes")]
    ShortRead {
        /// File offset of the read.
        offset: u64,
        /// Bytes asked.
        expected: usize,
        /// Bytes returned.
        got: usize,
    },
    /// The operating system failed a read or a ring operation.
    #[error("read failed at byte {offset}: {source}")]
    Read {
        /// File offset of the read (0 for ring-wide failures).
        offset: u64,
        /// The OS error.
        source: std::io::Error,
    },
}

impl IoError {
    /// What kind of failure this is. A queue overrun or a read longer than the engine allows
    /// is the caller's bug (`Internal`); a read past the end of the file means the file is not
    /// what its header says (`Corrupt`).
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            Self::Open { source, .. } => K::of_io(source),
            Self::BadConfig(_) => K::InvalidInput,
            Self::QueueFull { .. } | Self::BadLength { .. } => K::Internal,
            Self::OutOfRange { .. } => K::Corrupt,
            Self::DirectUnsupported { .. }
            | Self::UringUnavailable(_)
            | Self::ShortRead { .. }
            | Self::Read { .. } => K::Storage,
        }
    }
}

/// Tagged page reads into engine-owned buffers through a bounded queue.
///
/// Protocol: `submit` while [`IoEngine::can_submit`]; `wait(min)` returns completions (at least
/// `min`, which must not exceed [`IoEngine::in_flight`]; `min = 0` polls without blocking);
/// `buffer(slot)` is valid from its completion until `release(slot)`.
pub trait IoEngine: Send {
    /// How the engine runs.
    fn info(&self) -> EngineInfo;
    /// Slots (most reads in flight or held).
    fn depth(&self) -> usize;
    /// Largest read in pages.
    fn max_pages_per_read(&self) -> usize;
    /// Pages in the file.
    fn file_pages(&self) -> u64;
    /// Reads submitted and not yet returned by `wait`.
    fn in_flight(&self) -> usize;
    /// Whether a slot is free for another `submit`.
    fn can_submit(&self) -> bool;
    /// Queues one read tagged `tag`. The read may start at once or at the next `wait`.
    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError>;
    /// Appends at least `min` completions to `out` (blocking until they arrive; `min = 0`
    /// returns what is ready) and returns how many were appended. A failed or short read is
    /// an error; its slot is released.
    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError>;
    /// The bytes of a completed read (`pages × PAGE_BYTES`).
    fn buffer(&self, slot: Slot) -> &[u8];
    /// Hands a completed slot back.
    fn release(&mut self, slot: Slot);
    /// What the engine counted.
    fn counters(&self) -> EngineCounters;
}
