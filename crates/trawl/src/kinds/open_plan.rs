//! Opening within a memory budget: the plan of an index of any kind
//! ([`crate::kinds::plan`]) for [`Options::memory_budget`], and the options it sets.

use std::path::Path;

use crate::kinds::graph::KindName;
use crate::kinds::options::{bad, check_read_only};
use crate::kinds::{kind_of, Error, Options};

/// The memory plan of the index in `dir` for `o.memory_budget` (an error when `o` has none,
/// or the budget is below the index's minimum). Reads the files' headers and checksum
/// tables only.
pub fn plan_memory(dir: &Path, o: &Options) -> Result<crate::kinds::plan::MemoryPlan, Error> {
    let Some(budget) = o.memory_budget else {
        return bad("no memory_budget to plan".into());
    };
    let kind = kind_of(dir)?;
    if o.layout_auto && kind != KindName::Graph {
        return bad(format!(
            "{}: an automatic layout is picked for a graph index; this is {} index",
            dir.display(),
            kind.with_article()
        ));
    }
    match kind {
        KindName::Graph if o.layout_auto => Ok(crate::kinds::graph::plan::plan_auto(
            dir,
            &o.plan_ask(dir, budget),
        )?),
        KindName::Graph => Ok(crate::kinds::graph::plan::plan(
            dir,
            &o.plan_ask(dir, budget),
        )?),
        KindName::Ivf => {
            if o.writable {
                return bad(format!(
                    "{}: IVF indexes do not take updates yet: open it read-only",
                    dir.display()
                ));
            }
            Ok(crate::kinds::ivf::plan::plan(
                dir,
                o.ivf_vectors,
                budget,
                o.threads.max(1),
                o.fastscan && o.accel == crate::accel::AccelKind::Cpu,
            )??)
        }
        KindName::Sharded => {
            if o.writable {
                return bad(format!(
                    "{}: updates to sharded indexes are not supported: open it read-only",
                    dir.display()
                ));
            }
            let first = dir.join(crate::kinds::sharded::shard_dir_name(0));
            crate::kinds::sharded::plan::plan(dir, &o.plan_ask(&first, budget))
        }
        KindName::Flat => {
            check_read_only(dir, o, KindName::Flat)?;
            crate::kinds::flat::plan(dir, budget, o.threads.max(1))
        }
    }
}

impl Options {
    /// What a graph index's plan (in `dir`, or a sharded index's shard there) depends on
    /// besides its files, for `budget`.
    pub(super) fn plan_ask(&self, dir: &Path, budget: u64) -> crate::kinds::graph::plan::PlanAsk {
        let opts = self.open_options(dir);
        crate::kinds::graph::plan::PlanAsk {
            budget,
            layout: opts.layout,
            threads: self.threads.max(1),
            interleave: self.interleave.max(1),
            queue_depth: opts.queue_depth,
            writable: self.writable,
            static_uses: true,
        }
    }

    /// These options with `plan` applied: its layout, node cache, list cache, refinement
    /// codes and entry index. Options the plan sets are refused when also given.
    pub(super) fn with_plan(
        &self,
        dir: &Path,
        plan: &crate::kinds::plan::MemoryPlan,
    ) -> Result<Options, Error> {
        if self.cache_nodes > 0 || self.list_pin > 0.0 || self.refine_bits > 0 {
            return bad(format!(
                "{}: memory_budget plans the caches; leave cache_nodes, list_pin and \
                 refine_bits unset with it",
                dir.display()
            ));
        }
        let mut o = self.clone();
        if let Some(name) = &plan.layout {
            o.layout = name
                .parse()
                .map_err(|e: String| Error::InvalidInput(format!("the plan's layout: {e}")))?;
        }
        o.cache_nodes = plan.cache_nodes;
        o.list_cache_mb = plan.list_cache_bytes as f64 / (1u64 << 20) as f64;
        o.refine_bits = plan.refine_bits;
        o.list_pin = if plan.list_pinned { 1.0 } else { 0.0 };
        o.load_entry = plan.entry;
        o.page_search |= plan.page_search;
        Ok(o)
    }
}
