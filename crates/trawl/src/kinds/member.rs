//! Recognising the shard of a sharded index, so that updates through its directory are
//! refused.
//!
//! A sharded search reads each shard's index files and never replays a shard's write-ahead
//! log (an update through a shard's directory would use the shard's local ids, miss the
//! replicas of a vector in other shards, and leave the manifest's counts and id maps stale),
//! so updates to sharded indexes are not supported: [`crate::kinds::graph::updates::live::LiveIndex::open`] refuses
//! to open a shard for writing ([`updates_refused`]), and [`crate::kinds::sharded::ShardedIndex::open`]
//! refuses a shard whose log holds operations not merged into its files (one written by an
//! older trawl).
//!
//! A directory is a shard when the folder above it holds a shard manifest (`shards.trawl`)
//! or a sharded build's plan (`shards.plan.trawl`) that lists it — by the directory as named
//! and as resolved through symbolic links, so `sh/shard-000/`, `sh/shard-000/.`, a link to
//! it, or the shard's own directory as `.` are all recognised. A manifest or plan that cannot
//! be read counts as listing every `shard-NNN` directory beside it.

use std::path::{Path, PathBuf};

use crate::kinds::sharded::manifest::{ShardManifest, SHARD_MANIFEST_FILE};
use crate::kinds::sharded::SHARD_PLAN_FILE;

/// Where a directory belongs as a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardOf {
    /// The manifest (or plan) that lists it.
    pub manifest: PathBuf,
    /// Its position in that manifest (`None` when the manifest could not be read).
    pub shard: Option<usize>,
}

/// Whether `name` is a directory name a sharded build gives (`shard-` and digits).
fn build_shard_name(name: &str) -> bool {
    name.strip_prefix("shard-")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The folder above `dir` and `dir`'s name, as named and as resolved.
fn candidates(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut push = |p: &Path| {
        let (Some(name), Some(parent)) = (p.file_name().and_then(|n| n.to_str()), p.parent())
        else {
            return;
        };
        let parent = if parent.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            parent.to_path_buf()
        };
        let c = (parent, name.to_string());
        if !out.contains(&c) {
            out.push(c);
        }
    };
    push(dir);
    if let Ok(real) = std::fs::canonicalize(dir) {
        push(&real);
    }
    out
}

/// Whether `dir` is a shard of a sharded index (see the module docs), and where.
pub fn shard_of(dir: &Path) -> Option<ShardOf> {
    for (parent, name) in candidates(dir) {
        for file in [SHARD_MANIFEST_FILE, SHARD_PLAN_FILE] {
            let manifest = parent.join(file);
            if !manifest.is_file() {
                continue;
            }
            match ShardManifest::read_header(&manifest) {
                Ok(h) => {
                    if let Some(s) = h
                        .shards
                        .iter()
                        .position(|e| Path::new(&e.dir) == Path::new(&name))
                    {
                        return Some(ShardOf {
                            manifest,
                            shard: Some(s),
                        });
                    }
                }
                Err(_) if build_shard_name(&name) => {
                    return Some(ShardOf {
                        manifest,
                        shard: None,
                    })
                }
                Err(_) => {}
            }
        }
    }
    None
}

/// The message refusing an update through `dir`, when `dir` is a shard of a sharded index.
pub fn updates_refused(dir: &Path) -> Option<String> {
    let of = shard_of(dir)?;
    let which = match of.shard {
        Some(s) => format!("shard {s}"),
        None => "a shard".to_string(),
    };
    Some(format!(
        "{}: this directory is {which} of a sharded index ({}): updates to sharded indexes \
         are not supported (insert, delete, upsert and merge through a shard's directory are \
         refused: the sharded search would not see them); rebuild the sharded index from the \
         updated data (`trawl shard build`)",
        dir.display(),
        of.manifest.display()
    ))
}
