//! Default Vamana build parameters, each with the reason for its value.

/// Maximum out-degree `R`. 64 is DiskANN's usual in-memory setting for 10⁵–10⁸ points: recall
/// saturates around it for 50–200-d data while the graph stays at `n × 64 × 4` bytes.
pub const MAX_DEGREE: usize = 64;

/// Build-time search list size `L`. 100 is DiskANN's default `L_build` for `R = 64`; a larger
/// list finds better candidates at a linear cost in build time.
pub const BUILD_LIST_SIZE: usize = 100;

/// Pruning factor `α`. 1.2 keeps long-range edges that make greedy search converge in few hops
/// (Vamana paper, DiskANN default); `α = 1` gives the sparser relative-neighbourhood graph.
pub const ALPHA: f32 = 1.2;

/// Most candidates robust prune considers (`C`). DiskANN's default 750: the expanded pool of a
/// search with `L = 100` is far smaller, so it only bounds the back-edge re-prunes.
pub const MAX_CANDIDATES: usize = 750;

/// Back-edge slack: a node accepts back-edges without re-pruning until it has `slack × R`
/// neighbours. DiskANN's `GRAPH_SLACK_FACTOR` (1.3): re-prunes are the costliest step, and the
/// slack amortises them; the final pass prunes every list back to `R`.
pub const SLACK: f32 = 1.3;

/// Step by which the iterated prune raises its occlusion threshold from 1 up to `α`
/// (DiskANN's `occlude_list`).
pub const ALPHA_STEP: f32 = 1.2;

/// The order points are linked in: blocks of [`BUILD_CHUNK`] consecutive ids, the blocks in
/// a seeded random order. Id order (DiskANN's) builds a poor graph when the ids are grouped by
/// region: on gen-1M live sets made of whole k-means clusters, recall@10 at L 64 fell to
/// 0.80 against 0.93 in random order; a random order costs build time when ids are grouped
/// (57 s against 30 s for 500K × 128: neighbouring points no longer share cached rows), and
/// blocks of 64 keep both, 0.94 in 30 s (`bench/results/recall-stability.md`).
pub const VISIT_ORDER: crate::vamana::params::VisitOrder =
    crate::vamana::params::VisitOrder::Blocks(BUILD_CHUNK);

/// Seed of the visit order and of the shard clustering.
pub const SEED: u64 = 0x7261_776c;

/// Points a build thread takes from the shared cursor at a time: small enough to balance two
/// threads, large enough that task overhead is negligible.
pub const BUILD_CHUNK: usize = 64;

/// Points sampled to train the shard k-means of a budgeted build.
pub const SHARD_SAMPLE: usize = 100_000;

/// Shards each point belongs to in a budgeted build (DiskANN uses 2): the overlap is what
/// connects the shard graphs once merged.
pub const SHARD_OVERLAP: usize = 2;

/// Allowance for uneven shard sizes when choosing the number of shards: k-means clusters are
/// not balanced, and the largest shard must still fit the budget.
pub const SHARD_IMBALANCE: f64 = 1.6;

/// Nearest points of each sample query linked to one another by a build given a query sample
/// (`link_query_neighbours`): recall@10 is what the sample's edges are for.
pub const QUERY_EDGE_K: usize = 10;

/// Labels a label-aware build tracks: those on at most this share of the points. A search
/// restricted to a label that common finds what the plain search from the medoid finds, and
/// the inline filtered search reaches its points at a list only `1/share` times longer.
pub const LABEL_MAX_SHARE: f64 = 0.1;

/// Most labels of one point a label-aware build searches from their start nodes (the
/// rarest): the build does at most this many more searches per point.
pub const LABEL_SEARCHES: usize = 4;

/// Most labels whose start node one point is (DiskANN's load-balanced start nodes: a node's
/// `R` out-links must serve every label starting there).
pub const STARTS_PER_NODE: usize = 4;
