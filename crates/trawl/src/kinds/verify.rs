//! [`VerifyReport`]: what `verify` of every kind returns.

use serde::Serialize;

use crate::dir::component::VerifiedFile;

/// Every file of an index, verified: the files in the order their components checked them,
/// and the checks of the whole that a kind adds (left out where a kind has none).
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Whether the index has a manifest (each file was also checked against it).
    pub manifest: bool,
    /// The files, in the order checked.
    pub files: Vec<VerifiedFile>,
    /// A graph index's connectivity from its medoid (every node must be reachable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connectivity: Option<crate::vamana::connectivity::Connectivity>,
    /// The data pages of vectors checked (IVF and flat kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_pages: Option<u64>,
}
