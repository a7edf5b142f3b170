//! The memory plan: what an opened index keeps in memory within one budget
//! ([`Options::memory_budget`](crate::kinds::Options::memory_budget)), chosen before anything
//! is loaded, from the files' headers and sizes.
//!
//! Every kind plans the same way: first what its search cannot run without (the *required*
//! items — codebooks, the layout's page checksums, PQ codes or All-in-Storage records, the
//! attributes filters read, the search threads' buffers), then the uses that buy the most
//! reads per byte, in a fixed order per kind (the graph kind: the update delta of a writable
//! open, the node or list cache, then the entry index; `kinds::graph::plan` documents the
//! order, measured, and how it picks a layout when asked to). A budget below the
//! required items is refused with the minimum ([`PlanError::BelowMinimum`]). The plan is
//! printed by `trawl info --plan BUDGET` and kept in the opened index's memory report.

use serde::Serialize;

/// One use of memory in a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanItem {
    /// What it is (`pq_codes`, `node_cache`, …; the memory report's names).
    pub name: &'static str,
    /// Bytes it holds.
    pub bytes: u64,
    /// The search cannot run without it.
    pub required: bool,
    /// What the bytes buy, in words (nodes cached, reads per query saved, …).
    pub detail: String,
}

impl PlanItem {
    /// The required item of the attributes filters read (`bytes` of them), if any.
    pub fn attrs(bytes: u64) -> Option<PlanItem> {
        (bytes > 0).then(|| PlanItem {
            name: "attrs",
            bytes,
            required: true,
            detail: "labels and fields filters read".into(),
        })
    }
}

/// What an index keeps in memory within a budget.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct MemoryPlan {
    /// The budget, bytes.
    pub budget: u64,
    /// The least budget the index opens in (the required items).
    pub minimum: u64,
    /// The layout the plan is for (graph kind).
    pub layout: Option<String>,
    /// Graph kind: the planner picked the layout ([`crate::kinds::Options::layout_auto`]).
    pub layout_picked: bool,
    /// Graph kind, a record layout with a hot-node order: disk reads per sample search
    /// (L 15, W 4) the node cache leaves (`hot.trawl`'s counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads_left: Option<f64>,
    /// Graph kind: search with PageSearch (the planner picked the shuffled layout, whose
    /// pages it reads whole).
    pub page_search: bool,
    /// Every item, required first, then in the order they were granted.
    pub items: Vec<PlanItem>,
    /// Graph kind: nodes of the static node cache.
    pub cache_nodes: usize,
    /// Sharded kind: each shard's node cache (their sum is `cache_nodes`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shard_cache_nodes: Vec<usize>,
    /// Graph kind, decoupled layout: bytes of the list cache.
    pub list_cache_bytes: u64,
    /// Graph kind, decoupled layout: the list cache is pinned at open from the hot-node order
    /// (else an LRU cache filled as searches run).
    pub list_pinned: bool,
    /// Graph kind, decoupled layout: bits per dimension of the refinement codes to load
    /// from `refine.trawl` (0: none).
    pub refine_bits: u8,
    /// Graph kind: load the entry index.
    pub entry: bool,
    /// Graph kind, writable: bytes the update delta and a write's log buffer may take (the
    /// live index refuses inserts beyond them until a merge).
    pub delta_bytes: u64,
    /// What the planner noted (a layout changed to fit, a use left out and why).
    pub notes: Vec<String>,
}

impl MemoryPlan {
    /// Bytes the items hold.
    pub fn planned(&self) -> u64 {
        self.items.iter().map(|i| i.bytes).sum()
    }

    /// Budget left unplanned.
    pub fn unused(&self) -> u64 {
        self.budget.saturating_sub(self.planned())
    }

    /// The plan as a table, one item per line.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "memory plan for a budget of {} (minimum {}){}:\n",
            human(self.budget),
            human(self.minimum),
            self.layout
                .as_ref()
                .map_or(String::new(), |l| format!(", {l} layout"))
        );
        for i in &self.items {
            s += &format!(
                "  {:<14} {:>11}  {}{}\n",
                i.name,
                human(i.bytes),
                if i.required { "required; " } else { "" },
                i.detail
            );
        }
        s += &format!(
            "  {:<14} {:>11}  of {}\n",
            "planned",
            human(self.planned()),
            human(self.budget)
        );
        for n in &self.notes {
            s += &format!("  note: {n}\n");
        }
        s
    }
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    /// The budget does not hold what the search cannot run without.
    #[error(
        "a memory budget of {} is below this index's minimum of {} ({what}){hint}",
        human(*budget),
        human(*minimum)
    )]
    BelowMinimum {
        /// The budget asked for.
        budget: u64,
        /// The least budget that opens the index.
        minimum: u64,
        /// The required items, in words.
        what: String,
        /// How to open it in less (another layout), or empty.
        hint: String,
    },
}

impl MemoryPlan {
    /// The plan of a kind whose every item is required (nothing to buy with more budget):
    /// `items` within `budget`, or the error naming the minimum.
    pub fn required_only(
        budget: u64,
        items: Vec<PlanItem>,
        notes: Vec<String>,
    ) -> Result<MemoryPlan, PlanError> {
        let minimum = PlanError::check(budget, &items, String::new())?;
        Ok(MemoryPlan {
            budget,
            minimum,
            items,
            notes,
            ..MemoryPlan::default()
        })
    }
}

impl PlanError {
    /// The sum of `required`, or the error when `budget` is below it (`hint`: how to open
    /// in less, or empty).
    pub fn check(budget: u64, required: &[PlanItem], hint: String) -> Result<u64, PlanError> {
        let minimum: u64 = required.iter().map(|i| i.bytes).sum();
        if minimum <= budget {
            return Ok(minimum);
        }
        Err(PlanError::BelowMinimum {
            budget,
            minimum,
            what: required
                .iter()
                .map(|i| format!("{} {}", i.name, human(i.bytes)))
                .collect::<Vec<_>>()
                .join(", "),
            hint,
        })
    }
}

/// Payload bytes of the trawl file `name` in `dir` (its size less the envelope's header; 0
/// when absent).
pub fn payload_bytes(dir: &std::path::Path, name: &str) -> u64 {
    std::fs::metadata(dir.join(name))
        .map(|m| {
            m.len()
                .saturating_sub(crate::dir::file::HEADER_BYTES as u64)
        })
        .unwrap_or(0)
}

/// `bytes` in binary units, e.g. `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parses a memory size: a number of bytes, or a number with a binary unit (`512M`, `1.5G`,
/// `2GiB`, `64k`; K, M, G, T = 2^10, 2^20, 2^30, 2^40).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 512M, 1.5G, 2147483648)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("{other:?} in {s:?} is not a unit (K, M, G or T)")),
    };
    let bytes = v * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(format!("{s:?} is not a usable size"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_bytes(" 2GiB ").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("64k").unwrap(), 64 << 10);
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("-1G").is_err());
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(100), "100 B");
    }
}
