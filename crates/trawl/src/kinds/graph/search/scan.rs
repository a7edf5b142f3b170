//! The filtered scan's reads: given the candidates a filter's plan chose (every match, or the
//! best matches by PQ distance), read their records — one read per distinct page, as many in
//! flight as the engine has slots — and score each candidate exactly. Records layouts only
//! (packed, PageShuffle, All-in-Storage); the decoupled layout's filtered queries are searched
//! inline.

use std::time::Instant;

use crate::io::{Completion, ReadRequest};
use crate::kernels::{self, Element};
use crate::kinds::graph::search::layouts::LayoutReader;
use crate::kinds::graph::search::source::{GraphSource, RecordSource};
use crate::kinds::graph::search::Searcher;
use crate::search::runner::drain_engine;
use crate::search::{QueryStats, SearchError};

/// Whether `layout` can score candidates by their records ([`score_records`]).
pub fn can_score(layout: &LayoutReader) -> bool {
    !matches!(layout, LayoutReader::Decoupled(_))
}

/// Reads the records of `ids` and puts the `k` nearest to `query` into `out`, nearest first
/// (ties by id). Every read is counted in `stats` (one request per distinct page).
pub fn score_records<T: Element>(
    s: &mut Searcher<'_>,
    query: &[T],
    ids: &[u32],
    k: usize,
    out: &mut Vec<(u32, f32)>,
    stats: &mut QueryStats,
) -> Result<(), SearchError> {
    let view = *s.view();
    let g = match view.layout {
        LayoutReader::Packed(g) | LayoutReader::Shuffled(g) | LayoutReader::AllInStorage(g) => g,
        LayoutReader::Decoupled(_) | LayoutReader::Pages(_) => {
            return Err(SearchError::Unsupported(
                "scoring by records needs a layout with records (not the decoupled or page-node one)".into(),
            ))
        }
    };
    let mut by_page: Vec<(u64, u32)> = ids.iter().map(|&id| (g.locate(id), id)).collect();
    by_page.sort_unstable();
    by_page.dedup();
    // Runs of one page: (page, first index in by_page, end).
    let mut runs: Vec<(u64, usize, usize)> = Vec::new();
    for (i, &(page, _)) in by_page.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.0 == page => r.2 = i + 1,
            _ => runs.push((page, i, i + 1)),
        }
    }
    let pages = g.pages_per_read();
    let metric = view.space.metric;
    let mut scored: Vec<(u32, f32)> = Vec::with_capacity(by_page.len());
    let mut scratch: Vec<T> = Vec::new();
    let mut done: Vec<Completion> = Vec::new();
    let engine = s.engine_mut();
    let depth = engine.depth().max(1);
    let mut result = Ok(());
    'chunks: for chunk in runs.chunks(depth) {
        for (i, &(page, _, _)) in chunk.iter().enumerate() {
            if let Err(e) = engine.submit(
                i as u64,
                ReadRequest {
                    first_page: page,
                    pages,
                },
            ) {
                result = Err(e.into());
                break 'chunks;
            }
            stats.count_read(pages, g.nodes_on_page(page));
        }
        let mut got = 0;
        while got < chunk.len() {
            done.clear();
            let t0 = Instant::now();
            match engine.wait(1, &mut done) {
                Ok(n) => got += n,
                Err(e) => {
                    result = Err(e.into());
                    break 'chunks;
                }
            }
            stats.io.io_wait_ns += t0.elapsed().as_nanos() as u64;
            for c in &done {
                let (page, from, to) = chunk[c.tag as usize];
                let bytes = engine.buffer(c.slot);
                if result.is_ok() {
                    result = g.check_read(page, bytes).and_then(|()| {
                        for &(_, id) in &by_page[from..to] {
                            let rec = g.record(id, page, bytes)?;
                            let d = kernels::distance(metric, query, rec.vector::<T>(&mut scratch));
                            scored.push((id, d));
                        }
                        Ok(())
                    });
                }
                engine.release(c.slot);
            }
        }
        if result.is_err() {
            break;
        }
    }
    if result.is_err() {
        drain_engine(engine, &mut done);
        return result;
    }
    stats.traversal.exact_distances += scored.len() as u64;
    scored.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    out.clear();
    out.extend_from_slice(&scored);
    Ok(())
}
