//! The accelerator side of FlashANNS's batch graph search (`kinds::graph::search::flash`): for a batch of
//! queries, each with its own candidate list and visited set *on the device*, one **step**
//! expands, for every query whose record has arrived, that record's neighbours — visited test,
//! PQ-ADC, list update — and picks the query's next nodes to read.
//!
//! One contract, two backends: [`CpuFlash`] (the reference, state in host memory) and the
//! `wgpu` backend (`gpu_flash`, one workgroup per query; state in GPU buffers). A session
//! ([`FlashSession`]) holds the state of `slots` queries; the host drives it with
//! [`StepJob`]s, submitted and collected apart so it can reap reads while a step runs.
//!
//! ## What one step does for one entry (both backends, exactly)
//!
//! For entry `e` of query slot `s`:
//!
//! 1. **Reset** (`e.entry != NONE`): the slot's list and visited set are emptied, its table is
//!    the one the job carries for it, and `e.entry` (the start node) is visited and listed with
//!    its PQ distance.
//! 2. **Stale test** (`e.node != NONE`, the node whose record arrived): the step is *stale*
//!    when the list holds an unchosen candidate ordered before `(e.node_key, e.node)` — a
//!    strict best-first search would have expanded that one now.
//! 3. **Expand**: each of `e`'s neighbour ids, in order, that is not yet visited is visited
//!    and scored with [`crate::accel::adc_distance`]; the list becomes the first `L` of the old list
//!    and the scored neighbours, ordered by `(key, id)` where `key` is the distance's
//!    order-preserving bits ([`key_of`]).
//! 4. **Choose**: the first `e.fill` unchosen candidates in list order are marked chosen and
//!    returned (the reads the host issues next).
//!
//! Keys, ids and the list are integers, and the PQ sums are the contract's, so both backends
//! produce the same lists, the same choices and the same counts, bit for bit.
//!
//! ## Grouped nodes (the page-node layout)
//!
//! With [`Groups`], a node is a page of vectors: node `p` is the `counts[p]` codes from
//! `p · capacity` (the codes in slot order), its key the least of their keys, and `scored`
//! counts every one of them. Ids, the visited set and the list are over nodes; everything
//! else is as above.

use std::fmt;

use crate::accel::{
    adc_distance, adc_distance2_within, adc_distance_within, AccelError, AccelInfo, TABLE_ROW,
};
use crate::quant::pq::PqCodes;
use crate::vamana::queue::VisitedSet;

/// No node.
pub const NONE: u32 = u32::MAX;

/// Most nodes one entry may choose (staleness + 1).
pub const MAX_FILL: usize = 8;

/// An `f32` as a `u32` ordered like `f32::total_cmp` (the filter kernels' `key_of`).
#[inline]
pub fn key_of(d: f32) -> u32 {
    let b = d.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// The `f32` whose key is `k`.
#[inline]
pub fn dist_of_key(k: u32) -> f32 {
    f32::from_bits(if k & 0x8000_0000 != 0 {
        k ^ 0x8000_0000
    } else {
        !k
    })
}

/// Nodes that are groups of consecutive codes (the page-node layout's pages): node `p` is
/// the `counts[p]` codes from `p · capacity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Groups {
    capacity: u32,
    counts: Vec<u32>,
}

impl Groups {
    /// Groups of at most `capacity` codes, `counts[p]` in group `p`.
    pub fn new(capacity: usize, counts: Vec<u32>) -> Result<Self, AccelError> {
        let bad = |s: String| Err(AccelError::BadBatch(s));
        if capacity == 0 || capacity > u32::MAX as usize {
            return bad(format!("group capacity {capacity} out of range"));
        }
        if let Some((p, c)) = counts
            .iter()
            .enumerate()
            .find(|(_, &c)| c as usize > capacity)
        {
            return bad(format!("group {p} holds {c} codes, capacity {capacity}"));
        }
        if (counts.len() as u64).saturating_mul(capacity as u64) >= u64::from(u32::MAX) {
            return bad(format!(
                "{} groups of {capacity} codes: too many for u32 ids",
                counts.len()
            ));
        }
        Ok(Self {
            capacity: capacity as u32,
            counts,
        })
    }
    /// Nodes (groups).
    pub fn nodes(&self) -> usize {
        self.counts.len()
    }
    /// Most codes in one group.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }
    /// Codes in each group.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }
    /// The codes of group `p`: `first..first + count`.
    #[inline]
    pub fn members(&self, p: u32) -> std::ops::Range<usize> {
        let first = p as usize * self.capacity as usize;
        first..first + self.counts[p as usize] as usize
    }
    /// Checks the groups against `n` codes.
    pub fn check(&self, n: usize) -> Result<(), AccelError> {
        match self.counts.len().checked_sub(1) {
            Some(last) if self.members(last as u32).end > n => Err(AccelError::BadBatch(format!(
                "{} groups of {} codes need {} codes, there are {n}",
                self.counts.len(),
                self.capacity,
                self.members(last as u32).end
            ))),
            _ => Ok(()),
        }
    }
}

/// The shape of a session's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashShape {
    /// Query slots.
    pub slots: usize,
    /// Candidate list size `L`.
    pub l: usize,
    /// Most neighbour ids one entry carries (the graph's largest degree).
    pub max_degree: usize,
    /// Most ids one query visits between resets (sizes the GPU's visited hash; the host stops
    /// a query before it gets there).
    pub max_visited: usize,
}

/// One query's part of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepEntry {
    /// The query's slot.
    pub slot: u32,
    /// Start node when the slot starts a new query ([`NONE`] otherwise); its table is the
    /// `i`-th of the job's tables where `i` counts the resets before this entry.
    pub entry: u32,
    /// The node whose record arrived ([`NONE`] for a reset alone).
    pub node: u32,
    /// That node's key when it was chosen (for the stale test).
    pub node_key: u32,
    /// Its neighbours: `nbrs[nbr_off..nbr_off + nbr_len]` of the job.
    pub nbr_off: u32,
    /// Number of neighbours.
    pub nbr_len: u32,
    /// Nodes to choose after the expansion (`≤` [`MAX_FILL`]).
    pub fill: u32,
}

/// A step: entries (at most one per slot), their neighbours, the tables of the resets.
#[derive(Debug, Clone, Default)]
pub struct StepJob {
    /// Entries.
    pub entries: Vec<StepEntry>,
    /// Neighbour ids of all entries.
    pub nbrs: Vec<u32>,
    /// PQ: one `m × 256` table per reset entry, in entry order.
    pub tables: Vec<f32>,
    /// The codes are RaBitQ's: a reset entry's query is the next of `rbq` (and `tables` is
    /// empty); scores are [`RbqQuery::distance`](crate::quant::rabitq::RbqQuery::distance).
    pub rabitq: bool,
    /// RaBitQ: one prepared query per reset entry, in entry order.
    pub rbq: Vec<crate::quant::rabitq::RbqQuery>,
}

impl StepJob {
    /// Empties the job (keeping its buffers).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.nbrs.clear();
        self.tables.clear();
        self.rbq.clear();
    }

    /// Checks the job against a session of `shape` over `n` codes of `m` bytes.
    pub fn validate(&self, shape: &FlashShape, n: usize, m: usize) -> Result<(), AccelError> {
        let bad = |s: String| Err(AccelError::BadBatch(s));
        let mut seen = vec![false; shape.slots];
        let mut resets = 0usize;
        for e in &self.entries {
            let s = e.slot as usize;
            if s >= shape.slots || std::mem::replace(&mut seen[s], true) {
                return bad(format!("slot {s} out of range or twice in one step"));
            }
            if e.entry != NONE {
                if e.entry as usize >= n {
                    return bad(format!("start node {} out of range (n = {n})", e.entry));
                }
                resets += 1;
            }
            if e.fill as usize > MAX_FILL {
                return bad(format!("fill {} above {MAX_FILL}", e.fill));
            }
            if e.nbr_len as usize > shape.max_degree {
                return bad(format!(
                    "{} neighbours, more than the session's {}",
                    e.nbr_len, shape.max_degree
                ));
            }
            let end = e.nbr_off as usize + e.nbr_len as usize;
            let Some(ids) = self.nbrs.get(e.nbr_off as usize..end) else {
                return bad(format!("neighbours {}..{end} out of range", e.nbr_off));
            };
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= n) {
                return bad(format!("neighbour id {id} out of range (n = {n})"));
            }
        }
        if self.rabitq {
            crate::accel::check_rbq(&self.rbq, self.tables.len(), resets, m)?;
        } else if self.tables.len() != resets * m * TABLE_ROW {
            return bad(format!(
                "{} table entries for {resets} new queries of {m} subspaces",
                self.tables.len()
            ));
        }
        Ok(())
    }
}

/// What a step returned, per entry (in the job's order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepOutput {
    /// Nodes chosen by entry `i`: `chosen[i * MAX_FILL..][..n_chosen[i]]`.
    pub chosen: Vec<u32>,
    /// Their keys (same layout).
    pub keys: Vec<u32>,
    /// How many entry `i` chose.
    pub n_chosen: Vec<u32>,
    /// Whether entry `i`'s step was stale.
    pub stale: Vec<bool>,
    /// PQ distances entry `i` computed.
    pub scored: Vec<u32>,
}

impl StepOutput {
    /// Sizes the output for `entries` entries.
    pub fn reset(&mut self, entries: usize) {
        self.chosen.clear();
        self.chosen.resize(entries * MAX_FILL, NONE);
        self.keys.clear();
        self.keys.resize(entries * MAX_FILL, 0);
        self.n_chosen.clear();
        self.n_chosen.resize(entries, 0);
        self.stale.clear();
        self.stale.resize(entries, false);
        self.scored.clear();
        self.scored.resize(entries, 0);
    }

    /// Entry `i`'s chosen `(node, key)`s.
    pub fn chosen(&self, i: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let r = i * MAX_FILL..i * MAX_FILL + self.n_chosen[i] as usize;
        self.chosen[r.clone()]
            .iter()
            .copied()
            .zip(self.keys[r].iter().copied())
    }
}

/// The state of `slots` queries on a device.
pub trait FlashSession: Send {
    /// Starts a step. At most one step is in flight: [`FlashSession::wait`] before the next.
    fn submit(&mut self, job: &StepJob) -> Result<(), AccelError>;
    /// Waits for the step submitted last and writes its output.
    fn wait(&mut self, out: &mut StepOutput) -> Result<(), AccelError>;
}

/// An accelerator that runs batch graph search steps over resident PQ codes.
pub trait FlashAccel: Send + Sync + fmt::Debug {
    /// What it is.
    fn info(&self) -> AccelInfo;
    /// A session of `shape` (one per search thread).
    fn session(&self, shape: FlashShape) -> Result<Box<dyn FlashSession + '_>, AccelError>;
}

/// The reference backend: the state of each slot in host memory.
#[derive(Debug, Clone, Copy)]
pub struct CpuFlash<'c> {
    codes: &'c PqCodes,
    groups: Option<&'c Groups>,
}

impl<'c> CpuFlash<'c> {
    /// The backend over `codes` (borrowed), one node per code.
    pub fn new(codes: &'c PqCodes) -> Self {
        Self {
            codes,
            groups: None,
        }
    }
    /// The backend over `codes` whose nodes are `groups` of them.
    pub fn grouped(codes: &'c PqCodes, groups: &'c Groups) -> Result<Self, AccelError> {
        groups.check(codes.n())?;
        Ok(Self {
            codes,
            groups: Some(groups),
        })
    }
}

impl FlashAccel for CpuFlash<'_> {
    fn info(&self) -> AccelInfo {
        AccelInfo {
            backend: "cpu",
            adapter: "host".into(),
            resident_bytes: 0,
        }
    }

    fn session(&self, shape: FlashShape) -> Result<Box<dyn FlashSession + '_>, AccelError> {
        Ok(Box::new(CpuSession {
            groups: self.groups,
            ..CpuSession::new(self.codes, shape)
        }))
    }
}

/// One candidate of a list: `(key, id, chosen)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cand {
    key: u32,
    id: u32,
    chosen: bool,
}

#[derive(Debug, Default)]
struct SlotState {
    table: Vec<f32>,
    /// No entry of `table` is negative: a group's codes are scored with a bound.
    monotone: bool,
    rbq: crate::quant::rabitq::RbqQuery,
    list: Vec<Cand>,
    visited: VisitedSet,
}

/// [`CpuFlash`]'s session: computes each step at submission.
#[derive(Debug)]
pub struct CpuSession<'c> {
    codes: &'c PqCodes,
    groups: Option<&'c Groups>,
    shape: FlashShape,
    slots: Vec<SlotState>,
    fresh: Vec<(u32, u32)>,
    merged: Vec<Cand>,
    out: StepOutput,
    pending: Option<Result<(), AccelError>>,
}

impl<'c> CpuSession<'c> {
    /// A session of `shape` over `codes`.
    pub fn new(codes: &'c PqCodes, shape: FlashShape) -> Self {
        Self {
            codes,
            groups: None,
            shape,
            slots: (0..shape.slots).map(|_| SlotState::default()).collect(),
            fresh: Vec::new(),
            merged: Vec::new(),
            out: StepOutput::default(),
            pending: None,
        }
    }

    fn step(&mut self, job: &StepJob) -> Result<(), AccelError> {
        let m = self.codes.m();
        let nodes = self.groups.map_or(self.codes.n(), Groups::nodes);
        job.validate(&self.shape, nodes, m)?;
        self.out.reset(job.entries.len());
        let l = self.shape.l;
        let mut tables = job.tables.chunks_exact(m * TABLE_ROW);
        let mut rbq = job.rbq.iter();
        let codes = self.codes;
        let groups = self.groups;
        let rabitq = job.rabitq;
        let node_key =
            |st: &SlotState, id: u32, bound: f32| node_key(codes, groups, rabitq, st, id, bound);
        for (i, e) in job.entries.iter().enumerate() {
            let st = &mut self.slots[e.slot as usize];
            let mut scored = 0u32;
            if e.entry != NONE {
                st.table.clear();
                if rabitq {
                    if let Some(q) = rbq.next() {
                        st.rbq.clone_from(q);
                    }
                } else {
                    st.table.extend_from_slice(tables.next().unwrap_or(&[]));
                }
                st.monotone = groups.is_some() && !rabitq && st.table.iter().all(|&x| x >= 0.0);
                st.list.clear();
                st.visited.reset(nodes);
                st.visited.insert(e.entry);
                let (key, n) = node_key(st, e.entry, f32::INFINITY);
                st.list.push(Cand {
                    key,
                    id: e.entry,
                    chosen: false,
                });
                scored += n;
            }
            if e.node != NONE {
                self.out.stale[i] = st
                    .list
                    .iter()
                    .find(|c| !c.chosen)
                    .is_some_and(|c| (c.key, c.id) < (e.node_key, e.node));
            }
            let nbrs = &job.nbrs[e.nbr_off as usize..(e.nbr_off + e.nbr_len) as usize];
            self.fresh.clear();
            for &nb in nbrs {
                if st.visited.insert(nb) {
                    self.fresh.push((nb, 0));
                }
            }
            prefetch(codes, groups, &self.fresh);
            // A fresh node farther than a full list's last cannot enter it.
            let bound = match st.list.get(l.wrapping_sub(1)) {
                Some(c) if st.list.len() >= l => dist_of_key(c.key),
                _ => f32::INFINITY,
            };
            for f in &mut self.fresh {
                let (key, n) = node_key(st, f.0, bound);
                f.1 = key;
                scored += n;
            }
            if !self.fresh.is_empty() {
                self.fresh.sort_unstable_by_key(|&(id, key)| (key, id));
                merge_first(l, &st.list, &self.fresh, &mut self.merged);
                std::mem::swap(&mut st.list, &mut self.merged);
            }
            let mut n = 0usize;
            for c in st.list.iter_mut() {
                if n == e.fill as usize {
                    break;
                }
                if !c.chosen {
                    c.chosen = true;
                    self.out.chosen[i * MAX_FILL + n] = c.id;
                    self.out.keys[i * MAX_FILL + n] = c.key;
                    n += 1;
                }
            }
            self.out.n_chosen[i] = n as u32;
            self.out.scored[i] = scored;
        }
        Ok(())
    }
}

/// The distance of code `c` under slot `st`'s query (RaBitQ's or PQ's; a PQ code farther
/// than `bound` may come back as `+∞` on a table without negative entries).
#[inline]
fn score(codes: &PqCodes, rabitq: bool, st: &SlotState, c: usize, bound: f32) -> f32 {
    let code = codes.code(c);
    if rabitq {
        st.rbq.distance(code)
    } else if st.monotone {
        adc_distance_within(&st.table, code, bound)
    } else {
        adc_distance(&st.table, code)
    }
}

/// Node `id`'s key and the codes scored for it. A group's code farther than `bound` (and
/// than the group's best so far) may be cut short: the group's key is then exact whenever it
/// is at most `bound`'s, and above it otherwise.
#[inline]
fn node_key(
    codes: &PqCodes,
    groups: Option<&Groups>,
    rabitq: bool,
    st: &SlotState,
    id: u32,
    bound: f32,
) -> (u32, u32) {
    let Some(g) = groups else {
        return (
            key_of(score(codes, rabitq, st, id as usize, f32::INFINITY)),
            1,
        );
    };
    let r = g.members(id);
    let n = r.len() as u32;
    // The least key so far and its distance.
    let mut best = (u32::MAX, f32::INFINITY);
    let take = |best: &mut (u32, f32), d: f32| {
        let k = key_of(d);
        if k < best.0 {
            *best = (k, d);
        }
    };
    let mut c = r.start;
    if st.monotone && !rabitq {
        // Two codes at a time: twice the independent sums.
        while c + 1 < r.end {
            let (x, y) = adc_distance2_within(
                &st.table,
                codes.code(c),
                codes.code(c + 1),
                bound.min(best.1),
            );
            take(&mut best, x);
            take(&mut best, y);
            c += 2;
        }
    }
    for c in c..r.end {
        let d = score(codes, rabitq, st, c, bound.min(best.1));
        take(&mut best, d);
    }
    (best.0, n)
}

/// Starts loading the codes of the `fresh` nodes.
fn prefetch(codes: &PqCodes, groups: Option<&Groups>, fresh: &[(u32, u32)]) {
    let m = codes.m();
    for &(nb, _) in fresh {
        match groups {
            None => codes.prefetch(nb as usize),
            Some(g) => {
                let r = g.members(nb);
                if let Some(b) = codes.as_bytes().get(r.start * m..r.end * m) {
                    for part in b.chunks(512) {
                        crate::mem::prefetch_read(part);
                    }
                }
            }
        }
    }
}

/// The first `l` of the merge of `list` and `fresh` (both ordered by `(key, id)`) into
/// `merged`.
fn merge_first(l: usize, list: &[Cand], fresh: &[(u32, u32)], merged: &mut Vec<Cand>) {
    merged.clear();
    let (mut a, mut b) = (0, 0);
    while merged.len() < l && (a < list.len() || b < fresh.len()) {
        let take_old = match (list.get(a), fresh.get(b)) {
            (Some(o), Some(&(id, key))) => (o.key, o.id) < (key, id),
            (Some(_), None) => true,
            _ => false,
        };
        if take_old {
            merged.push(list[a]);
            a += 1;
        } else {
            let (id, key) = fresh[b];
            merged.push(Cand {
                key,
                id,
                chosen: false,
            });
            b += 1;
        }
    }
}

impl FlashSession for CpuSession<'_> {
    fn submit(&mut self, job: &StepJob) -> Result<(), AccelError> {
        let r = self.step(job);
        self.pending = Some(r);
        Ok(())
    }

    fn wait(&mut self, out: &mut StepOutput) -> Result<(), AccelError> {
        match self.pending.take() {
            None => Err(AccelError::BadBatch("wait without a submitted step".into())),
            Some(Err(e)) => Err(e),
            Some(Ok(())) => {
                std::mem::swap(out, &mut self.out);
                Ok(())
            }
        }
    }
}
