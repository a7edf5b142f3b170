//! trawl's fuzzing harness: see [`harness`].

pub mod harness;
