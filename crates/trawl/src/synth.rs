//! Seeded synthetic data: anisotropic Gaussian mixtures and held-out queries.
