//! The memory budget and the cold start: the hot-node order written with the index and read
//! at open instead of sample searches, the background cache fill, and the memory plan
//! (required items first, a budget below them refused with the minimum, every planned item
//! at least what the opened index holds).

mod common;

use common::{build, data};
use trawl::filter::QueryFilter;
use trawl::kinds::graph::{hot, IndexLayout};
use trawl::kinds::{open_with, Error, Options, Queries, Run};
use trawl::progress::Control;
use trawl::Metric;

fn opts(budget: Option<u64>) -> Options {
    Options {
        memory_budget: budget,
        l: Some(40),
        threads: 1,
        ..Options::default()
    }
}

#[test]
fn the_hot_order_is_written_with_the_index_and_read_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(6_000, 50, 24, 3);
    build(&base, dir.path(), Metric::L2, 8);
    assert!(dir.path().join(hot::FILE_NAME).is_file());
    let m = trawl::kinds::graph::Manifest::load_if_present(dir.path())
        .unwrap()
        .unwrap();
    assert!(m.files.iter().any(|f| f.name == hot::FILE_NAME));
    let o = Options {
        cache_nodes: 500,
        ..opts(None)
    };
    let (ix, rep) = open_with(dir.path(), &o, &Control::silent()).unwrap();
    // No sample search ran: the pages read are the fill's (runs of the file's pages, at
    // most the whole file), not 2,000 searches' (tens of thousands of reads).
    assert_eq!(rep.cache.nodes, 500);
    let disk = ix.graph().unwrap().disk();
    let data_pages = disk.packed().unwrap().geometry().data_pages;
    assert!(
        rep.cache.pages_read > 0 && rep.cache.pages_read <= data_pages,
        "{} pages of {data_pages}",
        rep.cache.pages_read
    );
    let order = disk.hot_order().unwrap().unwrap();
    let cached: std::collections::HashSet<u32> = disk.cache().ids().collect();
    assert!(order.ids()[..500].iter().all(|id| cached.contains(id)));
    // The ranking is what sample searches read: the most read node is read by most of them.
    assert!(order.reads_saved(1) > 0.5, "{}", order.reads_saved(1));
    // A cache chosen by the hot order saves reads.
    let p = o.params(&ix, 10).unwrap();
    let hits = ix
        .search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
    let hits_cached: u64 = hits.stats.iter().map(|s| s.traversal.cache_hits).sum();
    assert!(hits_cached > 0);
    // The file is checked by verify, and damage to it is an error at open, not a silent
    // fall back to sample searches.
    let report = ix.verify(&Control::silent()).unwrap();
    assert!(format!("{report:?}").contains(hot::FILE_NAME));
    drop(ix);
    let path = dir.path().join(hot::FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let err = open_with(dir.path(), &o, &Control::silent()).unwrap_err();
    assert!(err.to_string().contains("hot.trawl"), "{err}");
}

#[test]
fn a_sparse_cache_is_filled_with_the_records_it_names() {
    // Few cached nodes far apart (4 records per page): the fill's short-read, deep-queue path.
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(6_000, 40, 200, 8);
    build(&base, dir.path(), Metric::L2, 8);
    let plain = opts(None);
    let cached = Options {
        cache_nodes: 25,
        ..opts(None)
    };
    let (a, _) = open_with(dir.path(), &plain, &Control::silent()).unwrap();
    let (b, rep) = open_with(dir.path(), &cached, &Control::silent()).unwrap();
    assert_eq!(rep.cache.nodes, 25);
    assert!(rep.cache.pages_read <= 25 * 17, "{}", rep.cache.pages_read);
    let run = |ix: &trawl::kinds::AnyIndex| {
        ix.search(
            Queries::from(&q),
            &plain.params(ix, 10).unwrap(),
            Run::default(),
            &QueryFilter::none(),
        )
        .unwrap()
    };
    let (ha, hb) = (run(&a), run(&b));
    assert_eq!(ha.ids, hb.ids, "a cache never changes results");
    let hits: u64 = hb.stats.iter().map(|s| s.traversal.cache_hits).sum();
    assert!(hits > 0);
}

#[test]
fn a_background_fill_serves_the_same_results_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(8_000, 200, 24, 5);
    build(&base, dir.path(), Metric::L2, 8);
    let wait = Options {
        cache_nodes: 4_000,
        ..opts(None)
    };
    let (ix, _) = open_with(dir.path(), &wait, &Control::silent()).unwrap();
    let p = wait.params(&ix, 10).unwrap();
    let want = ix
        .search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
    assert!(ix.warm_progress().done());
    assert_eq!(ix.warm_progress().filled, 4_000);
    drop(ix);
    let bg = Options {
        warm_background: true,
        ..wait.clone()
    };
    let (ix, rep) = open_with(dir.path(), &bg, &Control::silent()).unwrap();
    assert_eq!(rep.cache.nodes, 4_000);
    // Searches run while the cache fills: a cache never changes results.
    let mut seen_partial = false;
    for i in 0..q.n() {
        let prog = ix.warm_progress();
        seen_partial |= !prog.done();
        let one = Queries::new(q.row(i), q.dim()).unwrap();
        let got = ix
            .search(one, &p, Run::default(), &QueryFilter::none())
            .unwrap();
        assert_eq!(got.ids, want.ids[i * 10..(i + 1) * 10]);
    }
    while !ix.warm_progress().done() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let prog = ix.warm_progress();
    assert_eq!((prog.filled, prog.total, prog.error), (4_000, 4_000, None));
    let full = ix
        .search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
    assert_eq!(full.ids, want.ids);
    let hits =
        |h: &trawl::kinds::Hits| -> u64 { h.stats.iter().map(|s| s.traversal.cache_hits).sum() };
    assert_eq!(
        hits(&full),
        hits(&want),
        "the filled cache is the same cache"
    );
    // (Whether a search saw the fill unfinished depends on timing; it is not asserted.)
    let _ = seen_partial;
}

#[test]
fn a_plan_fits_its_budget_and_the_index_fits_its_plan() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(10_000, 10, 32, 9);
    build(&base, dir.path(), Metric::L2, 8);
    let min = trawl::kinds::plan_memory(dir.path(), &opts(Some(u64::MAX / 4)))
        .unwrap()
        .minimum;
    let mut last_nodes = 0;
    for budget in [min, min + (256 << 10), min + (2 << 20), 64 << 20] {
        let plan = trawl::kinds::plan_memory(dir.path(), &opts(Some(budget))).unwrap();
        assert_eq!(plan.minimum, min);
        assert!(plan.planned() <= budget, "{}", plan.describe());
        assert!(
            plan.cache_nodes >= last_nodes,
            "more budget, no fewer cached nodes"
        );
        last_nodes = plan.cache_nodes;
        let (ix, rep) = open_with(dir.path(), &opts(Some(budget)), &Control::silent()).unwrap();
        assert_eq!(rep.plan.as_ref(), Some(&plan));
        let mem = ix.info().unwrap().memory_bytes;
        let item = |name: &str| {
            plan.items
                .iter()
                .find(|i| i.name == name)
                .map_or(0, |i| i.bytes)
        };
        // Every part the index holds is within its planned item.
        assert!(mem.pq_codes_bytes <= item("pq_codes"), "{mem:?}");
        assert!(mem.pq_codebook_bytes <= item("pq_codebooks"), "{mem:?}");
        assert!(mem.checksum_bytes <= item("layout"), "{mem:?}");
        assert!(
            mem.entry_bytes <= item("entry"),
            "{mem:?}\n{}",
            plan.describe()
        );
        assert!(mem.cache_bytes <= item("node_cache"), "{mem:?}");
        assert_eq!(ix.graph().unwrap().disk().cache().len(), plan.cache_nodes);
    }
    assert_eq!(last_nodes, 10_000, "64 MiB holds every node");
    // The minimum holds no cache and no entry index; a search seeded from the entry index is
    // then refused with the reason, not run from the medoid.
    let plan = trawl::kinds::plan_memory(dir.path(), &opts(Some(min))).unwrap();
    assert_eq!((plan.cache_nodes, plan.entry), (0, false));
    let seeded = Options {
        entry_list: 10,
        ..opts(Some(min))
    };
    let (ix, _) = open_with(dir.path(), &seeded, &Control::silent()).unwrap();
    let err = seeded
        .params(&ix, 10)
        .err()
        .map(|e| e.to_string())
        .or_else(|| {
            let p = seeded.params(&ix, 10).unwrap();
            ix.search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
                .err()
                .map(|e| e.to_string())
        });
    let err = err.expect("an entry-list search without the entry index in memory is refused");
    assert!(err.contains("memory budget"), "{err}");
    drop(ix);
    // Below the minimum: an error naming it, before anything is loaded.
    let err = open_with(dir.path(), &opts(Some(min - 1)), &Control::silent()).unwrap_err();
    assert!(matches!(err, Error::Budget(_)), "{err}");
    assert_eq!(err.kind(), trawl::ErrorKind::InvalidInput);
    let text = err.to_string();
    assert!(
        text.contains("minimum") && text.contains("pq_codes"),
        "{text}"
    );
    // A budget and an explicit cache are refused together.
    let both = Options {
        cache_nodes: 10,
        ..opts(Some(64 << 20))
    };
    assert!(open_with(dir.path(), &both, &Control::silent()).is_err());
}

#[test]
fn when_the_codes_do_not_fit_the_plan_takes_all_in_storage() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(20_000, 20, 16, 2);
    build(&base, dir.path(), Metric::L2, 16);
    let ask = |budget| trawl::kinds::plan_memory(dir.path(), &opts(Some(budget)));
    let min = ask(u64::MAX / 4).unwrap().minimum;
    // Without an All-in-Storage layout, the error says how to get one.
    let err = ask(min - 1).unwrap_err().to_string();
    assert!(err.contains("--ais"), "{err}");
    let ix = trawl::kinds::graph::DiskIndex::open(dir.path(), Default::default()).unwrap();
    ix.write_layout(
        IndexLayout::AllInStorage,
        &Default::default(),
        &Control::silent(),
    )
    .unwrap();
    drop(ix);
    let plan = ask(min - 1).unwrap();
    assert_eq!(plan.layout.as_deref(), Some("ais"));
    assert!(plan.minimum < min);
    assert!(plan.items.iter().all(|i| i.name != "pq_codes"));
    let (ix, _) = open_with(dir.path(), &opts(Some(min - 1)), &Control::silent()).unwrap();
    assert_eq!(
        ix.graph().unwrap().disk().options().layout,
        IndexLayout::AllInStorage
    );
    assert!(ix.graph().unwrap().disk().codes().is_none());
    let p = opts(None).params(&ix, 10).unwrap();
    ix.search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
}

#[test]
fn the_planner_picks_the_layout_that_reads_least() {
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(20_000, 30, 16, 7);
    build(&base, dir.path(), Metric::L2, 16);
    let ix = trawl::kinds::graph::DiskIndex::open(dir.path(), Default::default()).unwrap();
    for l in [IndexLayout::AllInStorage, IndexLayout::Shuffled] {
        ix.write_layout(l, &Default::default(), &Control::silent())
            .unwrap();
    }
    drop(ix);
    let auto = |budget| Options {
        layout_auto: true,
        ..opts(Some(budget))
    };
    let plan = |o: &Options| trawl::kinds::plan_memory(dir.path(), o);
    let packed_min = plan(&opts(Some(u64::MAX / 4))).unwrap().minimum;
    let shuffle_min = plan(&Options {
        layout: IndexLayout::Shuffled,
        ..opts(Some(u64::MAX / 4))
    })
    .unwrap()
    .minimum;
    // Below the record layouts with codes, All-in-Storage is the one that fits.
    let p = plan(&auto(packed_min.min(shuffle_min) - 1)).unwrap();
    assert_eq!(p.layout.as_deref(), Some("ais"));
    assert!(p.layout_picked && !p.page_search);
    // With every node cached, shuffle and packed read nothing; the tie goes to packed (no
    // PageSearch to pay for).
    let all = auto(1 << 30);
    let p = plan(&all).unwrap();
    assert_eq!(p.layout.as_deref(), Some("packed"), "{}", p.describe());
    assert!(!p.page_search && p.reads_left == Some(0.0));
    assert!(p.notes.iter().any(|n| n.contains("picked")));
    // Between: the pick is the layout with the fewest expected reads of those planned.
    let mid = auto(shuffle_min.max(packed_min) + (2 << 20));
    let p = plan(&mid).unwrap();
    let reads = |l: IndexLayout| {
        plan(&Options {
            layout: l,
            ..opts(mid.memory_budget)
        })
        .unwrap()
        .reads_left
        .unwrap()
    };
    let scores = [
        reads(IndexLayout::Shuffled) * trawl::kinds::graph::plan::PAGE_SEARCH_READS,
        reads(IndexLayout::Packed),
        reads(IndexLayout::AllInStorage),
    ];
    let best = scores.iter().cloned().fold(f64::INFINITY, f64::min);
    let picked = ["shuffle", "packed", "ais"]
        .iter()
        .position(|l| Some(*l) == p.layout.as_deref())
        .unwrap();
    assert_eq!(scores[picked], best, "{scores:?}: {}", p.describe());
    // With reads left on both, PageSearch's fewer reads win somewhere between.
    let picks: Vec<String> = (0..12)
        .map(|i| {
            let b = shuffle_min.max(packed_min) + (256 << 10) * (1 << i);
            plan(&auto(b)).unwrap().layout.unwrap()
        })
        .collect();
    assert!(picks.iter().any(|l| l == "shuffle"), "{picks:?}");
    // Opened by it: the picked layout, searched with PageSearch when it is shuffle.
    for o in [&mid, &all] {
        let want = plan(o).unwrap().layout.unwrap();
        let (ix, rep) = open_with(dir.path(), o, &Control::silent()).unwrap();
        assert!(rep.plan.unwrap().layout_picked);
        assert_eq!(ix.graph().unwrap().disk().options().layout.name(), want);
        let params = o.params(&ix, 10).unwrap();
        assert_eq!(
            format!("{params:?}").contains("page_search: true"),
            want == "shuffle"
        );
        let hits = ix
            .search(
                Queries::from(&q),
                &params,
                Run::default(),
                &QueryFilter::none(),
            )
            .unwrap();
        assert_eq!(hits.ids.len(), 30 * 10);
    }
    // Without a budget, or on another kind, `auto` is refused with the reason.
    let err = open_with(
        dir.path(),
        &Options {
            layout_auto: true,
            ..opts(None)
        },
        &Control::silent(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("memory budget"), "{err}");
}

#[test]
fn an_ivf_plan_holds_what_the_index_holds() {
    use trawl::kinds::ivf::{build_ivf, IvfParams};
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(6_000, 20, 32, 4);
    let params = IvfParams {
        metric: Metric::L2,
        pq: trawl::quant::pq::PqParams {
            bytes_per_vector: 8,
            ..Default::default()
        },
        ..IvfParams::default()
    };
    build_ivf(&base, dir.path(), &params, &Control::silent()).unwrap();
    let plan = trawl::kinds::plan_memory(dir.path(), &opts(Some(1 << 30))).unwrap();
    let auto = Options {
        layout_auto: true,
        ..opts(Some(1 << 30))
    };
    let err = trawl::kinds::plan_memory(dir.path(), &auto).unwrap_err();
    assert!(err.to_string().contains("graph index"), "{err}");
    let (ix, rep) = open_with(dir.path(), &opts(Some(plan.minimum)), &Control::silent()).unwrap();
    assert_eq!(rep.plan.as_ref().map(|p| p.minimum), Some(plan.minimum));
    let mem = ix.info().unwrap().memory_bytes;
    let search = plan
        .items
        .iter()
        .find(|i| i.name == "search")
        .unwrap()
        .bytes;
    assert!(
        mem.total() <= plan.minimum - search,
        "holds {mem:?}, planned {}",
        plan.describe()
    );
    let p = opts(None).params(&ix, 10).unwrap();
    ix.search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
    let err = open_with(
        dir.path(),
        &opts(Some(plan.minimum - 1)),
        &Control::silent(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Budget(_)), "{err}");
}

#[test]
fn sharded_and_flat_indexes_plan_too() {
    use trawl::kinds::sharded::{build_sharded_index, ShardParams};
    let (base, q) = data::<f32>(9_000, 20, 16, 6);
    let dir = tempfile::tempdir().unwrap();
    let sp = ShardParams {
        shards: 3,
        ..ShardParams::default()
    };
    build_sharded_index(
        &base,
        dir.path(),
        &sp,
        &common::params(Metric::L2, 8),
        &Control::silent(),
    )
    .unwrap();
    let min = trawl::kinds::plan_memory(dir.path(), &opts(Some(1 << 40)))
        .unwrap()
        .minimum;
    let budget = min + (2 << 20);
    let plan = trawl::kinds::plan_memory(dir.path(), &opts(Some(budget))).unwrap();
    assert!(plan.planned() <= budget, "{}", plan.describe());
    assert!(
        plan.cache_nodes > 0 && plan.cache_nodes < 9_000,
        "{}",
        plan.describe()
    );
    let (ix, rep) = open_with(dir.path(), &opts(Some(budget)), &Control::silent()).unwrap();
    assert_eq!(rep.cache.nodes, plan.cache_nodes);
    assert!(ix.info().unwrap().memory_bytes.total() <= plan.planned());
    let p = opts(None).params(&ix, 10).unwrap();
    ix.search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
    let err = open_with(dir.path(), &opts(Some(min - 1)), &Control::silent()).unwrap_err();
    assert!(matches!(err, Error::Budget(_)), "{err}");

    let flat = tempfile::tempdir().unwrap();
    trawl::kinds::flat::build_flat(&base, flat.path(), Metric::L2, &Control::silent()).unwrap();
    let plan = trawl::kinds::plan_memory(flat.path(), &opts(Some(1 << 30))).unwrap();
    let (ix, _) = open_with(flat.path(), &opts(Some(plan.minimum)), &Control::silent()).unwrap();
    let p = opts(None).params(&ix, 10).unwrap();
    ix.search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
        .unwrap();
    assert!(matches!(
        open_with(
            flat.path(),
            &opts(Some(plan.minimum - 1)),
            &Control::silent()
        ),
        Err(Error::Budget(_))
    ));
}

#[test]
fn the_refinement_codes_are_a_component_read_at_open_and_planned() {
    use trawl::kinds::graph::refine_file::{self, RefineHeader};
    let dir = tempfile::tempdir().unwrap();
    let (base, q) = data::<f32>(8_000, 40, 32, 4);
    build(&base, dir.path(), Metric::L2, 8);
    let ix = trawl::kinds::graph::DiskIndex::open(dir.path(), Default::default()).unwrap();
    let rep = ix
        .write_decoupled(&Default::default(), &Control::silent())
        .unwrap();
    drop(ix);
    let path = dir.path().join(refine_file::FILE_NAME);
    let d = rep.decoupled.unwrap();
    assert_eq!(d.refine_bytes, std::fs::metadata(&path).unwrap().len());
    let m = trawl::kinds::graph::Manifest::load_if_present(dir.path())
        .unwrap()
        .unwrap();
    assert!(m.files.iter().any(|f| f.name == refine_file::FILE_NAME));
    let h = RefineHeader::read(&path).unwrap();
    assert_eq!((h.n, h.dim, h.bits), (8_000, 32, 8));
    assert_eq!(h.savings.samples, 2_000);
    assert!(h.savings.pages_without > 0.0, "{:?}", h.savings);
    assert_eq!(h.savings, d.refine_savings);

    // Read from the file at open, and the same codes as built from the vector files.
    let dec = Options {
        layout: IndexLayout::Decoupled,
        refine_bits: 8,
        ..opts(None)
    };
    let run = |o: &Options| {
        let (ix, rep) = open_with(dir.path(), o, &Control::silent()).unwrap();
        let p = opts(None).params(&ix, 10).unwrap();
        let hits = ix
            .search(Queries::from(&q), &p, Run::default(), &QueryFilter::none())
            .unwrap();
        (hits, rep, ix.info().unwrap().memory_bytes.refine_bytes)
    };
    let (from_file, rep, held) = run(&dec);
    let r = rep.refine.unwrap();
    assert!(r.from_file);
    assert_eq!((r.bytes, held), (h.heap_bytes(), h.heap_bytes()));
    let aside = dir.path().join("aside");
    std::fs::rename(&path, &aside).unwrap();
    let (built, rep, _) = run(&dec);
    assert!(!rep.refine.unwrap().from_file);
    assert_eq!(from_file.ids, built.ids);
    assert_eq!(from_file.dists, built.dists);
    std::fs::rename(&aside, &path).unwrap();

    // Planned when the budget holds them, and the opened index holds what was planned.
    let ask = |budget, writable| Options {
        layout: IndexLayout::Decoupled,
        writable,
        ..opts(Some(budget))
    };
    let plan = trawl::kinds::plan_memory(dir.path(), &ask(1 << 30, false)).unwrap();
    assert_eq!(plan.refine_bits, 8, "{}", plan.describe());
    let item = plan.items.iter().find(|i| i.name == "refine").unwrap();
    assert!(item.bytes >= h.heap_bytes());
    assert!(plan.planned() <= plan.budget);
    // The list cache is pinned from the hot-node order, within its planned bytes.
    assert!(plan.list_pinned, "{}", plan.describe());
    let lists = plan.items.iter().find(|i| i.name == "list_cache").unwrap();
    let (ix, rep) = open_with(dir.path(), &ask(1 << 30, false), &Control::silent()).unwrap();
    assert!(rep.refine.unwrap().from_file);
    let pinned = rep.pinned.unwrap();
    assert!(
        pinned.nodes > 0 && pinned.bytes <= lists.bytes,
        "{pinned:?}"
    );
    let mem = ix.info().unwrap().memory_bytes;
    assert!(mem.refine_bytes <= item.bytes);
    assert!(mem.list_cache_bytes <= lists.bytes, "{mem:?}");
    drop(ix);
    // A writable open's list cache is an LRU (pinned lists serve one merged version).
    let w = trawl::kinds::plan_memory(dir.path(), &ask(1 << 30, true)).unwrap();
    assert!(!w.list_pinned && w.list_cache_bytes > 0, "{}", w.describe());
    // Nor for a shard (a sharded open takes neither): its plan holds no codes and an LRU.
    let shard = trawl::kinds::graph::plan::plan(
        dir.path(),
        &trawl::kinds::graph::plan::PlanAsk {
            budget: 1 << 30,
            layout: IndexLayout::Decoupled,
            threads: 1,
            interleave: 1,
            queue_depth: 32,
            writable: false,
            static_uses: false,
        },
    )
    .unwrap();
    assert_eq!((shard.refine_bits, shard.list_pinned), (0, false));
    assert!(shard.items.iter().all(|i| i.name != "refine"));
    // Not at the minimum, nor for a writable open (the codes serve a merged version).
    let min = plan.minimum;
    assert_eq!(
        trawl::kinds::plan_memory(dir.path(), &ask(min, false))
            .unwrap()
            .refine_bits,
        0
    );
    let w = trawl::kinds::plan_memory(dir.path(), &ask(1 << 30, true)).unwrap();
    assert_eq!(w.refine_bits, 0);
    assert!(w.notes.iter().any(|n| n.contains("refinement")), "{w:?}");

    // Codes of another version are not planned, and are built at open when asked for.
    let mut ranges = trawl::quant::sq::RangeBuilder::new(32);
    ranges.observe(&[0.5; 32]);
    let other = trawl::quant::sq::RefineCodes::new(&ranges, 8, Metric::L2, 3).unwrap();
    std::fs::rename(&path, &aside).unwrap();
    refine_file::save(&path, &other, h.tag, &h.savings).unwrap();
    let stale = trawl::kinds::plan_memory(dir.path(), &ask(1 << 30, false)).unwrap();
    assert_eq!(stale.refine_bits, 0);
    assert!(stale.notes.iter().any(|n| n.contains("another version")));
    let (_, rep, _) = run(&dec);
    assert!(!rep.refine.unwrap().from_file);

    // A damaged file is an error naming it, never a silent rebuild.
    std::fs::rename(&aside, &path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let err = open_with(dir.path(), &dec, &Control::silent()).unwrap_err();
    assert!(err.to_string().contains(refine_file::FILE_NAME), "{err}");
}
