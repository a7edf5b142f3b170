//! The re-rank's scoring of one landed read: the vectors it serves, or every vector on its
//! page (page mates) that the query's filter keeps.

use crate::filter::Predicate;
use crate::kernels::{Element, Metric};
use crate::kinds::ivf::pages::IvfPages;
use crate::search::rerank::{VectorSource, NO_KEY};
use crate::search::SearchError;

use super::search::Flight;

/// Scores the vectors read `r` of flight `f` serves — or, with `page_mates`, every vector on
/// its page — into the flight's top-`K`, after checking the read.
#[allow(clippy::too_many_arguments)]
pub(super) fn score_read<T: Element>(
    vs: &IvfPages<'_>,
    metric: Metric,
    query: &[T],
    f: &mut Flight,
    r: usize,
    bytes: &[u8],
    page_mates: bool,
    words: &mut [u32],
    keep: Option<&Predicate<'_>>,
) -> Result<(), SearchError> {
    let read = &f.reads[r];
    vs.check_read(read.page, bytes)?;
    let mates = if page_mates {
        vs.ids_on_page(read.page)
    } else {
        &[]
    };
    if mates.is_empty() {
        for &(id, at) in &read.vectors {
            let d = exact::<T>(vs, metric, query, (id, at), read.page, bytes, words)?;
            f.st.traversal.exact_distances += 1;
            f.entered += usize::from(f.top.offer(d, id));
        }
        return Ok(());
    }
    // Every vector on the page (the j-th at j × vector bytes); the candidates this read
    // serves are among them.
    let n = std::mem::size_of_val(query);
    let mut scored = 0u64;
    for (j, &id) in mates.iter().enumerate() {
        // A page mate the query's filter rejects is not scored (every candidate matches).
        if id == u32::MAX || keep.is_some_and(|k| !k.matches(id)) {
            continue;
        }
        let d = exact::<T>(vs, metric, query, (id, j * n), read.page, bytes, words)?;
        scored += 1;
        f.entered += usize::from(f.top.offer(d, id));
    }
    f.st.traversal.exact_distances += scored;
    f.st.ivf.page_mates += scored - read.vectors.len() as u64;
    Ok(())
}

/// Exact distance between `query` and vector `id` at place `at` of `bytes` (the read of
/// `page`), copied into aligned words first.
#[inline]
pub(super) fn exact<T: Element>(
    vs: &IvfPages<'_>,
    metric: Metric,
    query: &[T],
    (id, at): (u32, usize),
    page: u64,
    bytes: &[u8],
    words: &mut [u32],
) -> Result<f32, SearchError> {
    let w: &mut [u8] = bytemuck::cast_slice_mut(words);
    let n = std::mem::size_of_val(query);
    vs.decode_at(id, NO_KEY, page, at, bytes, &mut w[..n])?;
    let v: &[T] = bytemuck::cast_slice(&w[..n]);
    Ok(crate::kernels::distance(metric, query, v))
}
