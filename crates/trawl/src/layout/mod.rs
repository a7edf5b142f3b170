//! On-disk layouts: the envelope every trawl file shares ([`header`]), the little-endian byte
//! codec used for payloads ([`bytes`]), the page-packed disk index ([`packed`]), its
//! PageShuffle order ([`shuffle`]) and the codecs of the decoupled layout ([`decoupled`]).

pub mod bytes;
pub mod decoupled;
pub mod header;
pub mod packed;
pub mod shuffle;

pub use header::{read_envelope, EnvelopeWriter, FileError, FileErrorKind};
