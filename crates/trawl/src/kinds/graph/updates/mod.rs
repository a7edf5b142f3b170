//! Streaming updates of a graph index (FreshDiskANN's design, DecoupleVS §3.5): stable u64 ids
//! ([`ids`]), a crash-safe write-ahead log ([`wal`]), an in-memory Vamana delta searched beside
//! the disk index (`delta`, [`live`]) and StreamingMerge into new disk files in one atomic
//! commit ([`merge`]; the decoupled layout's vector segments and their map: [`segments`]).

pub(crate) mod delta;
pub mod ids;
pub mod live;
pub mod merge;
pub mod segments;
pub mod wal;
