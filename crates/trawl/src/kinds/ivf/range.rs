//! Range search of an IVF index.

use crate::data::Queries;
use crate::kernels::Element;
use crate::kinds::ivf::{IvfIndex, IvfSearchParams};
use crate::kinds::Run;
use crate::search::{BatchOutput, SearchError};

impl IvfIndex {
    /// Range search of every query (in progress).
    pub fn range_search_batch<T: Element>(
        &self,
        _q: Queries<'_, T>,
        _radius: f32,
        _p: &IvfSearchParams,
        _run: Run,
        _filter: &crate::filter::QueryFilter<'_>,
    ) -> Result<BatchOutput, SearchError> {
        Err(SearchError::Unsupported("IVF range search: in progress".into()))
    }
}
