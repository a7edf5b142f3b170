//! Golden results: every layout × strategy × switch combination, searched on a committed index
//! (built by the binary before the search code was restructured, and before index manifests:
//! it also proves that such an index still opens), must return exactly the ids, the distance
//! bits and every I/O counter recorded in `fixtures/golden.txt`; the same for the IVF kind
//! (`golden-ivf.txt`, committed index), the sharded kind (`golden-sharded.txt`, committed
//! index) and a live index with inserts, deletes and a merge (`golden-live.txt`, made from the
//! committed graph index by a fixed sequence of updates).
//!
//! The memory engine makes the order of completions — and so every counter of PipeSearch —
//! deterministic. The page-packed index is committed; the other layouts are written from it in
//! a temporary copy (their writers are deterministic), so the fixture stays small.
//!
//! Regenerate (only when a change is *meant* to change results or counters, and say so):
//! `TRAWL_BLESS_GOLDEN=1 cargo test -p trawl --test golden`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use trawl::io::EngineKind;
use trawl::kinds::graph::search::{
    BeamParams, CachePolicy, FlashParams, Grain, PipeParams, RerankParams, SearchParams, Strategy,
    WidthPolicy,
};
use trawl::kinds::graph::{DiskIndex, IndexLayout, OpenOptions};
use trawl::progress::Control;
use trawl::search::QueryStats;

/// Counters compared (every exact one; times are left out).
const COUNTERS: [&str; 15] = [
    "pages_read",
    "io_requests",
    "bytes_read",
    "cache_hits",
    "hops",
    "nodes_expanded",
    "pq_distances",
    "exact_distances",
    "entry_distances",
    "wasted_reads",
    "records_read",
    "page_hits",
    "vector_reads",
    "prefetched",
    "rerank_batches",
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden-index")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn golden_path() -> PathBuf {
    fixtures().join("golden.txt")
}

fn bless() -> bool {
    std::env::var_os("TRAWL_BLESS_GOLDEN").is_some()
}

/// Builds the fixture index (once, single-threaded so it is reproducible).
fn make_fixture(dir: &Path) {
    use trawl::kinds::graph::search::entry::EntryParams;
    use trawl::kinds::graph::{build_index, IndexParams};
    use trawl::quant::pq::PqParams;
    use trawl::synth::{generate, SynthParams};
    use trawl::vamana::VamanaParams;
    let (base, _) =
        generate::<f32>(&SynthParams::new(1_000, 1, 16, trawl::DType::F32, 77)).unwrap();
    let params = IndexParams {
        attrs: None,
        metric: trawl::Metric::L2,
        graph: VamanaParams {
            r: 16,
            l: 32,
            ..VamanaParams::default()
        },
        pq: PqParams {
            bytes_per_vector: 8,
            ..PqParams::default()
        },
        quant: Default::default(),
        entry: Some(EntryParams {
            ratio: 0.03,
            ..EntryParams::default()
        }),
        label_aware: Default::default(),
    };
    std::fs::create_dir_all(dir).unwrap();
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| build_index(&base, dir, &params, &Control::silent()))
        .unwrap();
}

/// One search configuration of the golden run.
#[derive(Debug, Clone, Copy)]
struct Config {
    name: &'static str,
    layout: IndexLayout,
    /// `None`: beam search (or flash).
    pipe: Option<PipeParams>,
    /// `Some`: FlashANNS's batch search (with the CPU accelerator).
    flash: Option<FlashParams>,
    l: usize,
    w: usize,
    entry_list: usize,
    dynamic_width: bool,
    page_search: bool,
    /// Static cache: nodes and policy.
    cache: Option<(usize, CachePolicy)>,
    rerank: RerankParams,
    list_cache_bytes: u64,
    interleave: usize,
}

const BASE: Config = Config {
    name: "",
    layout: IndexLayout::Packed,
    pipe: None,
    flash: None,
    l: 20,
    w: 4,
    entry_list: 0,
    dynamic_width: false,
    page_search: false,
    cache: None,
    rerank: RerankParams {
        batch: 10,
        threshold: 0.01,
        prefetch: true,
        stable_window: 0,
        prefetch_on_converge: true,
        lookahead: 0,
        bound: 0.0,
        depth: 0,
        skip_eps: trawl::kinds::graph::search::rerank::DEFAULT_SKIP_EPS,
    },
    list_cache_bytes: 16 << 20,
    interleave: 1,
};

fn pipe(policy: WidthPolicy, max_width: usize) -> Option<PipeParams> {
    Some(PipeParams {
        policy,
        max_width,
        ..PipeParams::default()
    })
}

/// Flash configurations: name, staleness, batch, grain, strict steps.
const FLASH_CONFIGS: [(&str, usize, usize, Grain, usize); 4] = [
    ("flash-s0-b1", 0, 1, Grain::Query, 0),
    ("flash-s1-b8", 1, 8, Grain::Query, 0),
    ("flash-s2-b8-kernel", 2, 8, Grain::Kernel, 0),
    ("flash-s3-b16-strict4", 3, 16, Grain::Query, 4),
];

fn configs() -> Vec<Config> {
    let freq = CachePolicy::Frequency {
        sample_queries: 200,
        l: 15,
        beam_width: 4,
    };
    let mut out = Vec::new();
    for layout in [
        IndexLayout::Packed,
        IndexLayout::Shuffled,
        IndexLayout::AllInStorage,
    ] {
        let lname = layout.name();
        let c = Config { layout, ..BASE };
        let mut add = |suffix: &str, c: Config| {
            let name: &'static str = Box::leak(format!("{lname}/{suffix}").into_boxed_str());
            out.push(Config { name, ..c });
        };
        add("beam-L20-W4", c);
        add("beam-L40-W8", Config { l: 40, w: 8, ..c });
        add("beam-L40-W2", Config { l: 40, w: 2, ..c });
        add(
            "beam-dynwidth",
            Config {
                l: 40,
                w: 16,
                dynamic_width: true,
                ..c
            },
        );
        add(
            "beam-pagesearch",
            Config {
                l: 30,
                page_search: true,
                ..c
            },
        );
        add(
            "beam-cache-bfs",
            Config {
                cache: Some((60, CachePolicy::Bfs)),
                ..c
            },
        );
        add(
            "beam-cache-freq",
            Config {
                cache: Some((60, freq)),
                l: 30,
                ..c
            },
        );
        add(
            "beam-interleave4",
            Config {
                interleave: 4,
                l: 30,
                ..c
            },
        );
        add(
            "pipe-dynamic",
            Config {
                pipe: pipe(WidthPolicy::Dynamic, 32),
                l: 30,
                ..c
            },
        );
        add(
            "pipe-static",
            Config {
                pipe: pipe(WidthPolicy::Static, 16),
                l: 40,
                ..c
            },
        );
        add(
            "pipe-fixed8",
            Config {
                pipe: pipe(WidthPolicy::Fixed, 8),
                ..c
            },
        );
        add(
            "pipe-cache-bfs",
            Config {
                pipe: pipe(WidthPolicy::Dynamic, 32),
                cache: Some((60, CachePolicy::Bfs)),
                l: 30,
                ..c
            },
        );
        add(
            "pipe-interleave4",
            Config {
                pipe: pipe(WidthPolicy::Dynamic, 16),
                interleave: 4,
                l: 30,
                ..c
            },
        );
        // Flash reads whole records: the packed and PageShuffle layouts.
        let flash_configs = if layout == IndexLayout::AllInStorage {
            &[][..]
        } else {
            &FLASH_CONFIGS[..]
        };
        for &(suffix, staleness, batch, grain, strict) in flash_configs {
            add(
                suffix,
                Config {
                    flash: Some(FlashParams {
                        batch,
                        staleness,
                        grain,
                        strict_steps: strict,
                        ..FlashParams::default()
                    }),
                    l: 30,
                    ..c
                },
            );
        }
        if layout != IndexLayout::AllInStorage {
            add(
                "beam-entry",
                Config {
                    entry_list: 10,
                    l: 30,
                    ..c
                },
            );
            add(
                "pipe-entry",
                Config {
                    pipe: pipe(WidthPolicy::Dynamic, 32),
                    entry_list: 10,
                    l: 30,
                    ..c
                },
            );
            // OctopusANN's C5-like composition: MemGraph, cache, DynamicWidth, PageSearch.
            add(
                "beam-composed",
                Config {
                    entry_list: 10,
                    cache: Some((60, freq)),
                    dynamic_width: true,
                    page_search: true,
                    l: 30,
                    w: 8,
                    ..c
                },
            );
        }
    }
    let d = Config {
        layout: IndexLayout::Decoupled,
        ..BASE
    };
    let mut add = |suffix: &str, c: Config| {
        let name: &'static str = Box::leak(format!("decoupled/{suffix}").into_boxed_str());
        out.push(Config { name, ..c });
    };
    let all = RerankParams {
        threshold: 0.0,
        ..BASE.rerank
    };
    add("beam-L20", d);
    add("beam-L40-W8", Config { l: 40, w: 8, ..d });
    add("beam-readall", Config { rerank: all, ..d });
    add(
        "beam-nocache",
        Config {
            list_cache_bytes: 0,
            l: 30,
            ..d
        },
    );
    add(
        "beam-lookahead",
        Config {
            rerank: RerankParams {
                lookahead: 1,
                bound: 0.0,
                batch: 5,
                ..BASE.rerank
            },
            ..d
        },
    );
    add(
        "beam-noprefetch",
        Config {
            rerank: RerankParams {
                prefetch: false,
                prefetch_on_converge: false,
                ..BASE.rerank
            },
            l: 30,
            ..d
        },
    );
    add(
        "beam-stable-only",
        Config {
            rerank: RerankParams {
                prefetch_on_converge: false,
                stable_window: 3,
                ..BASE.rerank
            },
            l: 40,
            ..d
        },
    );
    add(
        "beam-bound",
        Config {
            rerank: RerankParams {
                bound: 1.0,
                ..BASE.rerank
            },
            l: 40,
            ..d
        },
    );
    add(
        "pipe-bound-depth",
        Config {
            pipe: pipe(WidthPolicy::Static, 16),
            rerank: RerankParams {
                bound: 2.0,
                depth: 16,
                ..BASE.rerank
            },
            l: 30,
            ..d
        },
    );
    add(
        "beam-dynwidth",
        Config {
            dynamic_width: true,
            w: 16,
            l: 30,
            ..d
        },
    );
    add(
        "beam-entry",
        Config {
            entry_list: 10,
            l: 30,
            ..d
        },
    );
    add(
        "beam-interleave4",
        Config {
            interleave: 4,
            l: 30,
            ..d
        },
    );
    add(
        "pipe-dynamic",
        Config {
            pipe: pipe(WidthPolicy::Dynamic, 32),
            l: 30,
            ..d
        },
    );
    add(
        "pipe-readall",
        Config {
            pipe: pipe(WidthPolicy::Fixed, 8),
            rerank: all,
            ..d
        },
    );
    add(
        "pipe-entry-nocache",
        Config {
            pipe: pipe(WidthPolicy::Static, 16),
            entry_list: 10,
            list_cache_bytes: 0,
            l: 30,
            ..d
        },
    );
    add(
        "pipe-interleave4",
        Config {
            pipe: pipe(WidthPolicy::Dynamic, 16),
            interleave: 4,
            l: 30,
            ..d
        },
    );
    out
}

fn search_params(c: &Config) -> SearchParams {
    SearchParams {
        k: 10,
        l: c.l,
        strategy: match (c.pipe, c.flash) {
            (Some(p), _) => Strategy::Pipe(p),
            (None, Some(f)) => Strategy::Flash(f),
            (None, None) => Strategy::Beam(BeamParams {
                width: c.w,
                dynamic_width: c.dynamic_width.then(Default::default),
                page_search: c.page_search,
            }),
        },
        entry_list: c.entry_list,
        rerank: c.rerank,
        range: None,
    }
}

/// FNV-1a over 64-bit words.
fn fnv(h: &mut u64, x: u64) {
    for b in x.to_le_bytes() {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn counters(s: &QueryStats, names: &[&str]) -> Vec<u64> {
    let v = serde_json::to_value(s).unwrap();
    names
        .iter()
        .map(|name| {
            v.get(name)
                .and_then(|x| x.as_u64())
                .unwrap_or_else(|| panic!("statistics lack {name}: {v}"))
        })
        .collect()
}

/// One golden line: `name<TAB>hash<TAB>counter sums<TAB>first query's ids`; the hash covers
/// every query's ids, distance bits and counters `names`, in order.
fn summary(
    name: &str,
    k: usize,
    ids: &[u64],
    dists: &[f32],
    stats: &[QueryStats],
    names: &[&str],
) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut sums = vec![0u64; names.len()];
    for (q, st) in stats.iter().enumerate() {
        for j in 0..k {
            fnv(&mut h, ids[q * k + j]);
            fnv(&mut h, u64::from(dists[q * k + j].to_bits()));
        }
        for (s, x) in sums.iter_mut().zip(counters(st, names)) {
            fnv(&mut h, x);
            *s += x;
        }
    }
    let sums: Vec<String> = names
        .iter()
        .zip(&sums)
        .map(|(n, s)| format!("{n}={s}"))
        .collect();
    let first: Vec<String> = ids[..k].iter().map(u64::to_string).collect();
    format!("{name}\t{h:016x}\t{}\t{}", sums.join(","), first.join(","))
}

fn widen(ids: &[u32]) -> Vec<u64> {
    ids.iter().map(|&i| u64::from(i)).collect()
}

/// [`summary`] of a batch of row numbers.
fn batch_line(name: &str, out: &trawl::kinds::graph::BatchOutput, names: &[&str]) -> String {
    summary(name, out.k, &widen(&out.ids), &out.dists, &out.stats, names)
}

/// FlashANNS's step counters (its `waits` depend on timing and are left out).
const FLASH_COUNTERS: [&str; 2] = ["steps", "stale_steps"];

/// Runs one configuration of the graph kind.
fn run(dir: &Path, c: &Config, queries: &trawl::data::Matrix<f32>) -> String {
    let mut ix = DiskIndex::open(
        dir,
        OpenOptions {
            layout: c.layout,
            engine: EngineKind::Memory,
            list_cache_bytes: c.list_cache_bytes,
            ..OpenOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    if let Some((nodes, policy)) = c.cache {
        ix.load_cache(nodes, policy, 1, &Control::silent())
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    }
    let out = ix
        .search_batch_with(queries, &search_params(c), 1, c.interleave)
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let mut names = COUNTERS.to_vec();
    if c.flash.is_some() {
        names.extend(FLASH_COUNTERS);
    }
    batch_line(c.name, &out, &names)
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn every_combination_returns_the_golden_results_and_counters() {
    let fixture = fixture_dir();
    if !fixture.join("packed.trawl").is_file() {
        assert!(
            bless(),
            "{} is missing (TRAWL_BLESS_GOLDEN=1 makes it)",
            fixture.display()
        );
        make_fixture(&fixture);
    }
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture, tmp.path());
    let ix = DiskIndex::open(tmp.path(), OpenOptions::default()).unwrap();
    for layout in [
        IndexLayout::Shuffled,
        IndexLayout::AllInStorage,
        IndexLayout::Decoupled,
    ] {
        ix.write_layout(layout, &Default::default(), &Control::silent())
            .unwrap();
    }
    drop(ix);
    let queries = queries();
    let mut got = String::new();
    for c in configs() {
        writeln!(got, "{}", run(tmp.path(), &c, &queries)).unwrap();
    }
    compare(&got, &golden_path(), 40);
}

/// The queries of every golden run.
fn queries() -> trawl::data::Matrix<f32> {
    synth(1_000, 40, 77).1
}

/// Seeded synthetic data of dimension 16: `n` base vectors and `nq` queries.
fn synth(n: usize, nq: usize, seed: u64) -> (trawl::data::Matrix<f32>, trawl::data::Matrix<f32>) {
    let p = trawl::synth::SynthParams::new(n, nq, 16, trawl::DType::F32, seed);
    trawl::synth::generate::<f32>(&p).unwrap()
}

/// Compares `got` with the golden file (or writes it when blessing).
fn compare(got: &str, path: &Path, at_least: usize) {
    if bless() {
        std::fs::write(path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (TRAWL_BLESS_GOLDEN=1 makes it)", path.display()));
    let (mut bad, mut seen) = (Vec::new(), 0);
    for (g, w) in got.lines().zip(want.lines()) {
        seen += 1;
        if g != w {
            bad.push(format!("  want {w}\n  got  {g}"));
        }
    }
    assert_eq!(
        got.lines().count(),
        want.lines().count(),
        "{}: configurations differ in number",
        path.display()
    );
    assert!(seen > at_least, "only {seen} configurations compared");
    assert!(
        bad.is_empty(),
        "{}: {} of {seen} configurations differ from the golden run:\n{}",
        path.display(),
        bad.len(),
        bad.join("\n")
    );
}

/// The committed fixture `name` (made by `make` when blessing and missing), copied into a
/// temporary directory.
fn fixture_copy(name: &str, make: impl FnOnce(&Path) + Send) -> tempfile::TempDir {
    let fixture = fixtures().join(name);
    if !fixture.is_dir() {
        assert!(
            bless(),
            "{} is missing (TRAWL_BLESS_GOLDEN=1 makes it)",
            fixture.display()
        );
        std::fs::create_dir_all(&fixture).unwrap();
        one_thread(|| make(&fixture));
    }
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture, tmp.path());
    tmp
}

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(to.join(e.file_name())).unwrap();
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}

fn fixture_base() -> trawl::data::Matrix<f32> {
    synth(1_000, 1, 77).0
}

/// Beam search at list size `l`, width `w`, k 10.
fn beam_params(l: usize, w: usize) -> SearchParams {
    SearchParams {
        k: 10,
        l,
        strategy: Strategy::Beam(BeamParams {
            width: w,
            dynamic_width: None,
            page_search: false,
        }),
        entry_list: 0,
        rerank: BASE.rerank,
        range: None,
    }
}

/// PipeSearch at list size 30 (dynamic width up to 16), k 10.
fn piped_params() -> SearchParams {
    SearchParams {
        strategy: Strategy::Pipe(pipe(WidthPolicy::Dynamic, 16).unwrap()),
        ..beam_params(30, 4)
    }
}

/// IVF counters compared (the graph's that IVF counts, and its own).
const IVF_COUNTERS: [&str; 16] = [
    "pages_read",
    "io_requests",
    "bytes_read",
    "pq_distances",
    "exact_distances",
    "vector_reads",
    "rerank_batches",
    "page_reuses",
    "page_joins",
    "lists_probed",
    "candidates",
    "candidates_unique",
    "pages_merged",
    "pages_buffered",
    "page_mates",
    "centroid_distances",
];

#[test]
fn ivf_searches_return_the_golden_results_and_counters() {
    use trawl::kinds::ivf::{build_ivf, IvfIndex, IvfParams, IvfSearchParams, IvfVectorLayout};
    let tmp = fixture_copy("golden-ivf", |dir| {
        let params = IvfParams {
            pq: trawl::quant::pq::PqParams {
                bytes_per_vector: 8,
                ..Default::default()
            },
            by_id_file: true,
            ..IvfParams::default()
        };
        build_ivf(&fixture_base(), dir, &params, &Control::silent()).unwrap();
    });
    let queries = queries();
    let base = IvfSearchParams {
        nprobe: 16,
        top_n: 60,
        ..IvfSearchParams::default()
    };
    let configs: Vec<(&str, IvfVectorLayout, IvfSearchParams)> = vec![
        (
            "default",
            IvfVectorLayout::Bucket,
            IvfSearchParams::default(),
        ),
        ("nprobe16-top60", IvfVectorLayout::Bucket, base),
        (
            "no-heuristic",
            IvfVectorLayout::Bucket,
            IvfSearchParams {
                heuristic: false,
                ..base
            },
        ),
        (
            "eps0-beta3-batch8",
            IvfVectorLayout::Bucket,
            IvfSearchParams {
                epsilon: 0.0,
                beta: 3,
                batch: 8,
                ..base
            },
        ),
        (
            "no-merge-no-buffer",
            IvfVectorLayout::Bucket,
            IvfSearchParams {
                page_merge: false,
                page_buffer: false,
                ..base
            },
        ),
        (
            "no-page-mates",
            IvfVectorLayout::Bucket,
            IvfSearchParams {
                page_mates: false,
                ..base
            },
        ),
        (
            "centroid-l64-nprobe40",
            IvfVectorLayout::Bucket,
            IvfSearchParams {
                centroid_l: 64,
                nprobe: 40,
                top_n: 120,
                ..base
            },
        ),
        ("interleave4", IvfVectorLayout::Bucket, base),
        (
            "accel-batch3",
            IvfVectorLayout::Bucket,
            IvfSearchParams {
                accel_batch: 3,
                ..base
            },
        ),
        ("by-id", IvfVectorLayout::ById, base),
        (
            "by-id-interleave4-k5",
            IvfVectorLayout::ById,
            IvfSearchParams { k: 5, ..base },
        ),
    ];
    let mut got = String::new();
    for (name, layout, p) in configs {
        let ix = IvfIndex::open(
            tmp.path(),
            OpenOptions {
                engine: EngineKind::Memory,
                ivf_vectors: layout,
                ..OpenOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        // The interleave is how the search runs, not a search parameter.
        let run = trawl::kinds::Run {
            threads: 1,
            interleave: if name.contains("interleave4") { 4 } else { 1 },
        };
        let out = ix
            .search_batch(&queries, &p, run)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        writeln!(
            got,
            "{}",
            batch_line(&format!("ivf/{name}"), &out, &IVF_COUNTERS)
        )
        .unwrap();
    }
    compare(&got, &fixtures().join("golden-ivf.txt"), 10);
}

#[test]
fn sharded_searches_return_the_golden_results_and_counters() {
    use trawl::kinds::sharded::{build_sharded_index, ShardParams, ShardedIndex};
    let tmp = fixture_copy("golden-sharded", |dir| {
        let params = trawl::kinds::graph::IndexParams {
            attrs: None,
            metric: trawl::Metric::L2,
            graph: trawl::vamana::VamanaParams {
                r: 16,
                l: 32,
                ..Default::default()
            },
            pq: trawl::quant::pq::PqParams {
                bytes_per_vector: 8,
                ..Default::default()
            },
            quant: Default::default(),
            entry: None,
            label_aware: Default::default(),
        };
        let sp = ShardParams {
            shards: 3,
            epsilon: 0.1,
            ..ShardParams::default()
        };
        build_sharded_index(&fixture_base(), dir, &sp, &params, &Control::silent()).unwrap();
    });
    let queries = queries();
    let beam = beam_params;
    let piped = piped_params();
    let configs = [
        ("beam-all", beam(20, 4), 1, 0),
        ("beam-probe1", beam(30, 4), 1, 1),
        ("beam-probe2-W8", beam(40, 8), 1, 2),
        ("beam-probe2-interleave4", beam(30, 4), 4, 2),
        ("pipe-all", piped, 1, 0),
        ("pipe-probe2-interleave4", piped, 4, 2),
    ];
    let ix = ShardedIndex::open(
        tmp.path(),
        OpenOptions {
            engine: EngineKind::Memory,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    let mut got = String::new();
    for (name, p, interleave, probe) in configs {
        let out = ix
            .search_rows(queries.as_slice(), &p, 1, interleave, probe)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let line = batch_line(&format!("sharded/{name}"), &out, &COUNTERS);
        writeln!(got, "{line}").unwrap();
    }
    compare(&got, &fixtures().join("golden-sharded.txt"), 5);
}

#[test]
fn live_searches_and_merge_return_the_golden_results_and_counters() {
    use trawl::kinds::graph::updates::live::{Access, Durability, LiveIndex, MergeOptions};
    let queries = queries();
    let (extra, _) = synth(120, 1, 78);
    let beam = beam_params(30, 4);
    let piped = piped_params();
    let mut got = String::new();
    for layout in [IndexLayout::Packed, IndexLayout::Decoupled] {
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&fixture_dir(), tmp.path());
        if layout != IndexLayout::Packed {
            let ix = DiskIndex::open(tmp.path(), OpenOptions::default()).unwrap();
            ix.write_layout(layout, &Default::default(), &Control::silent())
                .unwrap();
        }
        let opts = OpenOptions {
            engine: EngineKind::Memory,
            layout,
            ..OpenOptions::default()
        };
        let ix = LiveIndex::open(tmp.path(), opts, Access::ReadWrite)
            .unwrap_or_else(|e| panic!("{}: {e}", layout.name()));
        ix.set_durability(Durability::Buffered).unwrap();
        one_thread(|| {
            ix.insert(None, &extra.as_slice()[..80 * 16]).unwrap();
            let dead: Vec<u64> = (0..1_000u64).step_by(13).chain([1_003, 1_040]).collect();
            ix.delete(&dead).unwrap();
            let ids: Vec<u64> = vec![7, 1_010, 5_000];
            ix.upsert(&ids, &extra.as_slice()[80 * 16..83 * 16])
                .unwrap();
        });
        let mut search = |stage: &str, ix: &LiveIndex| {
            for (name, p, interleave) in
                [("beam", beam, 1), ("pipe", piped, 1), ("beam-i4", beam, 4)]
            {
                let out = ix
                    .search_rows(queries.as_slice(), &p, 1, interleave)
                    .unwrap_or_else(|e| panic!("{stage}/{name}: {e}"));
                let line = summary(
                    &format!("live/{}/{stage}/{name}", layout.name()),
                    out.k,
                    &out.ids,
                    &out.dists,
                    &out.stats,
                    &COUNTERS,
                );
                writeln!(got, "{line}").unwrap();
            }
        };
        search("delta", &ix);
        let merge = MergeOptions {
            threads: 1,
            nice: 0,
            ..MergeOptions::default()
        };
        one_thread(|| ix.merge_with(&merge, &Control::silent()))
            .unwrap_or_else(|e| panic!("{}: merge: {e}", layout.name()));
        search("merged", &ix);
        ix.insert(None, &extra.as_slice()[83 * 16..100 * 16])
            .unwrap();
        search("merged-delta", &ix);
    }
    compare(&got, &fixtures().join("golden-live.txt"), 10);
}
