//! DecoupleVS's decoupled layout: the graph and the full-precision vectors in separate,
//! losslessly compressed files.
//!
//! - [`graph`] (`graph.trawl`): sorted neighbour lists, Elias-Fano coded ([`elias_fano`]), in
//!   4 KiB pages with a per-page header and CRC; an in-memory sparse index (first node of each
//!   page) locates a list.
//! - [`vectors`] (`vectors.trawl`): segments → chunks → pages; per chunk an optional XOR with a
//!   base vector, then Huffman coding ([`huffman`]) with per-segment, per-byte-lane tables.
//!
//! Search reads only the graph file while it traverses (PQ in memory guides it) and fetches
//! vectors for the final re-rank ([`crate::kinds::graph::search::rerank`]).

pub mod elias_fano;
pub mod graph;
pub mod huffman;
mod vector_meta;
pub mod vectors;

#[cfg(test)]
mod tests;
