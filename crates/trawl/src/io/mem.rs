//! The in-memory engine: the whole file is read into memory once and a "read" hands out its
//! pages without copying. It measures a search with the device taken away (the same code, the
//! same pages, no I/O latency): PipeANN's in-memory baseline over the same graph and PQ.
//!
//! With a [`LatencyModel`] the same engine models a device: each read completes after a fixed
//! latency, under a throughput ceiling. It keeps the algorithm's own cost real (the search runs
//! as on disk) while the device becomes one whose latency does not grow with the queue depth.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::io::sync_slots::SyncSlots;
use crate::io::{
    AlignedBuf, Completion, EngineConfig, EngineCounters, EngineInfo, IoEngine, IoError, IoFile,
    LatencyModel, ReadRequest, Slot, PAGE_BYTES,
};

/// Serves reads from a resident copy of the file ([`IoFile::load_resident`]): a submission
/// completes at once, and the completion's buffer is the file's own pages.
#[derive(Debug)]
pub struct MemEngine {
    data: Arc<AlignedBuf>,
    /// The file (its part boundaries: a read may not span two concatenated files).
    file: IoFile,
    slots: SyncSlots,
    model: Option<Model>,
}

/// The modelled device: when each queued completion becomes visible.
#[derive(Debug)]
struct Model {
    latency: Duration,
    /// Time between completions at the throughput ceiling (zero: no ceiling).
    gap: Duration,
    /// Completion time of each queued read, oldest first (non-decreasing).
    ready_at: VecDeque<Instant>,
    last: Option<Instant>,
}

impl MemEngine {
    /// An engine over the resident copy of `file` with `cfg.depth` slots. Fails with
    /// [`IoError::BadConfig`] when the file was not loaded into memory.
    pub fn new(file: &IoFile, cfg: EngineConfig) -> Result<Self, IoError> {
        cfg.validate()?;
        let data = file.resident().ok_or_else(|| {
            IoError::BadConfig("the memory engine needs the file loaded into memory".into())
        })?;
        Ok(Self {
            data,
            file: file.clone(),
            slots: SyncSlots::new(&cfg, file.pages()),
            model: None,
        })
    }

    /// An engine over the resident copy of `file` whose reads complete as `model` says.
    pub fn with_model(
        file: &IoFile,
        cfg: EngineConfig,
        model: LatencyModel,
    ) -> Result<Self, IoError> {
        if model.latency_us == 0 {
            return Err(IoError::BadConfig(
                "a modelled latency must be ≥ 1 µs".into(),
            ));
        }
        let mut engine = Self::new(file, cfg)?;
        engine.model = Some(Model {
            latency: Duration::from_micros(u64::from(model.latency_us)),
            gap: match model.iops {
                0 => Duration::ZERO,
                iops => Duration::from_nanos(1_000_000_000 / u64::from(iops)),
            },
            ready_at: VecDeque::with_capacity(cfg.depth),
            last: None,
        });
        Ok(engine)
    }
}

impl IoEngine for MemEngine {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: if self.model.is_some() {
                "simulated"
            } else {
                "memory"
            },
            direct: false,
            registered_buffers: false,
            sqpoll: false,
            taskrun: Default::default(),
        }
    }

    fn depth(&self) -> usize {
        self.slots.depth()
    }

    fn max_pages_per_read(&self) -> usize {
        self.slots.max_pages()
    }

    fn file_pages(&self) -> u64 {
        self.slots.file_pages()
    }

    fn in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    fn can_submit(&self) -> bool {
        self.slots.can_submit()
    }

    fn submit(&mut self, tag: u64, req: ReadRequest) -> Result<(), IoError> {
        let slot = self.slots.check(&req)?;
        self.file.part(req.first_page, u64::from(req.pages))?;
        self.slots.complete(slot, tag, &req);
        if let Some(m) = &mut self.model {
            let mut at = Instant::now() + m.latency;
            if let Some(last) = m.last {
                at = at.max(last + m.gap);
            }
            m.last = Some(at);
            m.ready_at.push_back(at);
        }
        Ok(())
    }

    fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, IoError> {
        let Some(m) = &mut self.model else {
            return Ok(self.slots.wait(out));
        };
        // The modelled device completes in submission order: hand out the ready prefix,
        // spinning until at least `min` are ready (a sleep is far coarser than a device).
        let min = min.min(m.ready_at.len());
        let mut now = Instant::now();
        if min > 0 {
            let due = m.ready_at[min - 1];
            while now < due {
                std::hint::spin_loop();
                now = Instant::now();
            }
        }
        let ready = m.ready_at.partition_point(|&t| t <= now);
        m.ready_at.drain(..ready);
        Ok(self.slots.wait_first(ready, out))
    }

    /// The pages of a completed read; empty for a slot that is not held.
    fn buffer(&self, slot: Slot) -> &[u8] {
        match self.slots.held(slot) {
            Some((first, pages)) => {
                let at = first as usize * PAGE_BYTES;
                &self.data.as_slice()[at..at + pages as usize * PAGE_BYTES]
            }
            None => &[],
        }
    }

    fn release(&mut self, slot: Slot) {
        self.slots.release(slot)
    }

    fn counters(&self) -> EngineCounters {
        self.slots.counters()
    }
}
