//! A sharded index's memory plan ([`crate::kinds::plan`]): every shard's required items
//! first (each shard is a graph index searched by every thread), then what is left shared out
//! by shard size and planned per shard as a graph index's; the items are summed by name.

use std::path::Path;

use crate::kinds::graph::plan::{plan as graph_plan, GraphPlanError, PlanAsk};
use crate::kinds::plan::{human, MemoryPlan, PlanError, PlanItem};
use crate::kinds::sharded::{ShardManifest, SHARD_MANIFEST_FILE};
use crate::kinds::Error;

/// Plans the sharded index in `dir` within `ask.budget`.
pub fn plan(dir: &Path, ask: &PlanAsk) -> Result<MemoryPlan, Error> {
    let m = ShardManifest::load(&dir.join(SHARD_MANIFEST_FILE))
        .map_err(|e| Error::InvalidInput(e.to_string()))?;
    let shards = &m.header.shards;
    let n: u64 = shards.iter().map(|e| e.count).sum::<u64>().max(1);
    // A sharded open takes no pinned lists or refinement codes: plan the shards without.
    let ask = &PlanAsk {
        static_uses: false,
        ..*ask
    };
    let all = PlanAsk {
        budget: u64::MAX / 4,
        ..*ask
    };
    let mut minimums = Vec::with_capacity(shards.len());
    for e in shards {
        minimums.push(graph_plan(&dir.join(&e.dir), &all)?.minimum);
    }
    let minimum: u64 = minimums.iter().sum();
    if minimum > ask.budget {
        return Err(Error::Budget(PlanError::BelowMinimum {
            budget: ask.budget,
            minimum,
            what: format!(
                "{} shards, each's required items: {}",
                shards.len(),
                minimums
                    .iter()
                    .map(|&b| human(b))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            hint: String::new(),
        }));
    }
    let left = ask.budget - minimum;
    let mut out = MemoryPlan {
        budget: ask.budget,
        minimum,
        entry: true,
        ..MemoryPlan::default()
    };
    for (s, e) in shards.iter().enumerate() {
        let share = (u128::from(left) * u128::from(e.count) / u128::from(n)) as u64;
        let p = graph_plan(
            &dir.join(&e.dir),
            &PlanAsk {
                budget: minimums[s] + share,
                ..*ask
            },
        )
        .map_err(|e| match e {
            GraphPlanError::Open(e) => Error::Open(e),
            GraphPlanError::Plan(e) => Error::Budget(e),
        })?;
        out.layout = p.layout.clone();
        out.cache_nodes += p.cache_nodes;
        out.shard_cache_nodes.push(p.cache_nodes);
        out.list_cache_bytes += p.list_cache_bytes;
        out.entry &= p.entry || !p.items.iter().any(|i| i.name == "entry");
        for item in p.items {
            match out.items.iter_mut().find(|i| i.name == item.name) {
                Some(have) => have.bytes += item.bytes,
                None => out.items.push(PlanItem {
                    detail: format!("summed over {} shards", shards.len()),
                    ..item
                }),
            }
        }
        out.notes
            .extend(p.notes.into_iter().map(|t| format!("shard {s}: {t}")));
    }
    Ok(out)
}
