//! Vamana graph build (robust prune, back-edges, sharded build under a memory budget) and
//! in-memory graph search.
