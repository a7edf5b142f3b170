//! The in-memory delta of a live index ([`crate::kinds::graph::updates::live`]): the vectors inserted since the last
//! merge, in a Vamana graph of their own (same `R`, `L`, `α` as the disk graph), searched
//! beside the disk index with exact distances (FreshDiskANN's temporary index).
//!
//! Visibility is by epoch: a node inserted by the operation that published epoch `e` carries
//! `born = e` and is returned only by searches at epoch `e` or later; a deleted node carries
//! the epoch of its deletion (`dead`, 0 while live) and is hidden from searches at that epoch
//! and later. A batch is therefore seen whole or not at all, while its nodes are linked in
//! chunks that release the lock in between, so searches are never held up for a whole batch.
//!
//! A deleted node also leaves the graph in place (IP-DiskANN, [`unlink`]): its in-neighbours
//! swap their edge to it for up to 3 edges to its live out-neighbours, so searches stop
//! walking through it. (A search that began before the delete may then miss the node: it was
//! visible to that search, but its results are approximate anyway.) The frozen delta a merge
//! is reading is only stamped.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::filter::{Attributes, Expr, FilterError, Predicate};

use crate::kernels::{self, DType, Element, Metric};
use crate::progress::Control;
use crate::vamana::build::link_points;
use crate::vamana::queue::Neighbor;
use crate::vamana::search::{greedy, SearchScratch};
use crate::vamana::{Adjacency, BuildError, SlotGraph, VamanaConfig, VectorStore};

mod unlink;

use unlink::unlink_in_place;
pub(crate) use unlink::Unlinked;

/// Inserts of fewer vectors than this are linked on one thread, so the delta graph does not
/// depend on the thread count or timing (see `Delta::insert`); larger batches link in parallel.
const DETERMINISTIC_BELOW: usize = 512;
/// Nodes linked per hold of the write lock.
const LINK_CHUNK: usize = 256;

/// One element type's delta.
#[derive(Debug)]
pub(crate) struct Rows<T: Element> {
    rows: Vec<T>,
    norms: Vec<f32>,
    lift: Vec<f32>,
    max_norm_sq: f32,
    graph: SlotGraph,
    ext: Vec<u64>,
    born: Vec<u32>,
    dead: Vec<AtomicU32>,
}

#[derive(Debug)]
pub(crate) enum AnyRows {
    F32(Rows<f32>),
    U8(Rows<u8>),
    I8(Rows<i8>),
}

/// What a typed delta can be viewed as.
pub(crate) trait DeltaElement: Element {
    fn rows(any: &AnyRows) -> Option<&Rows<Self>>;
    fn rows_mut(any: &mut AnyRows) -> Option<&mut Rows<Self>>;
}

macro_rules! delta_element {
    ($t:ty, $v:ident) => {
        impl DeltaElement for $t {
            fn rows(any: &AnyRows) -> Option<&Rows<Self>> {
                match any {
                    AnyRows::$v(r) => Some(r),
                    _ => None,
                }
            }
            fn rows_mut(any: &mut AnyRows) -> Option<&mut Rows<Self>> {
                match any {
                    AnyRows::$v(r) => Some(r),
                    _ => None,
                }
            }
        }
    };
}
delta_element!(f32, F32);
delta_element!(u8, U8);
delta_element!(i8, I8);

/// The delta of one live index version.
#[derive(Debug)]
pub(crate) struct Delta {
    dim: usize,
    metric: Metric,
    cfg: VamanaConfig,
    inner: RwLock<AnyRows>,
    /// The attributes of the nodes (row `i` = node `i`; nodes past its rows have none);
    /// `None` until a vector with attributes is inserted.
    attrs: RwLock<Option<Arc<Attributes>>>,
}

/// A filtered delta search scans the matching nodes exactly when they are at most this many
/// (the vectors are in memory: a scan of this many costs about what a greedy search with a
/// list of 100 and degree 64 does).
const DELTA_EXACT_UP_TO: u64 = 8192;
/// Largest list of a filtered greedy search of the delta.
const DELTA_MAX_LIST: usize = 2000;

impl<T: Element> Rows<T> {
    fn new(cfg: &VamanaConfig) -> Self {
        Self {
            rows: Vec::new(),
            norms: Vec::new(),
            lift: Vec::new(),
            max_norm_sq: 0.0,
            graph: SlotGraph::new(0, cfg.slots),
            ext: Vec::new(),
            born: Vec::new(),
            dead: Vec::new(),
        }
    }

    fn n(&self) -> usize {
        self.ext.len()
    }

    fn store(&self, dim: usize, metric: Metric) -> VectorStore<'_, T> {
        VectorStore::from_parts(
            &self.rows,
            dim,
            metric,
            &self.norms,
            &self.lift,
            self.max_norm_sq,
        )
        .expect("the delta keeps its norms in step with its rows")
    }

    #[inline]
    fn visible(&self, i: usize, epoch: u32) -> bool {
        let d = self.dead[i].load(Ordering::Acquire);
        self.born[i] <= epoch && (d == 0 || d > epoch)
    }
}

/// A read-only view of a typed delta, for the merge.
pub(crate) struct DeltaView<'a, T: Element> {
    rows: &'a Rows<T>,
    dim: usize,
    metric: Metric,
}

impl<'a, T: Element> DeltaView<'a, T> {
    /// Nodes (deleted ones included).
    pub(crate) fn n(&self) -> usize {
        self.rows.n()
    }
    /// The vector of node `i`.
    pub(crate) fn row(&self, i: usize) -> &'a [T] {
        &self.rows.rows[i * self.dim..(i + 1) * self.dim]
    }
    /// The id of node `i`.
    pub(crate) fn ext(&self, i: usize) -> u64 {
        self.rows.ext[i]
    }
    /// Whether node `i` is live at `epoch`.
    pub(crate) fn visible(&self, i: usize, epoch: u32) -> bool {
        self.rows.visible(i, epoch)
    }
    /// The nodes a greedy search for `query` (list size `l`) expands in the delta graph, with
    /// their exact distances: insertion candidates among the other new vectors.
    pub(crate) fn expanded(
        &self,
        query: &[T],
        l: usize,
        scratch: &mut SearchScratch,
    ) -> Vec<Neighbor> {
        if self.rows.n() == 0 {
            return Vec::new();
        }
        let store = self.rows.store(self.dim, self.metric);
        let probe = store.query(query);
        greedy(&self.rows.graph, &store, &probe, 0, l, true, scratch);
        scratch.expanded.clone()
    }
}

/// Bytes one vector of `dim` values of `elem_bytes` each takes in a delta whose graph has
/// `slots` neighbour slots per node (its row, norms, id, stamps and graph row), and the
/// factor its arrays' growth by doubling is planned at: while one grows, the old and the new
/// array (twice as long) are held together.
pub(crate) fn vector_bytes(dim: usize, elem_bytes: usize, slots: usize) -> u64 {
    3 * ((dim * elem_bytes) as u64 + 24 + SlotGraph::bytes_for(1, slots))
}

impl Delta {
    /// An empty delta for vectors of `dtype` × `dim` under `metric`, linked with `cfg`.
    pub(crate) fn new(dtype: DType, dim: usize, metric: Metric, cfg: VamanaConfig) -> Self {
        let rows = match dtype {
            DType::F32 => AnyRows::F32(Rows::new(&cfg)),
            DType::U8 => AnyRows::U8(Rows::new(&cfg)),
            DType::I8 => AnyRows::I8(Rows::new(&cfg)),
        };
        Self {
            dim,
            metric,
            cfg,
            inner: RwLock::new(rows),
            attrs: RwLock::new(None),
        }
    }

    /// Gives the nodes from `first` on the attributes `a` (one row per node).
    pub(crate) fn set_attrs(&self, first: usize, a: &Attributes) -> Result<(), FilterError> {
        let mut g = self.attrs.write();
        let at =
            u32::try_from(first).map_err(|_| FilterError::Attrs(format!("{first} delta nodes")))?;
        let cur = g.clone().unwrap_or_else(|| Arc::new(Attributes::empty(0)));
        *g = Some(Arc::new(cur.appended(at, a)?));
        Ok(())
    }

    /// The nodes' attributes, covering every node there is now and knowing the label keys
    /// and fields of `schema` (extended in place when they do not yet); `None` when no node
    /// has attributes and there is no schema.
    pub(crate) fn attrs_for(&self, schema: Option<&Attributes>) -> Option<Arc<Attributes>> {
        let n = u32::try_from(self.len()).unwrap_or(u32::MAX);
        let cur = self.attrs.read().clone();
        let fits = |a: &Attributes| a.n() >= n && schema.is_none_or(|s| a.has_schema_of(s));
        if let Some(a) = &cur {
            if fits(a) {
                return cur;
            }
        }
        let mut g = self.attrs.write();
        let base = g
            .clone()
            .or_else(|| schema.map(|_| Arc::new(Attributes::empty(0))))?;
        if fits(&base) {
            return Some(base);
        }
        let mut a = if base.n() < n {
            base.appended(n, &Attributes::empty(0)).ok()?
        } else {
            (*base).clone()
        };
        if let Some(s) = schema {
            a.extend_schema(s);
        }
        let a = Arc::new(a);
        *g = Some(a.clone());
        Some(a)
    }

    /// Nodes, deleted ones included.
    pub(crate) fn len(&self) -> usize {
        match &*self.inner.read() {
            AnyRows::F32(r) => r.n(),
            AnyRows::U8(r) => r.n(),
            AnyRows::I8(r) => r.n(),
        }
    }

    /// Bytes held (vectors, graph, ids and stamps).
    pub(crate) fn heap_bytes(&self) -> u64 {
        fn of<T: Element>(r: &Rows<T>) -> u64 {
            (r.rows.capacity() * std::mem::size_of::<T>()
                + (r.norms.capacity() + r.lift.capacity()) * 4
                + r.ext.capacity() * 8
                + (r.born.capacity() + r.dead.capacity()) * 4) as u64
                + SlotGraph::bytes_for(r.graph.node_count(), r.graph.slots())
        }
        let attrs = self.attrs.read().as_ref().map_or(0, |a| a.memory_bytes());
        attrs
            + match &*self.inner.read() {
                AnyRows::F32(r) => of(r),
                AnyRows::U8(r) => of(r),
                AnyRows::I8(r) => of(r),
            }
    }

    /// The nodes' attributes as they are (rows may stop short of the nodes: those past
    /// them have none).
    pub(crate) fn attrs(&self) -> Option<Arc<Attributes>> {
        self.attrs.read().clone()
    }

    /// Appends `ext.len()` vectors (`rows`, row-major, of the delta's element type) born at
    /// `epoch`, linking them into the graph `LINK_CHUNK` at a time. Returns the index of the
    /// first new node.
    pub(crate) fn insert<T: DeltaElement>(
        &self,
        ext: &[u64],
        rows: &[T],
        epoch: u32,
        ctl: &Control,
    ) -> Result<usize, BuildError> {
        let first = self.len();
        for (c, ids) in ext.chunks(LINK_CHUNK).enumerate() {
            let at = c * LINK_CHUNK * self.dim;
            let chunk = &rows[at..at + ids.len() * self.dim];
            let mut g = self.inner.write();
            let r = T::rows_mut(&mut g).ok_or(BuildError::Empty)?;
            let start = r.n();
            r.rows.extend_from_slice(chunk);
            for row in chunk.chunks_exact(self.dim) {
                if self.metric != Metric::L2 {
                    r.norms.push(VectorStore::<T>::row_norm(self.metric, row));
                }
            }
            if self.metric == Metric::InnerProduct {
                let m = r.norms.iter().copied().fold(0f32, f32::max);
                if m > r.max_norm_sq || r.lift.len() != start {
                    r.max_norm_sq = m;
                    r.lift.clear();
                    r.lift
                        .extend(r.norms.iter().map(|&s| (m - s).max(0.0).sqrt()));
                } else {
                    r.lift
                        .extend(r.norms[start..].iter().map(|&s| (m - s).max(0.0).sqrt()));
                }
            }
            r.ext.extend_from_slice(ids);
            r.born.extend(std::iter::repeat_n(epoch, ids.len()));
            r.dead.extend((0..ids.len()).map(|_| AtomicU32::new(0)));
            let n = r.n();
            if r.graph.node_count() < n {
                let cap = (2 * r.graph.node_count()).max(n).max(1024);
                r.graph = r.graph.grown(cap);
            }
            let points: Vec<u32> = (start as u32..n as u32).collect();
            // Link under a read lock: the rows are in place, and the graph takes concurrent
            // readers (as in the build, searches read lists while links write them). Holding
            // the write lock here deadlocked: `link_points` broadcasts to the rayon pool, whose
            // workers may be running searches waiting for this very lock.
            let g = parking_lot::RwLockWriteGuard::downgrade(g);
            let r = T::rows(&g).ok_or(BuildError::Empty)?;
            let store = r.store(self.dim, self.metric);
            if points.len() < DETERMINISTIC_BELOW {
                // Small batches link on a one-thread pool of their own: the graph is then the
                // same whoever replays the log with however many threads (a writer and the
                // readers that replay its log search identical deltas), at a cost far below
                // the linking itself.
                match rayon::ThreadPoolBuilder::new().num_threads(1).build() {
                    Ok(pool) => {
                        pool.install(|| link_points(&store, &r.graph, &self.cfg, 0, &points, ctl))?;
                    }
                    Err(_) => {
                        link_points(&store, &r.graph, &self.cfg, 0, &points, ctl)?;
                    }
                }
            } else {
                link_points(&store, &r.graph, &self.cfg, 0, &points, ctl)?;
            }
        }
        Ok(first)
    }

    /// Stamps the nodes `nodes` deleted at `epoch` (a node already deleted keeps its first
    /// stamp) and, when `unlink`, takes the newly deleted ones out of the graph in place
    /// (IP-DiskANN; see [`unlink`]). A frozen delta, which a running merge reads, is stamped
    /// only.
    pub(crate) fn delete(&self, nodes: &[usize], epoch: u32, unlink: bool) -> Unlinked {
        let g = self.inner.read();
        match &*g {
            AnyRows::F32(r) => self.delete_in(r, nodes, epoch, unlink),
            AnyRows::U8(r) => self.delete_in(r, nodes, epoch, unlink),
            AnyRows::I8(r) => self.delete_in(r, nodes, epoch, unlink),
        }
    }

    fn delete_in<T: Element>(
        &self,
        r: &Rows<T>,
        nodes: &[usize],
        epoch: u32,
        unlink: bool,
    ) -> Unlinked {
        let mut gone = Vec::with_capacity(nodes.len());
        for &i in nodes {
            let stamped = r.dead.get(i).is_some_and(|d| {
                d.compare_exchange(0, epoch, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            });
            if stamped {
                gone.push(i as u32);
            }
        }
        if !unlink || gone.is_empty() {
            return Unlinked::default();
        }
        unlink_in_place(r, &r.store(self.dim, self.metric), &self.cfg, &gone)
    }

    /// Nodes live at `epoch`.
    pub(crate) fn live(&self, epoch: u32) -> usize {
        fn of<T: Element>(r: &Rows<T>, e: u32) -> usize {
            (0..r.n()).filter(|&i| r.visible(i, e)).count()
        }
        match &*self.inner.read() {
            AnyRows::F32(r) => of(r, epoch),
            AnyRows::U8(r) => of(r, epoch),
            AnyRows::I8(r) => of(r, epoch),
        }
    }

    /// The `k` live nodes nearest to `query` found by a greedy search with list size `l`, as
    /// `(id, exact distance)`, nearest first.
    pub(crate) fn search<T: DeltaElement>(
        &self,
        query: &[T],
        k: usize,
        l: usize,
        epoch: u32,
        scratch: &mut SearchScratch,
        out: &mut Vec<(u64, f32)>,
    ) {
        out.clear();
        let g = self.inner.read();
        let Some(r) = T::rows(&g) else { return };
        if r.n() == 0 {
            return;
        }
        let store = r.store(self.dim, self.metric);
        let probe = store.query(query);
        greedy(&r.graph, &store, &probe, 0, l.max(k), false, scratch);
        for nb in scratch.list.iter() {
            let i = nb.id as usize;
            if i < r.n() && r.visible(i, epoch) {
                let row = &r.rows[i * self.dim..(i + 1) * self.dim];
                out.push((r.ext[i], kernels::distance(self.metric, query, row)));
                if out.len() == k {
                    break;
                }
            }
        }
        out.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    }

    /// Every live node within `radius` of `query` (and matching `filter`, compiled against
    /// `attrs`), as `(id, exact distance)`, nearest first: an exact scan (a delta is small and
    /// in memory). Returns the number of nodes the filter matches (0 without one).
    pub(crate) fn range_scan<T: DeltaElement>(
        &self,
        query: &[T],
        radius: f32,
        epoch: u32,
        filter: Option<(&Expr, &Attributes)>,
        out: &mut Vec<(u64, f32)>,
    ) -> Result<u64, FilterError> {
        out.clear();
        let pred = match filter {
            Some((f, a)) => Some(Predicate::compile(f, a)?),
            None => None,
        };
        let g = self.inner.read();
        let Some(r) = T::rows(&g) else { return Ok(0) };
        let n = match filter {
            Some((_, a)) => r.n().min(a.n() as usize),
            None => r.n(),
        };
        for i in 0..n {
            if !r.visible(i, epoch) || pred.as_ref().is_some_and(|p| !p.matches(i as u32)) {
                continue;
            }
            let d = kernels::distance(
                self.metric,
                query,
                &r.rows[i * self.dim..(i + 1) * self.dim],
            );
            if d <= radius {
                out.push((r.ext[i], d));
            }
        }
        out.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        Ok(pred.map_or(0, |p| p.count().rows))
    }

    /// The `k` live nodes nearest to `query` that match `filter` (compiled against `attrs`,
    /// from [`Delta::attrs_for`]), as `(id, exact distance)`, nearest first: the matching
    /// nodes scanned exactly when they are few, else a greedy search whose list grows with
    /// the filter's rarity (non-matching nodes traversed, never returned). Returns the number
    /// of nodes the filter matches.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn search_where<T: DeltaElement>(
        &self,
        query: &[T],
        k: usize,
        l: usize,
        epoch: u32,
        filter: &Expr,
        attrs: &Attributes,
        scratch: &mut SearchScratch,
        out: &mut Vec<(u64, f32)>,
    ) -> Result<u64, FilterError> {
        out.clear();
        let pred = Predicate::compile(filter, attrs)?;
        let g = self.inner.read();
        let Some(r) = T::rows(&g) else { return Ok(0) };
        let n = r.n().min(attrs.n() as usize);
        let keep = |i: usize| i < n && r.visible(i, epoch) && pred.matches(i as u32);
        let count = pred.count().rows;
        let dist = |i: usize| {
            kernels::distance(
                self.metric,
                query,
                &r.rows[i * self.dim..(i + 1) * self.dim],
            )
        };
        if count <= DELTA_EXACT_UP_TO {
            for i in pred.collect().iter().map(|i| i as usize) {
                if keep(i) {
                    out.push((r.ext[i], dist(i)));
                }
            }
        } else if n > 0 {
            let sel = (count as f64 / n as f64).clamp(1e-6, 1.0);
            let list = ((l.max(k) as f64 / sel).ceil() as usize).clamp(l.max(k), DELTA_MAX_LIST);
            let store = r.store(self.dim, self.metric);
            let probe = store.query(query);
            greedy(&r.graph, &store, &probe, 0, list, false, scratch);
            for nb in scratch.list.iter() {
                if keep(nb.id as usize) {
                    out.push((r.ext[nb.id as usize], dist(nb.id as usize)));
                }
            }
        }
        out.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        out.truncate(k);
        Ok(count)
    }

    /// Runs `f` over a read-only view of the delta (`None` when `T` is not its element type).
    pub(crate) fn view<T: DeltaElement, R>(
        &self,
        f: impl FnOnce(DeltaView<'_, T>) -> R,
    ) -> Option<R> {
        let g = self.inner.read();
        let rows = T::rows(&g)?;
        Some(f(DeltaView {
            rows,
            dim: self.dim,
            metric: self.metric,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vamana::VamanaParams;

    fn cfg() -> VamanaConfig {
        VamanaParams {
            r: 16,
            l: 32,
            ..VamanaParams::default()
        }
        .validate()
        .unwrap()
    }

    #[test]
    fn inserted_vectors_are_found_at_their_epoch_and_hidden_when_deleted() {
        let dim = 8usize;
        let n = 700usize;
        let rows: Vec<f32> = (0..(n * dim) as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f32 / 1e5)
            .collect();
        let ids: Vec<u64> = (0..n as u64).map(|i| 1000 + i).collect();
        let d = Delta::new(DType::F32, dim, Metric::L2, cfg());
        d.insert(&ids, &rows, 2, &Control::silent()).unwrap();
        assert_eq!(d.len(), n);
        let mut s = SearchScratch::new(0);
        let mut out = Vec::new();
        // Before its epoch nothing is visible.
        d.search(&rows[..dim], 1, 32, 1, &mut s, &mut out);
        assert!(out.is_empty());
        let mut found = 0;
        for i in 0..n {
            d.search(&rows[i * dim..(i + 1) * dim], 1, 32, 2, &mut s, &mut out);
            if out.first().is_some_and(|h| h.0 == ids[i] && h.1 == 0.0) {
                found += 1;
            }
        }
        assert!(found >= n * 99 / 100, "found {found} of {n}");
        // Stamped only: a search at an epoch before the deletion still reaches the node.
        d.delete(&[5], 3, false);
        d.search(&rows[5 * dim..6 * dim], 3, 32, 2, &mut s, &mut out);
        assert_eq!(
            out[0].0, ids[5],
            "still visible before the deletion's epoch"
        );
        d.search(&rows[5 * dim..6 * dim], 3, 32, 3, &mut s, &mut out);
        assert!(out.iter().all(|h| h.0 != ids[5]));
        assert_eq!(d.live(3), n - 1);
        assert_eq!(d.live(2), n);
    }

    /// `n` pseudo-random points of `dim` (row-major, from the multiplier `mult`) and ids 0..n.
    fn points(n: usize, dim: usize, mult: u64) -> (Vec<f32>, Vec<u64>) {
        let rows = (0..(n * dim) as u64)
            .map(|i| (i.wrapping_mul(mult) >> 40) as f32 / 1e5)
            .collect();
        (rows, (0..n as u64).collect())
    }

    /// A delta holding `rows`, inserted 300 at a time at epoch 1.
    fn filled(rows: &[f32], ids: &[u64], dim: usize) -> Delta {
        let d = Delta::new(DType::F32, dim, Metric::L2, cfg());
        for (c, chunk) in ids.chunks(300).enumerate() {
            let at = c * 300 * dim;
            let part = &rows[at..at + chunk.len() * dim];
            d.insert(chunk, part, 1, &Control::silent()).unwrap();
        }
        d
    }

    /// The lists of every node of an f32 delta.
    fn lists(d: &Delta) -> Vec<Vec<u32>> {
        let g = d.inner.read();
        let AnyRows::F32(r) = &*g else {
            panic!("an f32 delta")
        };
        (0..r.n() as u32)
            .map(|i| {
                let mut l = Vec::new();
                r.graph.neighbors_into(i, &mut l);
                l
            })
            .collect()
    }

    #[test]
    fn deleted_delta_nodes_lose_every_in_edge_and_the_rest_stay_findable() {
        let (dim, n) = (8, 1500usize);
        let (rows, ids) = points(n, dim, 0x9E37_79B9_7F4A_7C15);
        // Two deltas fed the same operations (as a writer and a reader replaying its log).
        let (d, twin) = (filled(&rows, &ids, dim), filled(&rows, &ids, dim));
        // One in seven deleted, in three calls; node 0 (the entry) among them.
        let gone: Vec<usize> = (0..n).filter(|i| i.is_multiple_of(7)).collect();
        let is_gone = |v: u32| (v as usize).is_multiple_of(7);
        let before = lists(&d);
        let mut got = Unlinked::default();
        let mut own = vec![Vec::new(); n];
        for (k, part) in gone.chunks(gone.len() / 3 + 1).enumerate() {
            // The edges from live nodes to this call's nodes, by a scan of the lists now
            // (replacements an earlier call added may point to them).
            let now = lists(&d);
            for &p in part {
                own[p].clone_from(&now[p]);
            }
            let dead_before = |v: u32| is_gone(v) && (v as usize) < part[0];
            let mine = |v: u32| part.contains(&(v as usize));
            let expect: u64 = (0..n as u32)
                .filter(|&z| !dead_before(z) && !mine(z))
                .map(|z| now[z as usize].iter().filter(|&&v| mine(v)).count() as u64)
                .sum();
            assert!(
                expect > 200,
                "{expect} in-edges: too few for the check to mean anything"
            );
            let u = d.delete(part, 2 + k as u32, true);
            assert_eq!(u.in_edges, expect, "every in-edge is found, exactly");
            assert_eq!(twin.delete(part, 2 + k as u32, true), u);
            got.replacement_edges += u.replacement_edges;
        }
        assert!(got.replacement_edges > 0);
        let after = lists(&d);
        assert_eq!(
            after,
            lists(&twin),
            "the same operations give the same graph"
        );
        let slots = cfg().slots;
        for z in (0..n).filter(|&z| !is_gone(z as u32)) {
            assert!(
                after[z].iter().all(|&v| !is_gone(v)),
                "node {z} still points to a deleted node: {:?}",
                after[z]
            );
            assert!(after[z].len() <= slots);
            if !before[z].iter().any(|&v| is_gone(v)) {
                assert_eq!(after[z], before[z], "node {z} had no deleted neighbour");
            }
        }
        // Deleted nodes keep their lists as they were at their deletion (node 0 still leads
        // searches out).
        for &z in &gone {
            assert_eq!(after[z], own[z]);
        }
        let mut s = SearchScratch::new(0);
        let mut out = Vec::new();
        let e = 2 + 3;
        let live: Vec<usize> = (0..n).filter(|&i| !is_gone(i as u32)).collect();
        let mut found = 0;
        for &i in &live {
            d.search(&rows[i * dim..(i + 1) * dim], 1, 32, e, &mut s, &mut out);
            if out.first().is_some_and(|h| h.0 == ids[i]) {
                found += 1;
            }
        }
        assert!(
            found >= live.len() * 98 / 100,
            "found {found} of {}",
            live.len()
        );
        assert_eq!(d.live(e), live.len());
        // A second delete of the same nodes changes nothing.
        assert_eq!(d.delete(&gone, e + 1, true), Unlinked::default());
    }

    #[test]
    fn single_deletes_of_a_large_delta_find_their_in_neighbours_by_search() {
        let (dim, n) = (8, 3000usize);
        let (rows, ids) = points(n, dim, 0x2545_F491_4F6C_DD1D);
        let d = filled(&rows, &ids, dim);
        let gone: Vec<usize> = (1..n).filter(|i| i.is_multiple_of(11)).collect();
        let (mut truth, mut found) = (0u64, 0u64);
        for (k, &p) in gone.iter().enumerate() {
            let now = lists(&d);
            let dead_before = |v: usize| v.is_multiple_of(11) && v != 0 && v < p;
            truth += (0..n)
                .filter(|&z| !dead_before(z) && z != p)
                .filter(|&z| now[z].contains(&(p as u32)))
                .count() as u64;
            let u = d.delete(&[p], 2 + k as u32, true);
            assert!(u.searched, "one delete of {n} nodes is searched for");
            found += u.in_edges;
        }
        assert!(
            truth > 500,
            "{truth} in-edges: too few for the check to mean anything"
        );
        assert!(
            found as f64 >= 0.8 * truth as f64,
            "the searches found {found} of {truth} in-edges"
        );
        let after = lists(&d);
        let left: u64 = (0..n)
            .filter(|&z| z == 0 || !z.is_multiple_of(11))
            .map(|z| {
                after[z]
                    .iter()
                    .filter(|&&v| v != 0 && v.is_multiple_of(11))
                    .count() as u64
            })
            .sum();
        assert!(
            left <= truth - found,
            "{left} edges to deleted nodes left, {} not found",
            truth - found
        );
        let e = 2 + gone.len() as u32;
        let (mut s, mut out, mut hit) = (SearchScratch::new(0), Vec::new(), 0);
        let live: Vec<usize> = (0..n)
            .filter(|&i| i == 0 || !i.is_multiple_of(11))
            .collect();
        for &i in &live {
            d.search(&rows[i * dim..(i + 1) * dim], 1, 32, e, &mut s, &mut out);
            if out.first().is_some_and(|h| h.0 == ids[i]) {
                hit += 1;
            }
        }
        assert!(
            hit >= live.len() * 98 / 100,
            "found {hit} of {}",
            live.len()
        );
    }
}
