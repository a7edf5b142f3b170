//! Exact k-nearest-neighbour search (ground truth): blocked, multi-threaded, memory bounded.
