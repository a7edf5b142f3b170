//! On-disk layouts of the graph (payloads use the byte codec of [`crate::dir::bytes`]):
//! the page-packed disk index ([`packed`]), its PageShuffle order ([`shuffle`]), the page-node
//! graph ([`pages`]) and the codecs of the decoupled layout ([`decoupled`]). The envelope every trawl file shares is
//! [`crate::dir::file`].

pub mod decoupled;
pub mod packed;
pub mod pages;
pub mod shuffle;
