//! k-means clustering (k-means++ initialisation, Lloyd iterations), used by product
//! quantisation and by the sharded graph build.
