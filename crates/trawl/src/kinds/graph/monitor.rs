//! The recall monitor: a build (and every merge) searches a seeded sample of the index's own
//! vectors as queries, with the default search settings at a few list sizes, against exact
//! ground truth over the index's vectors, and records recall@10 in the manifest. Each query's
//! own slot is hidden from its search (never expanded nor returned, [`DiskIndex::search_rows_hiding`])
//! and left out of its truth, so the query behaves as a held-out one: the figure is the recall
//! of its ten other nearest neighbours. (Left in the traversal, the own node — reached at
//! distance 0 — hands the search its exact neighbourhood through its list, and the figure
//! overstated held-out recall by 4.4 points on GloVe-400K at L 32.) The medoid, where every
//! search starts, is never sampled.
//! `trawl info` shows it; a merge whose figure falls more than [`DROP_WARN`] below the last
//! build's says so in its report.

use rand::SeedableRng;

use crate::data::Matrix;
use crate::kernels::Element;
use crate::kinds::graph::search::SearchParams;
use crate::kinds::graph::DiskIndex;
use crate::progress::Control;
use crate::search::SearchError;

/// Vectors sampled as queries (all of them in a smaller index).
pub const SAMPLES: usize = 300;
/// List sizes searched.
pub const LIST_SIZES: [usize; 3] = [32, 64, 128];
/// Neighbours whose recall is measured.
pub const K: usize = 10;
/// A merge whose recall at any list size falls more than this below the last build's warns.
pub const DROP_WARN: f64 = 0.02;
/// Seed of the sample.
const SEED: u64 = 0x7265_6361_6c6c;

pub use crate::dir::manifest::{RecallPoint, RecallRecord};

impl RecallRecord {
    /// `recall@10 0.9512 at L 32, …`: the current figures in words.
    pub fn describe_points(&self) -> String {
        describe_points(&self.points)
    }
}

/// `recall@10 0.9512 at L 32, …`: figures in words.
pub fn describe_points(p: &[RecallPoint]) -> String {
    let parts: Vec<String> = p
        .iter()
        .map(|x| format!("{:.4} at L {}", x.recall, x.l))
        .collect();
    format!("recall@10 {}", parts.join(", "))
}

impl RecallRecord {
    /// A merge's record: its figures, the last build's kept.
    pub fn after_merge(points: Vec<RecallPoint>, samples: usize, last: Option<&Self>) -> Self {
        Self {
            samples,
            beam_width: crate::kinds::graph::search::DEFAULT_BEAM_WIDTH,
            build: last.map_or_else(|| points.clone(), |l| l.build.clone()),
            points,
            by: "merge".into(),
        }
    }

    /// The list sizes at which recall fell more than [`DROP_WARN`] below the last build's, as
    /// a sentence (`None` when it did not).
    pub fn drop_warning(&self) -> Option<String> {
        let drops: Vec<String> = self
            .points
            .iter()
            .filter_map(|p| {
                let b = self.build.iter().find(|b| b.l == p.l)?;
                (p.recall < b.recall - DROP_WARN)
                    .then(|| format!("L {}: {:.4} (build {:.4})", p.l, p.recall, b.recall))
            })
            .collect();
        (!drops.is_empty()).then(|| {
            format!(
                "sampled recall@10 fell more than {:.0} points below the last build's — {}; a \
                 rebuild (`trawl build`) restores the build's graph",
                DROP_WARN * 100.0,
                drops.join(", ")
            )
        })
    }
}

/// Measures the recall of `ix` on a seeded sample of its slots that `live` accepts, `row(s)`
/// being slot `s`'s vector. Returns the figures and the number of queries (0 figures for an
/// index with fewer than `K + 1` live vectors).
pub fn measure<'v, T: Element>(
    ix: &DiskIndex,
    row: &(dyn Fn(u32) -> &'v [T] + Sync),
    live: &(dyn Fn(u32) -> bool + Sync),
) -> Result<(Vec<RecallPoint>, usize), SearchError> {
    measure_samples(ix, row, live, SAMPLES)
}

/// [`measure`] with `samples` queries instead of [`SAMPLES`].
pub fn measure_samples<'v, T: Element>(
    ix: &DiskIndex,
    row: &(dyn Fn(u32) -> &'v [T] + Sync),
    live: &(dyn Fn(u32) -> bool + Sync),
    samples: usize,
) -> Result<(Vec<RecallPoint>, usize), SearchError> {
    let slots: Vec<u32> = (0..ix.n() as u32).filter(|&s| live(s)).collect();
    if slots.len() <= K + 1 {
        return Ok((Vec::new(), 0));
    }
    // The queries: live slots other than the medoid (a query hiding the node every search
    // starts from would find nothing).
    let medoid = ix.medoid();
    let candidates: Vec<u32> = slots.iter().copied().filter(|&s| s != medoid).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(SEED);
    let mut sample: Vec<u32> =
        rand::seq::index::sample(&mut rng, candidates.len(), samples.min(candidates.len()))
            .into_iter()
            .map(|i| candidates[i])
            .collect();
    sample.sort_unstable();
    let truth = truth(ix, row, &slots, &sample, TRUTH_BLOCK)?;
    let dim = ix.dim();
    let mut rows = Vec::with_capacity(sample.len() * dim);
    for &q in &sample {
        rows.extend_from_slice(row(q));
    }
    let hidden: std::sync::Arc<[u32]> = sample.clone().into();
    let mut points = Vec::new();
    for &l in &LIST_SIZES {
        let p = SearchParams::beam(K, l.max(K), crate::kinds::graph::search::DEFAULT_BEAM_WIDTH);
        let out = ix.search_rows_hiding(
            &rows,
            &p,
            rayon::current_num_threads().max(1),
            hidden.clone(),
        )?;
        let mut hit = 0usize;
        for (i, (&q, t)) in sample.iter().zip(&truth).enumerate() {
            let found = &out.ids[i * K..(i + 1) * K];
            if found.contains(&q) {
                return Err(crate::search::SearchError::Internal(format!(
                    "the recall monitor's query {q} found its own hidden node"
                )));
            }
            hit += found.iter().filter(|s| t.contains(s)).count();
        }
        // Six decimals: what the manifest's JSON keeps exactly.
        let recall = hit as f64 / (K * sample.len()) as f64;
        points.push(RecallPoint {
            l,
            recall: (recall * 1e6).round() / 1e6,
        });
    }
    Ok((points, sample.len()))
}

/// Each sampled vector's `K` nearest other live slots, ties by slot: the exact module's
/// blocked search ([`crate::exact::knn`]) over the live slots' vectors, `block` slots at a
/// time (only one block is copied out at once), the blocks' lists merged.
fn truth<'v, T: Element>(
    ix: &DiskIndex,
    row: &(dyn Fn(u32) -> &'v [T] + Sync),
    slots: &[u32],
    sample: &[u32],
    block: usize,
) -> Result<Vec<Vec<u32>>, SearchError> {
    let dim = ix.dim();
    let internal = |e: String| SearchError::Internal(format!("the recall monitor's truth: {e}"));
    let mut q = Vec::with_capacity(sample.len() * dim);
    for &s in sample {
        q.extend_from_slice(row(s));
    }
    let queries = Matrix::from_vec(q, dim).ok_or_else(|| internal("no queries".into()))?;
    let mut best: Vec<Vec<(f32, u32)>> = vec![Vec::with_capacity(2 * K + 2); sample.len()];
    for block in slots.chunks(block.max(1)) {
        let mut b = Vec::with_capacity(block.len() * dim);
        for &s in block {
            b.extend_from_slice(row(s));
        }
        let base = Matrix::from_vec(b, dim).ok_or_else(|| internal("empty block".into()))?;
        let gt = crate::exact::knn(
            &base,
            &queries,
            (K + 1).min(block.len()),
            ix.metric(),
            &crate::exact::ExactParams::default(),
            &Control::silent(),
        )
        .map_err(|e| internal(e.to_string()))?;
        for (i, list) in best.iter_mut().enumerate() {
            for j in 0..gt.k {
                let s = block[gt.ids[i * gt.k + j] as usize];
                if s != sample[i] {
                    list.push((gt.dists[i * gt.k + j], s));
                }
            }
        }
    }
    Ok(best
        .into_iter()
        .map(|mut l| {
            l.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            l.truncate(K);
            l.into_iter().map(|(_, s)| s).collect()
        })
        .collect())
}

/// Live slots per block of the recall monitor's exact truth.
const TRUTH_BLOCK: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(usize, f64)]) -> Vec<RecallPoint> {
        v.iter()
            .map(|&(l, recall)| RecallPoint { l, recall })
            .collect()
    }

    /// The blocked truth equals a brute-force scan (ties by slot), over live slots with holes
    /// and exact duplicates, in blocks smaller than the data.
    #[test]
    fn the_truth_is_every_sample_s_nearest_other_live_slots() {
        use crate::kernels::{distance, DType, Metric};
        use crate::synth::{generate, SynthParams};
        let (base, _) = generate::<f32>(&SynthParams::new(2500, 1, 12, DType::F32, 3)).unwrap();
        let dim = base.dim();
        // Duplicates: ties at distance 0 and equal distances to everything.
        let mut v = base.as_slice().to_vec();
        for s in [100usize, 900, 2000] {
            v.copy_within(7 * dim..8 * dim, s * dim);
        }
        let base = Matrix::from_vec(v, dim).unwrap();
        for metric in [Metric::L2, Metric::Cosine, Metric::InnerProduct] {
            let dir = tempfile::tempdir().unwrap();
            let mut p = crate::kinds::graph::IndexParams {
                metric,
                ..Default::default()
            };
            p.graph.r = 8;
            p.graph.l = 16;
            p.pq.bytes_per_vector = 4;
            p.entry = None;
            crate::kinds::graph::build_index(&base, dir.path(), &p, &Control::silent()).unwrap();
            let ix = DiskIndex::open(dir.path(), Default::default()).unwrap();
            let row = |s: u32| base.row(s as usize);
            let slots: Vec<u32> = (0..2500u32).filter(|s| s % 5 != 3).collect();
            let sample: Vec<u32> = vec![7, 100, 11, 2001, 1234];
            let got = truth(&ix, &row, &slots, &sample, 700).unwrap();
            for (q, t) in sample.iter().zip(&got) {
                let mut all: Vec<(f32, u32)> = slots
                    .iter()
                    .filter(|&&s| s != *q)
                    .map(|&s| {
                        (
                            distance(metric, base.row(*q as usize), base.row(s as usize)),
                            s,
                        )
                    })
                    .collect();
                all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                let want: Vec<u32> = all[..K].iter().map(|x| x.1).collect();
                assert_eq!(t, &want, "{metric:?}, sample {q}");
            }
        }
    }

    #[test]
    fn a_merge_warns_only_below_the_builds_figure_by_more_than_two_points() {
        let build = RecallRecord {
            samples: 300,
            beam_width: 4,
            points: pts(&[(32, 0.95), (64, 0.98)]),
            by: "build".into(),
            build: pts(&[(32, 0.95), (64, 0.98)]),
        };
        let ok = RecallRecord::after_merge(pts(&[(32, 0.935), (64, 0.99)]), 300, Some(&build));
        assert_eq!(ok.build, build.build);
        assert_eq!(ok.by, "merge");
        assert_eq!(ok.drop_warning(), None);
        let bad = RecallRecord::after_merge(pts(&[(32, 0.92), (64, 0.975)]), 300, Some(&ok));
        let w = bad.drop_warning().unwrap();
        assert!(w.contains("L 32: 0.9200 (build 0.9500)"), "{w}");
        assert!(!w.contains("L 64"), "{w}");
        // Without a build record the merge's own figures are the reference.
        let first = RecallRecord::after_merge(pts(&[(64, 0.5)]), 10, None);
        assert_eq!(first.build, first.points);
    }
}
