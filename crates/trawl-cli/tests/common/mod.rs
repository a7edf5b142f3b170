//! Helpers shared by the CLI test files: running the binary, expecting success or a clean
//! failure, writing small vector files.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `trawl --quiet ARGS`.
pub fn trawl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .arg("--quiet")
        .args(args)
        .output()
        .expect("the trawl binary runs")
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = trawl(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "trawl {args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command that must fail; returns its error message after checking it is not a panic.
pub fn fails(args: &[&str]) -> String {
    let out = trawl(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "trawl {args:?} should fail");
    assert!(
        !stderr.contains("panicked"),
        "trawl {args:?} panicked: {stderr}"
    );
    assert!(
        stderr.starts_with("error: "),
        "trawl {args:?}: unexpected stderr {stderr}"
    );
    stderr
}

/// [`fails`], and with exit status 1 (a refused value, not a usage error).
pub fn fails_cleanly(args: &[&str]) -> String {
    let code = trawl(args).status.code();
    let stderr = fails(args);
    assert_eq!(code, Some(1), "trawl {args:?}: {stderr}");
    stderr
}

/// The path as `&str`.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes an fbin file of `n` × `dim` values.
pub fn write_fbin(path: &Path, n: u32, dim: u32, values: &[f32]) {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&n.to_le_bytes());
    bytes.extend_from_slice(&dim.to_le_bytes());
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}
