//! Keeping page nodes across updates (PageANN's updates): after a merge, the pages a layout
//! had are kept, the vectors deleted from them leave, and every new vector goes to the page
//! of its nearest graph neighbour; a full page splits in two ([`regroup`]). The page-level
//! lists are then merged again from the new graph ([`super::build::page_edges`]), so the
//! searches see every new edge; only the grouping is incremental.

use crate::kernels::{self, Element, Metric};
use crate::kinds::graph::layout::pages::build::Grouping;
use crate::kinds::graph::layout::pages::NO_PAGE;
use crate::kinds::graph::layout::shuffle::Csr;

/// What [`regroup`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PlaceReport {
    /// Vectors that stayed on their page.
    pub kept: u64,
    /// Vectors that left a page (deleted, or their slot now holds another vector).
    pub removed: u64,
    /// Pages left empty by the removals, dropped.
    pub dropped_pages: u64,
    /// New vectors placed on the page of a graph neighbour.
    pub placed: u64,
    /// Full pages split in two to take a new vector.
    pub splits: u64,
    /// New vectors with no placed neighbour, which started a page of their own.
    pub new_pages: u64,
}

/// The page nodes of a merged graph from the page nodes `prev` (member slots) it had:
/// - a slot stays on its page when `kept(slot)` (it holds the same vector as before);
/// - every other slot that `include`s a vector is new: it goes to the page of its nearest
///   (exact distance) out-neighbour that is on a page, new vectors whose neighbours are all
///   new waiting until one of them is placed; when none can be, the first waiting vector
///   starts a page of its own;
/// - a full page (`capacity` members) that takes a vector splits in two around its centre and
///   the member farthest from it, each member going to the nearer of the two, halves kept
///   balanced.
///
/// Pages that lose all their members are dropped; page numbers are those of the kept pages
/// in order, then the pages made.
#[allow(clippy::too_many_arguments)]
pub fn regroup<T: Element>(
    graph: &Csr,
    vectors: &[T],
    dim: usize,
    metric: Metric,
    capacity: usize,
    prev: &[Vec<u32>],
    kept: impl Fn(u32) -> bool,
    include: impl Fn(u32) -> bool,
) -> (Grouping, PlaceReport) {
    let n = graph.n();
    let capacity = capacity.max(1);
    let mut report = PlaceReport::default();
    let mut page_of = vec![NO_PAGE; n];
    let mut pages: Vec<Vec<u32>> = Vec::with_capacity(prev.len());
    for members in prev {
        let before = members.len();
        let keep: Vec<u32> = members
            .iter()
            .copied()
            .filter(|&s| {
                (s as usize) < n && include(s) && kept(s) && page_of[s as usize] == NO_PAGE
            })
            .collect();
        report.removed += (before - keep.len()) as u64;
        if keep.is_empty() {
            report.dropped_pages += 1;
            continue;
        }
        let p = pages.len() as u32;
        for &s in &keep {
            page_of[s as usize] = p;
        }
        report.kept += keep.len() as u64;
        pages.push(keep);
    }
    let vec_of = |id: u32| &vectors[id as usize * dim..(id as usize + 1) * dim];
    let mut waiting: Vec<u32> = (0..n as u32)
        .filter(|&s| include(s) && page_of[s as usize] == NO_PAGE)
        .collect();
    let mut still: Vec<u32> = Vec::new();
    while !waiting.is_empty() {
        let mut progress = false;
        still.clear();
        for &s in &waiting {
            let x = vec_of(s);
            let near = graph
                .row(s as usize)
                .iter()
                .filter(|&&u| page_of.get(u as usize).is_some_and(|&p| p != NO_PAGE))
                .map(|&u| (kernels::distance(metric, x, vec_of(u)), u))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let Some((_, u)) = near else {
                still.push(s);
                continue;
            };
            let p = page_of[u as usize] as usize;
            place(
                &mut pages,
                &mut page_of,
                p,
                s,
                capacity,
                &mut report,
                |a, b| kernels::distance(metric, vec_of(a), vec_of(b)),
            );
            report.placed += 1;
            progress = true;
        }
        std::mem::swap(&mut waiting, &mut still);
        if !progress {
            // No waiting vector has a placed neighbour: the first starts a page.
            let s = waiting.remove(0);
            page_of[s as usize] = pages.len() as u32;
            pages.push(vec![s]);
            report.new_pages += 1;
        }
    }
    (Grouping { page_of, pages }, report)
}

/// Puts `s` on page `p`, splitting the page when it is full.
fn place(
    pages: &mut Vec<Vec<u32>>,
    page_of: &mut [u32],
    p: usize,
    s: u32,
    capacity: usize,
    report: &mut PlaceReport,
    dist: impl Fn(u32, u32) -> f32,
) {
    if pages[p].len() < capacity {
        pages[p].push(s);
        page_of[s as usize] = p as u32;
        return;
    }
    report.splits += 1;
    let mut all = std::mem::take(&mut pages[p]);
    all.push(s);
    let a = all[0];
    let b = *all[1..]
        .iter()
        .max_by(|&&x, &&y| dist(a, x).total_cmp(&dist(a, y)).then(y.cmp(&x)))
        .expect("a full page has members");
    // Nearer to `a` first: the first half stays with `a`, the rest goes with `b`.
    let mut rest: Vec<(f32, u32)> = all
        .iter()
        .copied()
        .filter(|&x| x != a && x != b)
        .map(|x| (dist(a, x) - dist(b, x), x))
        .collect();
    rest.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let half = all.len().div_ceil(2) - 1;
    let mut first = vec![a];
    let mut second = vec![b];
    for (i, &(_, x)) in rest.iter().enumerate() {
        if i < half {
            first.push(x);
        } else {
            second.push(x);
        }
    }
    let q = pages.len() as u32;
    for &x in &second {
        page_of[x as usize] = q;
    }
    for &x in &first {
        page_of[x as usize] = p as u32;
    }
    pages[p] = first;
    pages.push(second);
}
