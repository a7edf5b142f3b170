//! Vector quantisers: product quantisation.
