//! Golden results: every layout × strategy × switch combination, searched on a committed index
//! (built by the binary before the search code was restructured, and before index manifests:
//! it also proves that such an index still opens), must return exactly the ids, the distance
//! bits and every I/O counter recorded in `fixtures/golden.txt`.
//!
//! The memory engine makes the order of completions — and so every counter of PipeSearch —
//! deterministic. The page-packed index is committed; the other layouts are written from it in
//! a temporary copy (their writers are deterministic), so the fixture stays small.
//!
//! Regenerate (only when a change is *meant* to change results or counters, and say so):
//! `TRAWL_BLESS_GOLDEN=1 cargo test -p trawl --test golden`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use trawl::index::{DiskIndex, IndexLayout, OpenOptions};
use trawl::io::EngineKind;
use trawl::progress::Control;
use trawl::search::{
    BeamParams, CachePolicy, PipeParams, QueryStats, RerankParams, SearchParams, Strategy,
    WidthPolicy,
};

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

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden.txt")
}

fn bless() -> bool {
    std::env::var_os("TRAWL_BLESS_GOLDEN").is_some()
}

/// Builds the fixture index (once, single-threaded so it is reproducible).
fn make_fixture(dir: &Path) {
    use trawl::graph::VamanaParams;
    use trawl::index::{build_index, IndexParams};
    use trawl::quant::pq::PqParams;
    use trawl::search::entry::EntryParams;
    use trawl::synth::{generate, SynthParams};
    let (base, _) =
        generate::<f32>(&SynthParams::new(1_000, 1, 16, trawl::DType::F32, 77)).unwrap();
    let params = IndexParams {
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
        entry: Some(EntryParams {
            ratio: 0.03,
            ..EntryParams::default()
        }),
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
    /// `None`: beam search.
    pipe: Option<PipeParams>,
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
        strategy: match c.pipe {
            Some(p) => Strategy::Pipe(p),
            None => Strategy::Beam(BeamParams {
                width: c.w,
                dynamic_width: c.dynamic_width.then(Default::default),
                page_search: c.page_search,
            }),
        },
        entry_list: c.entry_list,
        rerank: c.rerank,
    }
}

/// FNV-1a over 64-bit words.
fn fnv(h: &mut u64, x: u64) {
    for b in x.to_le_bytes() {
        *h ^= u64::from(b);
        *h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn counters(s: &QueryStats) -> Vec<u64> {
    let v = serde_json::to_value(s).unwrap();
    COUNTERS
        .iter()
        .map(|name| {
            v.get(name)
                .and_then(|x| x.as_u64())
                .unwrap_or_else(|| panic!("statistics lack {name}: {v}"))
        })
        .collect()
}

/// Runs one configuration: `name<TAB>hash<TAB>counter sums<TAB>first query's ids`.
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
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut sums = vec![0u64; COUNTERS.len()];
    for (q, st) in out.stats.iter().enumerate() {
        for j in 0..out.k {
            fnv(&mut h, u64::from(out.ids[q * out.k + j]));
            fnv(&mut h, u64::from(out.dists[q * out.k + j].to_bits()));
        }
        for (s, x) in sums.iter_mut().zip(counters(st)) {
            fnv(&mut h, x);
            *s += x;
        }
    }
    let sums: Vec<String> = COUNTERS
        .iter()
        .zip(&sums)
        .map(|(n, s)| format!("{n}={s}"))
        .collect();
    let first: Vec<String> = out.ids[..out.k].iter().map(u32::to_string).collect();
    format!(
        "{}\t{h:016x}\t{}\t{}",
        c.name,
        sums.join(","),
        first.join(",")
    )
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
    let (_, queries) = trawl::synth::generate::<f32>(&trawl::synth::SynthParams::new(
        1_000,
        40,
        16,
        trawl::DType::F32,
        77,
    ))
    .unwrap();
    let mut got = String::new();
    for c in configs() {
        writeln!(got, "{}", run(tmp.path(), &c, &queries)).unwrap();
    }
    if bless() {
        std::fs::write(golden_path(), &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(golden_path()).unwrap();
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
        "configurations differ in number"
    );
    assert!(seen > 40, "only {seen} configurations compared");
    assert!(
        bad.is_empty(),
        "{} of {seen} configurations differ from the golden run:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
