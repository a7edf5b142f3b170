//! On-disk layouts: the envelope every trawl file shares ([`header`]), the little-endian byte
//! codec used for payloads ([`bytes`]) and the page-packed disk index ([`packed`]).

pub mod bytes;
pub mod header;
pub mod packed;
pub mod shuffle;

pub use header::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
