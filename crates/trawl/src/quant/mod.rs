//! Vector quantisers: compact codes of vectors and fast approximate distances to them.
//!
//! This folder owns training quantisers, encoding vectors into codes, and the per-query
//! tables that turn a code into an approximate distance. It does not own where codes live on
//! disk next to the graph (that is `kinds::graph::layout`) nor the search that uses them.
//!
//! [`pq::ProductQuantizer`] (product quantisation with 8-bit codes and asymmetric distance
//! computation) guides the searches; [`sq::RefineCodes`] (4- or 8-bit scalar codes) sharpen
//! the decoupled layout's re-rank order.

pub mod pq;
pub mod sq;

use crate::data::Matrix;
use crate::kernels::{Element, Metric};
use crate::progress::Control;

/// A trainable vector quantiser with asymmetric (query-table) distances.
///
/// Kept small on purpose: train on a matrix, encode a matrix, build a table for one query.
pub trait Quantizer: Sized {
    /// User-facing training parameters.
    type Params;
    /// The codes of many vectors.
    type Codes;
    /// A per-query distance table.
    type Table: DistanceTable;
    /// The error of every operation.
    type Error: std::error::Error;

    /// Learns the quantiser from `data` for distances of `metric`.
    fn train<T: Element>(
        data: &Matrix<T>,
        metric: Metric,
        params: &Self::Params,
        ctl: &Control,
    ) -> Result<Self, Self::Error>;

    /// Encodes every row of `data`.
    fn encode<T: Element>(
        &self,
        data: &Matrix<T>,
        ctl: &Control,
    ) -> Result<Self::Codes, Self::Error>;

    /// The distance table of one query.
    fn query_table<T: Element>(&self, query: &[T]) -> Result<Self::Table, Self::Error>;
}

/// Approximate distances from one query to encoded vectors.
pub trait DistanceTable {
    /// Bytes of one code.
    fn code_bytes(&self) -> usize;
    /// The approximate distance to the vector with code `code` (`code_bytes()` long).
    fn distance(&self, code: &[u8]) -> f32;
}
