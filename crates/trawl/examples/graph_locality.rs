//! How many graph pages a decoupled-layout query would read if `graph.trawl` held its lists in
//! PageShuffle order instead of id order (an estimate, before building such a layout).
//!
//! ```text
//! cargo run --release -p trawl --example graph_locality -- INDEX QUERIES.fbin L NQ [ENTRY_LIST]
//! ```
//!
//! Runs beam search (width 8, no list cache) on the decoupled layout, traces the expanded
//! nodes of each query, and counts the distinct graph pages they lie on: in id order (the
//! file as written), with the lists placed by PageShuffle at the file's lists per page, and
//! grouped by the vector key (graph-order vector positions) at the same page size. Distinct
//! pages are a lower bound on the reads (a page landed is assumed kept for the query).

use std::collections::HashSet;
use std::error::Error;
use std::path::Path;

use trawl::data::read::read_matrix;
use trawl::kinds::graph::layout::shuffle::{shuffle, Csr};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::{DiskIndex, IndexLayout, OpenOptions};

fn main() -> Result<(), Box<dyn Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 4 {
        return Err("usage: graph_locality INDEX QUERIES L NQ [ENTRY_LIST]".into());
    }
    let dir = Path::new(&a[0]);
    let queries = read_matrix::<f32>(Path::new(&a[1]))?;
    let l: usize = a[2].parse()?;
    let nq: usize = a[3].parse()?;
    let entry: usize = a.get(4).map(|s| s.parse()).transpose()?.unwrap_or(0);
    let opts = OpenOptions {
        layout: IndexLayout::Decoupled,
        list_cache_bytes: 0,
        ..OpenOptions::default()
    };
    let index = DiskIndex::open(dir, opts)?;
    let d = index.decoupled().ok_or("no decoupled layout")?;
    let g = d.graph();
    let n = g.meta().n as usize;
    let per_page = (n as f64 / g.data_pages() as f64).round() as usize;
    eprintln!(
        "n {n}, {} data pages, {per_page} lists per page",
        g.data_pages()
    );
    let mut lists = vec![Vec::new(); n];
    let mut keys = vec![0u32; n];
    g.scan_entries(|id, list, key| {
        lists[id as usize] = list.to_vec();
        keys[id as usize] = key.unwrap_or(id);
        Ok::<(), trawl::dir::FileError>(())
    })?;
    let csr = Csr::from_lists(&lists);
    let t = std::time::Instant::now();
    let (shuf, rep) = shuffle(&csr, per_page, 8, || {});
    eprintln!(
        "shuffle {:.1} s, overlap ratio: id order {:.3}, shuffled {:.3}",
        t.elapsed().as_secs_f64(),
        rep.or_identity,
        rep.or_final
    );
    let mut params = SearchParams::beam(10, l, 8);
    params.entry_list = entry;
    let mut s = index.searcher()?;
    let mut hits = Vec::new();
    let (mut by_id, mut by_shuffle, mut by_key, mut expanded) = (0usize, 0usize, 0usize, 0usize);
    let nq = nq.min(queries.n());
    for q in 0..nq {
        s.start_trace();
        s.search(queries.row(q), &params, &mut hits)?;
        let tr = s.take_trace();
        expanded += tr.len();
        let distinct =
            |page: &dyn Fn(u32) -> u64| tr.iter().map(|&i| page(i)).collect::<HashSet<_>>().len();
        by_id += distinct(&|i| g.locate(i));
        by_shuffle += distinct(&|i| u64::from(shuf[i as usize]));
        by_key += distinct(&|i| u64::from(keys[i as usize]) / per_page as u64);
    }
    let per = |x: usize| x as f64 / nq as f64;
    println!(
        "L {l}, entry list {entry}: expanded {:.1}; distinct graph pages per query: id order {:.1}, \
         PageShuffle {:.1}, vector-key order {:.1}",
        per(expanded),
        per(by_id),
        per(by_shuffle),
        per(by_key)
    );
    Ok(())
}
