//! The fuzz targets' short run on the stable toolchain, part of `cargo test`: the kept corpus of
//! every target (`fuzz/corpus/<target>/`) is replayed, then valid files of every format and kind
//! are mutated (bytes flipped, cut, extended, header fields set to extreme values, checksums
//! re-sealed so forged values reach the parsers) and fed to the same entry points as the
//! `cargo fuzz` targets (`fuzz/src/harness.rs`). Every input must give a value or a typed error
//! naming the file; a panic fails the test and leaves the input in the temporary directory.
//!
//! `TRAWL_FUZZ_SMOKE_SECS` sets the mutation budget per target (default 6 s).

#[path = "../../../fuzz/src/harness.rs"]
mod harness;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 4] = [
    ("vector_inputs", harness::vector_inputs),
    ("trawl_files", harness::trawl_files),
    ("codecs", harness::codecs),
    ("index_files", harness::index_files),
];

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Runs `f` on `input`; on a panic, saves the input and fails naming it.
fn run(target: &str, f: Target, input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
        let path = std::env::temp_dir().join(format!(
            "trawl-fuzz-smoke-{target}-{:08x}",
            crc32fast::hash(input)
        ));
        let _ = std::fs::write(&path, input);
        panic!(
            "{target} panicked on an input, saved to {} (replay it with `cargo fuzz run {target} <file>`)",
            path.display()
        );
    }
}

fn budget() -> Duration {
    let secs = std::env::var("TRAWL_FUZZ_SMOKE_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(6.0);
    Duration::from_secs_f64(secs)
}

#[test]
fn corpus_replays_without_panics() {
    for (target, f) in TARGETS {
        let dir = corpus_dir(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus for {target}");
        for file in &files {
            run(target, f, &std::fs::read(file).unwrap());
        }
        eprintln!("{target}: {} corpus inputs replayed", files.len());
    }
}

/// Mutates the valid seeds of `target` until the budget or the iteration cap is spent.
fn mutate_seeds(target: &str, f: Target) {
    let seeds: Vec<Vec<u8>> = harness::seeds()
        .into_iter()
        .filter(|(t, _)| *t == target)
        .map(|(_, s)| s)
        .collect();
    assert!(!seeds.is_empty());
    // Selector bytes: 1 for vector inputs and codecs, 2 for trawl and index files (kind,
    // flags).
    let files = matches!(target, "trawl_files" | "index_files");
    let head = if files { 2 } else { 1 };
    let start = Instant::now();
    let budget = budget();
    let mut rng = harness::Rng(0x7261_776c ^ target.len() as u64);
    let mut runs = 0u64;
    while start.elapsed() < budget && runs < 2_000_000 {
        let seed = &seeds[rng.below(seeds.len())];
        let (sel, body) = seed.split_at(head);
        let mut sel = sel.to_vec();
        let mut body = body.to_vec();
        for _ in 0..1 + rng.below(3) {
            harness::mutate(&mut body, &mut rng);
        }
        if files {
            // Mostly re-sealed (forged values reach the parsers), sometimes with the envelope
            // length kept as forged, sometimes left with stale checksums.
            sel[1] = [1u8, 1, 1, 3, 0][rng.below(5)];
        } else if rng.below(8) == 0 {
            sel[0] = rng.next_u64() as u8;
        }
        let input = [sel, body].concat();
        run(target, f, &input);
        runs += 1;
    }
    eprintln!(
        "{target}: {runs} mutated inputs in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(runs > 0);
}

#[test]
fn mutated_vector_inputs() {
    mutate_seeds("vector_inputs", harness::vector_inputs);
}

#[test]
fn mutated_trawl_files() {
    mutate_seeds("trawl_files", harness::trawl_files);
}

#[test]
fn mutated_codecs() {
    mutate_seeds("codecs", harness::codecs);
}

#[test]
fn mutated_index_files() {
    mutate_seeds("index_files", harness::index_files);
}
