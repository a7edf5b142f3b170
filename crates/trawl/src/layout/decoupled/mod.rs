//! DecoupleVS's decoupled layout: graph and full-precision vectors in separate, losslessly
//! compressed files. So far only the graph file's codec exists: [`elias_fano`], the coding of
//! one sorted neighbour list; the files themselves are not written yet.

pub mod elias_fano;
