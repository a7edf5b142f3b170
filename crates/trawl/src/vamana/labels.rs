//! The points' labels in a label-aware build (Filtered-DiskANN's FilteredVamana, Gollapudi et
//! al., WWW'23): which labels each point carries, and each label's start node.
//!
//! A label-aware build links each point as the plain build does (a greedy search from the
//! medoid), and also searches, for each of its tracked labels, the subgraph of that label
//! from the label's start node; the candidates of all searches are pruned together by
//! [`robust_prune_labelled`](crate::vamana::prune::robust_prune_labelled), which never lets a
//! candidate sharing a label with the point be occluded by one without it. So every label's
//! points stay linked to one another and reachable from the label's start node, however rare
//! the label: an inline filtered search started there walks through matches only.
//!
//! Only labels on at most [`defaults::LABEL_MAX_SHARE`] of the points are tracked (a search
//! restricted to a common label finds what the plain search finds), and each point searches at
//! most [`defaults::LABEL_SEARCHES`] of its labels, its rarest: the build does at most that
//! many more searches per point.

use crate::kernels::{Element, Metric};
use crate::progress::Control;
use crate::vamana::params::BuildError;
use crate::vamana::store::VectorStore;
use crate::vamana::{defaults, Adjacency};

/// No start node (a label the build does not track).
pub const NO_START: u32 = u32::MAX;

/// The labels a label-aware build links by: label `l`'s members for every tracked label,
/// each point's tracked labels, and after [`BuildLabels::choose_starts`] each label's start
/// node.
#[derive(Debug, Clone, Default)]
pub struct BuildLabels {
    /// Members of each label, ascending (empty for a label not tracked).
    members: Vec<Vec<u32>>,
    /// Each point's tracked labels, ascending: `ids[offsets[p]..offsets[p + 1]]`.
    offsets: Vec<usize>,
    ids: Vec<u32>,
    /// Start node of each label ([`NO_START`]: not tracked).
    starts: Vec<u32>,
}

impl BuildLabels {
    /// The labels of `n` points: `members[l]` lists the points carrying label `l` (ids below
    /// `n`, any order). Labels with fewer than 2 members or on more than `max_share` of the
    /// points are not tracked. Fails on a member past `n`.
    pub fn new(n: usize, mut members: Vec<Vec<u32>>, max_share: f64) -> Result<Self, BuildError> {
        let most = (max_share * n as f64).floor() as usize;
        let mut counts = vec![0usize; n + 1];
        for m in members.iter_mut() {
            m.sort_unstable();
            m.dedup();
            if m.len() < 2 || m.len() > most {
                m.clear();
                continue;
            }
            if let Some(&bad) = m.iter().find(|&&p| p as usize >= n) {
                return Err(BuildError::InvalidParam {
                    name: "labels",
                    reason: format!("a label of point {bad}, past the {n} points"),
                });
            }
            for &p in m.iter() {
                counts[p as usize + 1] += 1;
            }
        }
        for i in 1..=n {
            counts[i] += counts[i - 1];
        }
        let mut ids = vec![0u32; counts[n]];
        let mut fill = counts.clone();
        for (l, m) in members.iter().enumerate() {
            for &p in m {
                ids[fill[p as usize]] = l as u32;
                fill[p as usize] += 1;
            }
        }
        let starts = vec![NO_START; members.len()];
        Ok(Self {
            members,
            offsets: counts,
            ids,
            starts,
        })
    }

    /// Labels tracked (with at least 2 members, at most the share asked for).
    pub fn tracked(&self) -> usize {
        self.members.iter().filter(|m| !m.is_empty()).count()
    }

    /// Label occurrences of the tracked labels.
    pub fn occurrences(&self) -> usize {
        self.ids.len()
    }

    /// Point `p`'s tracked labels, ascending.
    #[inline]
    pub fn of(&self, p: u32) -> &[u32] {
        let p = p as usize;
        match (self.offsets.get(p), self.offsets.get(p + 1)) {
            (Some(&a), Some(&b)) => &self.ids[a..b],
            _ => &[],
        }
    }

    /// Whether point `p` carries label `l`.
    #[inline]
    pub fn has(&self, p: u32, l: u32) -> bool {
        self.of(p).binary_search(&l).is_ok()
    }

    /// Members of label `l` (empty when not tracked).
    pub fn members(&self, l: u32) -> &[u32] {
        self.members.get(l as usize).map_or(&[], |m| m)
    }

    /// Start node of each label ([`NO_START`] where none).
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// Makes `s` the start node of tracked label `l` (a merge keeps the start a label had
    /// while it stays). Ignored unless `l` is tracked and `s` carries it.
    pub fn set_start(&mut self, l: u32, s: u32) {
        let tracked = self.members(l).binary_search(&s).is_ok();
        if let (true, Some(at)) = (tracked, self.starts.get_mut(l as usize)) {
            *at = s;
        }
    }

    /// Bits of `labels` (a point's labels, the first 64) that point `q` carries.
    #[inline]
    pub fn mask(&self, labels: &[u32], q: u32) -> u64 {
        let theirs = self.of(q);
        if theirs.is_empty() {
            return 0;
        }
        let mut m = 0u64;
        for (i, l) in labels.iter().take(64).enumerate() {
            if theirs.binary_search(l).is_ok() {
                m |= 1 << i;
            }
        }
        m
    }

    /// The labels of `p` it searches from their start nodes: its rarest
    /// [`defaults::LABEL_SEARCHES`], into `out`.
    pub fn searched(&self, p: u32, out: &mut Vec<u32>) {
        out.clear();
        out.extend(
            self.of(p)
                .iter()
                .copied()
                .filter(|&l| self.starts[l as usize] != NO_START),
        );
        if out.len() > defaults::LABEL_SEARCHES {
            out.sort_by_key(|&l| (self.members[l as usize].len(), l));
            out.truncate(defaults::LABEL_SEARCHES);
        }
    }

    /// Chooses each tracked label's start node: the member nearest its members' centroid
    /// (the label's medoid, as [`medoid`](mod@crate::vamana::build) chooses the graph's), passing
    /// over nodes already the start of [`defaults::STARTS_PER_NODE`] labels (DiskANN's
    /// load-balanced choice), rarest label first. Deterministic.
    pub fn choose_starts<T: Element>(
        &mut self,
        store: &VectorStore<'_, T>,
        ctl: &Control,
    ) -> Result<(), BuildError> {
        use rayon::prelude::*;
        let mut order: Vec<u32> = (0..self.members.len() as u32)
            .filter(|&l| !self.members[l as usize].is_empty())
            .collect();
        order.sort_by_key(|&l| (self.members[l as usize].len(), l));
        // Each label's members by distance to its centroid, computed in parallel.
        let ranked: Vec<Vec<u32>> = order
            .par_iter()
            .map(|&l| by_centre(store, &self.members[l as usize]))
            .collect();
        ctl.check()?;
        let mut used = std::collections::HashMap::<u32, usize>::new();
        for (&l, ranked) in order.iter().zip(&ranked) {
            let pick = ranked
                .iter()
                .copied()
                .find(|p| used.get(p).copied().unwrap_or(0) < defaults::STARTS_PER_NODE)
                .or(ranked.first().copied())
                .unwrap_or(NO_START);
            *used.entry(pick).or_default() += 1;
            self.starts[l as usize] = pick;
        }
        Ok(())
    }
}

/// `members` ordered by distance to their centroid (nearest first; ties by id). For cosine
/// the centroid is that of the unit vectors and nearness is the cosine.
fn by_centre<T: Element>(store: &VectorStore<'_, T>, members: &[u32]) -> Vec<u32> {
    let dim = store.dim();
    let cosine = store.metric() == Metric::Cosine;
    let weight = |i: u32| {
        if cosine {
            store.pair_aux(i)
        } else {
            1.0
        }
    };
    let mut sum = vec![0f64; dim];
    for &i in members {
        let w = f64::from(weight(i));
        for (a, x) in sum.iter_mut().zip(store.row(i as usize)) {
            *a += w * f64::from(x.to_f32());
        }
    }
    let c: Vec<f32> = sum
        .iter()
        .map(|s| (s / members.len().max(1) as f64) as f32)
        .collect();
    let mut d: Vec<(f32, u32)> = members
        .iter()
        .map(|&i| {
            let row = store.row(i as usize);
            let v = if cosine {
                let dot: f32 = row.iter().zip(&c).map(|(x, c)| x.to_f32() * c).sum();
                -dot * store.pair_aux(i)
            } else {
                row.iter()
                    .zip(&c)
                    .map(|(x, c)| (x.to_f32() - c) * (x.to_f32() - c))
                    .sum()
            };
            (v, i)
        })
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    d.into_iter().map(|(_, i)| i).collect()
}

/// Per label of `labels`, whether its members are all reachable from its start node through
/// members only (the label's subgraph of `adj`); returns the labels that are not, with the
/// members left out. For tests and `trawl info`-style checks.
pub fn unreachable_in_label<A: Adjacency>(adj: &A, labels: &BuildLabels) -> Vec<(u32, usize)> {
    let mut out = Vec::new();
    let mut seen = vec![false; adj.node_count()];
    let mut stack = Vec::new();
    let mut nbrs = Vec::new();
    for (l, &s) in labels.starts.iter().enumerate() {
        let members = labels.members(l as u32);
        if s == NO_START || members.is_empty() {
            continue;
        }
        for &m in members {
            seen[m as usize] = false;
        }
        seen[s as usize] = true;
        stack.push(s);
        let mut reached = 1;
        while let Some(v) = stack.pop() {
            adj.neighbors_into(v, &mut nbrs);
            for &w in &nbrs {
                if !seen[w as usize] && labels.has(w, l as u32) {
                    seen[w as usize] = true;
                    reached += 1;
                    stack.push(w);
                }
            }
        }
        for &m in members {
            seen[m as usize] = false;
        }
        if reached < members.len() {
            out.push((l as u32, members.len() - reached));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Matrix;
    use crate::vamana::{build_labelled, VamanaParams};
    use rand::{Rng, SeedableRng};

    /// 3000 points in 8 dimensions; label 0 on 24 points spread at random over them, label 1
    /// on 400 (13%: not tracked).
    fn data() -> (Matrix<f32>, Vec<Vec<u32>>) {
        let (n, dim) = (3000usize, 8usize);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let rows: Vec<f32> = (0..n * dim).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let rare: Vec<u32> = (0..24).map(|i| (i * 3000 / 24 + 17) as u32).collect();
        let common: Vec<u32> = (0..400).map(|i| (i * 7) as u32).collect();
        (Matrix::from_vec(rows, dim).unwrap(), vec![rare, common])
    }

    fn params() -> VamanaParams {
        VamanaParams {
            r: 8,
            l: 24,
            ..VamanaParams::default()
        }
    }

    #[test]
    fn the_filtered_prune_keeps_a_path_for_a_rare_label() {
        let (m, members) = data();
        let ctl = Control::silent();
        let mut labels = BuildLabels::new(m.n(), members.clone(), 0.1).unwrap();
        assert_eq!(labels.tracked(), 1, "the 13% label is not tracked");
        assert!(labels.has(17, 0) && !labels.has(18, 0));
        // On one thread: the parallel build's linking order depends on timing, and this
        // property is checked on one graph, the same in every run.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let (g, st) = one
            .install(|| build_labelled(&m, Metric::L2, &params(), None, Some(&mut labels), &ctl))
            .unwrap();
        assert_eq!(st.label_starts, 1);
        assert!(st.label_searches >= 24);
        let s = labels.starts()[0];
        assert!(members[0].contains(&s));
        assert_eq!(labels.starts()[1], NO_START);
        // Every member of the rare label is reachable from its start through members only.
        assert_eq!(unreachable_in_label(&g, &labels), vec![]);

        // The plain graph of the same points leaves them apart: most members cannot be
        // reached from the start through members.
        let (plain, st) = build_labelled(&m, Metric::L2, &params(), None, None, &ctl).unwrap();
        assert_eq!(st.label_starts, 0);
        let lost = unreachable_in_label(&plain, &labels);
        assert!(
            lost.first().is_some_and(|&(l, k)| l == 0 && k > 12),
            "{lost:?}"
        );
        // And on one thread the plain build is the build without labels, edge for edge.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let (a, b) = one.install(|| {
            let a = build_labelled(&m, Metric::L2, &params(), None, None, &ctl).unwrap();
            let b = crate::vamana::build(&m, Metric::L2, &params(), &ctl).unwrap();
            (a.0, b.0)
        });
        assert!(a.ids == b.ids && a.degrees == b.degrees);
    }

    #[test]
    fn labels_past_the_points_are_refused_and_starts_spread_over_nodes() {
        assert!(BuildLabels::new(10, vec![vec![1, 10]], 1.0).is_err());
        // Twelve labels of the same 3 points: each point starts at most STARTS_PER_NODE.
        let m = Matrix::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], 1).unwrap();
        let mut labels = BuildLabels::new(6, vec![vec![1, 2, 3]; 12], 1.0).unwrap();
        let store = VectorStore::new(m.as_slice(), 1, Metric::L2).unwrap();
        labels.choose_starts(&store, &Control::silent()).unwrap();
        for p in 1..4u32 {
            let k = labels.starts().iter().filter(|&&s| s == p).count();
            assert_eq!(k, defaults::STARTS_PER_NODE);
        }
        let mut out = Vec::new();
        labels.searched(2, &mut out);
        assert_eq!(out.len(), defaults::LABEL_SEARCHES);
    }
}
