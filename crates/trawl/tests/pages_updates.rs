//! Updates on the page-node layout: a live index searched on page nodes takes inserts and
//! deletes at once, and a merge keeps the page nodes (deleted vectors leave their page, new
//! ones join the page of their nearest neighbour, full pages split), with the parameters the
//! layout was written with.

mod common;

use std::collections::{HashMap, HashSet};

use common::{build, data};
use trawl::data::Matrix;
use trawl::exact::{knn, ExactParams};
use trawl::kinds::graph::layout::pages::build::PageParams;
use trawl::kinds::graph::layout::pages::{PageFile, FILE_NAME, NO_VECTOR};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::ids::SlotIds;
use trawl::kinds::graph::updates::live::{Access, LiveIndex};
use trawl::kinds::graph::{IndexLayout, OpenOptions};
use trawl::progress::Control;
use trawl::Metric;

const DIM: usize = 16;

fn rows(m: &Matrix<f32>, from: usize, count: usize) -> Vec<f32> {
    m.as_slice()[from * DIM..(from + count) * DIM].to_vec()
}

/// The page nodes of the layout in `dir`, as external ids, with its file.
fn pages_by_id(dir: &std::path::Path) -> (PageFile, Vec<Vec<u64>>) {
    let f = PageFile::open(&dir.join(FILE_NAME)).unwrap();
    let ids = SlotIds::load(dir, f.meta().n as usize).unwrap();
    let cap = f.meta().capacity;
    let pages = f
        .read_order()
        .unwrap()
        .chunks_exact(cap)
        .map(|c| {
            c.iter()
                .filter(|&&s| s != NO_VECTOR)
                .map(|&s| {
                    assert!(!ids.is_hole(s), "slot {s} is free but on a page");
                    ids.id(s)
                })
                .collect()
        })
        .collect();
    (f, pages)
}

/// Every live id on exactly one page, no page over capacity; and each page's members that
/// were on a page before came from one page (pages only split, never mix).
fn check_pages(before: &[Vec<u64>], after: &[Vec<u64>], live: &HashSet<u64>, cap: usize) {
    let mut seen = HashSet::new();
    for p in after {
        assert!(!p.is_empty() && p.len() <= cap, "{p:?}");
        for &id in p {
            assert!(seen.insert(id), "id {id} on two pages");
        }
    }
    assert_eq!(&seen, live, "the pages hold exactly the live vectors");
    let old_page: HashMap<u64, usize> = before
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.iter().map(move |&id| (id, i)))
        .collect();
    for p in after {
        let from: HashSet<usize> = p
            .iter()
            .filter_map(|id| old_page.get(id))
            .copied()
            .collect();
        assert!(from.len() <= 1, "a page mixes members of pages {from:?}");
    }
}

/// recall@10 of `ix` against exact search over `live` (id → row of `all`).
fn recall(ix: &LiveIndex, live: &HashMap<u64, usize>, all: &Matrix<f32>, q: &Matrix<f32>) -> f64 {
    let ids: Vec<u64> = live.keys().copied().collect();
    let vecs: Vec<f32> = ids.iter().flat_map(|id| rows(all, live[id], 1)).collect();
    let base = Matrix::from_vec(vecs, DIM).unwrap();
    let t = knn(
        &base,
        q,
        10,
        Metric::L2,
        &ExactParams::default(),
        &Control::silent(),
    )
    .unwrap();
    let out = ix
        .search_rows(q.as_slice(), &SearchParams::beam(10, 12, 4), 2, 1)
        .unwrap();
    common::recall_of_ids(&out.ids, &t, &ids)
}

#[test]
fn merges_keep_the_page_nodes_place_new_vectors_and_split_full_pages() {
    let dir = tempfile::tempdir().unwrap();
    let (all, q) = data::<f32>(4_000, 60, DIM, 31);
    let base = Matrix::from_vec(rows(&all, 0, 2_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    // Small pages, so that the inserts fill them and splits are exercised.
    let asked = PageParams {
        capacity: 4,
        max_degree: 40,
        ..PageParams::default()
    };
    common::open(dir.path())
        .write_pages(&asked, &Control::silent())
        .unwrap();
    let opts = OpenOptions {
        layout: IndexLayout::Pages,
        ..OpenOptions::default()
    };
    let mut live: HashMap<u64, usize> = (0..2_000u64).map(|i| (i, i as usize)).collect();
    let (first, mut before) = pages_by_id(dir.path());
    let cap = first.meta().capacity;
    let hops = first.meta().hops;
    let m = first.meta();
    assert_eq!((m.degree_cap, m.min_degree), (40, m.graph_r));
    assert!(hops > 0 && cap == 4);
    let mut next_row = 2_000usize;
    let mut splits = 0;
    for round in 0..3u64 {
        let ix = LiveIndex::open(dir.path(), opts, Access::ReadWrite).unwrap();
        // Delete 10% of the live vectors (spread over the pages), insert 15% new ones.
        let mut ids: Vec<u64> = live.keys().copied().collect();
        ids.sort_unstable();
        let gone: Vec<u64> = ids.iter().copied().step_by(10).collect();
        ix.delete(&gone).unwrap();
        for g in &gone {
            live.remove(g);
        }
        let new: Vec<u64> = (0..600).map(|i| 100_000 * (round + 1) + i).collect();
        ix.insert(Some(&new), &rows(&all, next_row, 600)).unwrap();
        for (k, &id) in new.iter().enumerate() {
            live.insert(id, next_row + k);
        }
        next_row += 600;
        // Seen at once, on the page nodes plus the in-memory delta.
        let gone_set: HashSet<u64> = gone.iter().copied().collect();
        let out = ix
            .search_rows(
                &rows(&all, next_row - 600, 600),
                &SearchParams::beam(1, 12, 4),
                2,
                1,
            )
            .unwrap();
        let found = out.ids.iter().zip(&new).filter(|(a, b)| a == b).count();
        assert!(
            found >= 590,
            "round {round}: {found} of 600 new vectors found"
        );
        let r = ix.merge(2, &Control::silent()).unwrap();
        let p = r.pages_placement.expect("the merge kept the page nodes");
        assert_eq!(p.removed, gone.len() as u64, "{p:?}");
        assert_eq!(
            p.kept + p.removed,
            before.iter().map(|b| b.len() as u64).sum::<u64>()
        );
        assert_eq!(p.placed + p.new_pages, 600, "{p:?}");
        let (f, after) = pages_by_id(dir.path());
        // Pages are dropped when emptied, made by splits and by new vectors with no placed
        // neighbour; splits happen exactly when a full page takes a vector, which must happen
        // when the kept pages had fewer free slots than the vectors placed.
        let gone_now: HashSet<u64> = gone.iter().copied().collect();
        let free: usize = before
            .iter()
            .map(|b| b.iter().filter(|id| !gone_now.contains(id)).count())
            .filter(|&kept| kept > 0)
            .map(|kept| cap - kept)
            .sum();
        assert_eq!(
            after.len() as u64,
            before.len() as u64 - p.dropped_pages + p.splits + p.new_pages,
            "{p:?}"
        );
        assert!(
            p.placed as usize <= free || p.splits > 0,
            "{p:?}, {free} free"
        );
        splits += p.splits;
        assert_eq!(f.meta().capacity, cap, "the merge keeps the capacity");
        assert_eq!((f.meta().hops, f.meta().degree_cap), (hops, 40));
        assert!(f.meta().max_degree <= 40);
        let live_set: HashSet<u64> = live.keys().copied().collect();
        check_pages(&before, &after, &live_set, cap);
        // The merged pages are searched: no deleted id, the new ones found, recall kept.
        let out = ix
            .search_rows(q.as_slice(), &SearchParams::beam(10, 12, 4), 2, 1)
            .unwrap();
        assert!(out.ids.iter().all(|i| !gone_set.contains(i)));
        let rec = recall(&ix, &live, &all, &q);
        assert!(rec >= 0.9, "round {round}: recall {rec}");
        trawl::kinds::graph::verify_index(dir.path(), &Control::silent()).unwrap();
        before = after;
    }
    assert!(
        splits > 0,
        "three rounds of inserts into pages of 4 split none"
    );
}

#[test]
fn a_damaged_page_node_file_does_not_stop_a_merge_and_is_grouped_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let (all, _) = data::<f32>(2_400, 10, DIM, 33);
    let base = Matrix::from_vec(rows(&all, 0, 2_000), DIM).unwrap();
    build(&base, dir.path(), Metric::L2, 16);
    common::open(dir.path())
        .write_pages(&PageParams::default(), &Control::silent())
        .unwrap();
    // Damage the order table (the file's last page): the page-node file no longer opens.
    let path = dir.path().join(FILE_NAME);
    let mut raw = std::fs::read(&path).unwrap();
    let at = raw.len() - 4096;
    raw[at] ^= 0xff;
    std::fs::write(&path, &raw).unwrap();
    assert!(PageFile::open(&path).is_err());
    let ix = LiveIndex::open(dir.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    ix.delete(&[1, 2, 3]).unwrap();
    ix.insert(None, &rows(&all, 2_000, 400)).unwrap();
    let r = ix.merge(2, &Control::silent()).unwrap();
    assert!(r.pages_placement.is_none(), "grouped afresh: {r:?}");
    let (f, pages) = pages_by_id(dir.path());
    let placed: usize = pages.iter().map(|p| p.len()).sum();
    assert_eq!(placed, 2_397);
    assert_eq!(
        f.meta().n,
        2_000 + 397,
        "the new vectors took the 3 freed slots first"
    );
    trawl::kinds::graph::verify_index(dir.path(), &Control::silent()).unwrap();
}
