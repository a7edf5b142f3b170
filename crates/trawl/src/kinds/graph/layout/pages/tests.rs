//! Page-node construction and file format.

use super::build::{group, page_edges, Grouping};
use super::*;
use crate::kernels::{self, DType, Metric};
use crate::kinds::graph::layout::shuffle::Csr;
use crate::progress::Control;

/// `n` random vectors of `dim` (seeded) and their exact `r`-nearest-neighbour graph.
fn data(n: usize, dim: usize, r: usize, seed: u64) -> (Vec<f32>, Csr) {
    let mut s = seed;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) as f32) / (1u64 << 31) as f32
    };
    let v: Vec<f32> = (0..n * dim).map(|_| next()).collect();
    let lists: Vec<Vec<u32>> = (0..n)
        .map(|i| {
            let mut d: Vec<(f32, u32)> = (0..n)
                .filter(|&j| j != i)
                .map(|j| {
                    let dd = kernels::distance(
                        Metric::L2,
                        &v[i * dim..(i + 1) * dim],
                        &v[j * dim..(j + 1) * dim],
                    );
                    (dd, j as u32)
                })
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0));
            d.iter().take(r).map(|x| x.1).collect()
        })
        .collect();
    (v, Csr::from_lists(&lists))
}

fn check_partition(g: &Grouping, n: usize, cap: usize, include: impl Fn(u32) -> bool) {
    let mut count = vec![0u32; n];
    for (p, members) in g.pages.iter().enumerate() {
        assert!(
            !members.is_empty() && members.len() <= cap,
            "page {p}: {}",
            members.len()
        );
        for &id in members {
            count[id as usize] += 1;
            assert_eq!(g.page_of[id as usize], p as u32);
        }
    }
    for id in 0..n {
        let want = u32::from(include(id as u32));
        assert_eq!(count[id], want, "vector {id} is on {} pages", count[id]);
        if want == 0 {
            assert_eq!(g.page_of[id], NO_PAGE);
        }
    }
}

#[test]
fn every_vector_is_in_exactly_one_page_node() {
    for (n, cap, hops) in [(600, 7, 2), (601, 1, 2), (333, 16, 1), (50, 64, 2)] {
        let (v, graph) = data(n, 8, 12, n as u64);
        let g = group(&graph, &v, 8, Metric::L2, cap, hops, 5, |_| true, || {});
        check_partition(&g, n, cap, |_| true);
        assert_eq!(g.pages[0][0], 5, "the first centre is the start");
        // Members other than the centre come nearest the centre first.
        for members in &g.pages {
            let c = &v[members[0] as usize * 8..][..8];
            let d: Vec<f32> = members[1..]
                .iter()
                .map(|&m| kernels::distance(Metric::L2, c, &v[m as usize * 8..][..8]))
                .collect();
            assert!(d.windows(2).all(|w| w[0] <= w[1]));
        }
    }
    // Slots left out (freed) get no page.
    let (v, graph) = data(400, 8, 12, 9);
    let g = group(&graph, &v, 8, Metric::L2, 6, 2, 0, |id| id % 7 != 3, || {});
    check_partition(&g, 400, 6, |id| id % 7 != 3);
}

#[test]
fn grouping_keeps_near_vectors_together() {
    // Pages built from the graph hold nearer vectors than pages of consecutive ids.
    let (v, graph) = data(800, 8, 16, 3);
    let g = group(&graph, &v, 8, Metric::L2, 8, 2, 0, |_| true, || {});
    let spread = |pages: &[Vec<u32>]| {
        let mut s = 0.0f64;
        for m in pages {
            let c = &v[m[0] as usize * 8..][..8];
            for &x in &m[1..] {
                s += f64::from(kernels::distance(Metric::L2, c, &v[x as usize * 8..][..8]));
            }
        }
        s
    };
    let ids: Vec<Vec<u32>> = (0..100).map(|p| (8 * p..8 * p + 8).collect()).collect();
    assert!(
        spread(&g.pages) < 0.5 * spread(&ids),
        "{} vs {}",
        spread(&g.pages),
        spread(&ids)
    );
    assert!(g.underfull(8) <= 10, "{} short pages", g.underfull(8));
}

#[test]
fn page_level_edges_are_complete() {
    let (v, graph) = data(700, 8, 10, 4);
    let g = group(&graph, &v, 8, Metric::L2, 6, 2, 0, |_| true, || {});
    let (lists, report) = page_edges(&graph, &g, |_| 1000);
    assert_eq!(report.missing_page_edges, 0);
    assert_eq!(report.truncated_pages, 0);
    let mut edges = 0u64;
    for (p, members) in g.pages.iter().enumerate() {
        let list = &lists[p];
        assert!(list.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicate");
        assert!(!list.contains(&(p as u32)), "no edge to the page itself");
        let mut reached = std::collections::BTreeSet::new();
        for &u in members {
            for &w in graph.row(u as usize) {
                let q = g.page_of[w as usize];
                if q != p as u32 {
                    // Every vector edge between pages is a page-level edge.
                    assert!(
                        list.binary_search(&q).is_ok(),
                        "edge {u}->{w}: page {p} -> {q} missing"
                    );
                    reached.insert(q);
                }
            }
        }
        assert_eq!(
            reached.into_iter().collect::<Vec<_>>(),
            *list,
            "only pages the members reach"
        );
        edges += list.len() as u64;
    }
    assert_eq!(report.page_edges, edges);
    // Little room: what does not fit is counted, and the rest is a subset.
    let (short, report) = page_edges(&graph, &g, |m| m);
    for (p, list) in short.iter().enumerate() {
        assert!(list.len() <= g.pages[p].len());
        assert!(list.iter().all(|q| lists[p].binary_search(q).is_ok()));
    }
    assert!(report.missing_page_edges > 0 && report.truncated_pages > 0);
    assert_eq!(report.page_edges + report.missing_page_edges, edges);
}

fn write_small(dir: &std::path::Path) -> (std::path::PathBuf, Vec<f32>, Grouping, Vec<Vec<u32>>) {
    let (v, graph) = data(300, 8, 10, 5);
    let meta0 = PagesMeta {
        dtype: DType::F32,
        metric: Metric::L2,
        dim: 8,
        n: 300,
        pages: 0,
        capacity: 0,
        medoid: 7,
        max_degree: 0,
        pq_crc: 11,
        pq_codes_crc: 12,
        placed: 0,
        pq_bytes: 4,
        graph_r: 10,
        hops: 2,
        min_degree: 10,
        degree_cap: 0,
    };
    let cap = auto_capacity(meta0.vector_bytes(), 300, 10);
    assert!(cap >= 2 && cap <= max_capacity(32));
    let g = group(&graph, &v, 8, Metric::L2, cap, 2, 7, |_| true, || {});
    let pages = g.pages.len() as u32;
    let room = |m: usize| entries_that_fit(room_bytes(m, 32).unwrap(), pages);
    let (lists, _) = page_edges(&graph, &g, room);
    let meta = PagesMeta {
        capacity: cap,
        ..meta0
    };
    let path = dir.join(FILE_NAME);
    let bytes = write_file(
        &path,
        &meta,
        &g.pages,
        &lists,
        &g.page_of,
        |id| bytemuck::cast_slice(&v[id as usize * 8..][..8]),
        || {},
    )
    .unwrap();
    assert_eq!(bytes, std::fs::metadata(&path).unwrap().len());
    (path, v, g, lists)
}

#[test]
fn file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (path, v, g, lists) = write_small(dir.path());
    let f = PageFile::open(&path).unwrap();
    assert_eq!(f.meta().pages, g.pages.len() as u64);
    assert_eq!(f.meta().placed, 300);
    assert_eq!(
        (f.meta().pq_crc, f.meta().pq_codes_crc, f.meta().medoid),
        (11, 12, 7)
    );
    assert_eq!(f.page_table(), &g.page_of[..]);
    f.verify_all(&Control::silent()).unwrap();
    let order = f.read_order().unwrap();
    for (p, members) in g.pages.iter().enumerate() {
        assert_eq!(f.count(p as u32), members.len());
        let slots = &order[p * f.meta().capacity..(p + 1) * f.meta().capacity];
        assert_eq!(&slots[..members.len()], &members[..]);
        assert!(slots[members.len()..].iter().all(|&s| s == NO_VECTOR));
    }
    let raw = std::fs::read(&path).unwrap();
    let mut nbrs = Vec::new();
    let mut scratch = Vec::new();
    for (p, members) in g.pages.iter().enumerate() {
        let bytes = &raw[(1 + p) * PAGE_BYTES..(2 + p) * PAGE_BYTES];
        f.check_page(p as u64, bytes).unwrap();
        let view = f.decode(p as u64, bytes).unwrap();
        assert_eq!(view.ids().collect::<Vec<_>>(), *members);
        for (i, &id) in members.iter().enumerate() {
            assert_eq!(
                view.vector::<f32>(i, &mut scratch),
                &v[id as usize * 8..][..8]
            );
        }
        f.neighbors(p as u64, &view, &mut nbrs).unwrap();
        assert_eq!(nbrs, lists[p]);
    }
}

#[test]
fn damage_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, ..) = write_small(dir.path());
    let good = std::fs::read(&path).unwrap();
    // Truncation at every page boundary and inside the header.
    for cut in (0..good.len())
        .step_by(PAGE_BYTES)
        .chain([100, 4095, good.len() - 1])
    {
        std::fs::write(&path, &good[..cut]).unwrap();
        assert!(PageFile::open(&path).is_err(), "cut at {cut}");
    }
    // A flipped byte anywhere: the open fails (header, tables) or verification does (pages).
    let f_pages = PageFile::open(&{
        std::fs::write(&path, &good).unwrap();
        path.clone()
    })
    .unwrap()
    .meta()
    .pages as usize;
    for at in (0..good.len()).step_by(97) {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        std::fs::write(&path, &bad).unwrap();
        let caught = match PageFile::open(&path) {
            Err(_) => true,
            Ok(f) => f.verify_all(&Control::silent()).is_err(),
        };
        // Zero padding of a page node counts: the page's checksum covers all of it.
        assert!(caught, "byte {at} of {} ({} pages)", good.len(), f_pages);
    }
    // A page that passes its checksum but lies (a forged checksum table) decodes to an error.
    std::fs::write(&path, &good).unwrap();
    let f = PageFile::open(&path).unwrap();
    let mut page = good[PAGE_BYTES..2 * PAGE_BYTES].to_vec();
    page[0] = 0xff; // member count past the capacity
    assert!(f.decode(0, &page).is_err());
    let mut page = good[PAGE_BYTES..2 * PAGE_BYTES].to_vec();
    page[8] ^= 1; // a member id of another page
    assert!(f.decode(0, &page).is_err());
    assert!(f.decode(0, &page[..100]).is_err());
}

#[test]
fn capacity_follows_dimension_and_type() {
    // GloVe 50 × f32 over 390K vectors, 32 page edges per vector: 17 per page (620 bytes
    // left for 544 page ids below 22,942, 6 low bits each: 521 bytes; 18 would leave 416).
    assert_eq!(auto_capacity(200, 390_000, 32), 17);
    assert_eq!(auto_capacity(200, 390_000, 64), 15);
    // 100 × f32 over 400K vectors.
    assert_eq!(auto_capacity(400, 400_000, 32), 9);
    // 384 × f32: two per page whatever the degree asked.
    assert_eq!(auto_capacity(1536, 200_000, 64), 2);
    // 128 × f32, 1M vectors: 7 fill a page alone.
    assert_eq!(auto_capacity(512, 1_000_000, 32), 7);
    // 128 × u8: many more.
    assert!(auto_capacity(128, 1_000_000, 32) >= 14);
    // A vector that fills a page on its own: one, with an empty list allowed.
    assert_eq!(max_capacity(4080), 1);
    assert_eq!(auto_capacity(4084, 1000, 8), 1);
    assert_eq!(entries_that_fit(0, 1000), 0);
    assert!(entries_that_fit(100, 1000) > 50);
}

#[test]
fn regroup_keeps_pages_places_new_vectors_and_splits() {
    use crate::kinds::graph::layout::pages::place::regroup;
    let (v, graph) = data(400, 8, 10, 9);
    let cap = 6;
    let g = group(&graph, &v, 8, Metric::L2, cap, 2, 0, |s| s < 300, || {});
    // Slots 0..300 were grouped; 0, 7, 14, … are deleted, 300..400 are new, and slot 3 holds
    // another vector (deleted and taken again).
    let include = |s: u32| !s.is_multiple_of(7) || s >= 300;
    let kept = |s: u32| s < 300 && s != 3;
    let (after, r) = regroup(&graph, &v, 8, Metric::L2, cap, &g.pages, kept, include);
    let mut seen = vec![0u8; 400];
    for (p, members) in after.pages.iter().enumerate() {
        assert!(!members.is_empty() && members.len() <= cap);
        for &s in members {
            seen[s as usize] += 1;
            assert_eq!(after.page_of[s as usize], p as u32);
        }
    }
    for s in 0..400u32 {
        assert_eq!(seen[s as usize], u8::from(include(s)), "slot {s}");
    }
    let removed = (0..300u32).filter(|&s| !include(s) || !kept(s)).count() as u64;
    assert_eq!(r.removed, removed);
    assert_eq!(r.kept, 300 - removed);
    assert_eq!(r.placed + r.new_pages, 100 + 1);
    assert!(r.splits > 0 && r.placed > 0, "{r:?}");
    // Old members of one page never end up beside old members of another.
    for members in &after.pages {
        let from: std::collections::HashSet<u32> = members
            .iter()
            .filter(|&&s| kept(s) && include(s))
            .map(|&s| g.page_of[s as usize])
            .collect();
        assert!(from.len() <= 1, "{from:?}");
    }
}
