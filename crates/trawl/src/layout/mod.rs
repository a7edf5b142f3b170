//! On-disk layouts. For now: the envelope every trawl file shares ([`header`]) and the
//! little-endian byte codec used for payloads ([`bytes`]).

pub mod bytes;
pub mod header;

pub use header::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
