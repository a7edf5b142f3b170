//! cargo-fuzz target: see `trawl_fuzz::harness::index_files`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| trawl_fuzz::harness::index_files(data));
