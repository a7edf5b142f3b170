//! The filters of a batch search ([`Filters`]), and the planner that picks, per query, how a
//! filter is searched ([`Plan`]) from the number of rows it matches and a cost model.
//!
//! The plans:
//!
//! - **inline**: the index's own search (graph traversal, IVF lists) with the filter applied
//!   to what it returns: rows that do not match are traversed, never returned; the list size
//!   grows as the filter narrows (`L / selectivity`, at most `max_scale × L`);
//! - **scan**: every matching row scored by its code in memory (PQ), the best `rerank` read
//!   and scored exactly — no traversal, one round trip of reads;
//! - **exact**: every matching row read and scored exactly (when they are fewer than a scan
//!   would re-rank).
//!
//! The cost model compares the CPU of scoring the matches' codes with the expansions an
//! inline search adds; its two constants are in [`CostModel`] with how they were measured.

use crate::filter::{Count, Expr};

/// The filters of a batch of queries.
#[derive(Debug, Clone, Copy, Default)]
pub enum Filters<'a> {
    /// No filter.
    #[default]
    None,
    /// One filter for every query.
    All(&'a Expr),
    /// Query `i`'s filter at `i` (`None`: that query is not filtered).
    PerQuery(&'a [Option<Expr>]),
}

impl<'a> Filters<'a> {
    /// Query `q`'s filter.
    pub fn get(&self, q: usize) -> Option<&'a Expr> {
        match self {
            Self::None => None,
            Self::All(e) => Some(e),
            Self::PerQuery(v) => v.get(q).and_then(Option::as_ref),
        }
    }

    /// Whether no query is filtered.
    pub fn is_none(&self) -> bool {
        match self {
            Self::None => true,
            Self::All(_) => false,
            Self::PerQuery(v) => v.iter().all(Option::is_none),
        }
    }

    /// Checks that per-query filters number the queries.
    pub fn check(&self, nq: usize) -> Result<(), String> {
        match self {
            Self::PerQuery(v) if v.len() != nq => Err(format!(
                "{} filters for {nq} queries (one per query)",
                v.len()
            )),
            _ => Ok(()),
        }
    }
}

/// How one filtered query is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// The index's search, the filter applied to its results, the list scaled.
    Inline,
    /// The matches scored by their codes in memory, the best re-ranked exactly.
    Scan,
    /// Every match read and scored exactly.
    Exact,
}

impl Plan {
    /// `inline`, `scan` or `exact`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Scan => "scan",
            Self::Exact => "exact",
        }
    }

    /// Parses a plan's name.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "inline" => Some(Self::Inline),
            "scan" => Some(Self::Scan),
            "exact" => Some(Self::Exact),
            _ => None,
        }
    }
}

/// The planner's options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterParams {
    /// A plan forced on every filtered query (for benchmarks); `None`: the planner's choice.
    pub plan: Option<Plan>,
    /// Largest factor the inline plan multiplies the list size by.
    pub max_scale: f64,
    /// Candidates a scan re-ranks exactly (0: `max(4·k, 32)`).
    pub rerank: usize,
    /// The cost model.
    pub cost: CostModel,
}

impl Default for FilterParams {
    fn default() -> Self {
        Self {
            plan: None,
            max_scale: 16.0,
            rerank: 0,
            cost: CostModel::default(),
        }
    }
}

/// The planner's costs, in nanoseconds of one search thread.
///
/// Initial figures from the development machine (AMD EPYC, 2 cores, the shared virtio disk,
/// GloVe-400K at 32-byte PQ): scoring one code with a query's table costs about 1.2 ns per
/// sub-quantiser; an expansion of an inline search about 15 µs of a thread's time at full
/// throughput (reads included). `bench/filtered.py` measures both plans per selectivity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// One code scored, per byte of code.
    pub code_byte_ns: f64,
    /// One node expanded by a traversal (or one exact read), all included.
    pub expansion_ns: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            code_byte_ns: 1.2,
            expansion_ns: 15_000.0,
        }
    }
}

/// What the planner chose for one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    /// The plan.
    pub plan: Plan,
    /// Rows matching.
    pub count: Count,
    /// The list size (inline) or the candidates re-ranked (scan); every match (exact).
    pub list: usize,
}

/// The plan for a query of `k` results at list size `l` whose filter matches `count` of `n`
/// rows; `code_bytes` is the size of a code in memory (`None`: no codes in memory, so no
/// scan).
pub fn plan(
    p: &FilterParams,
    count: Count,
    n: u64,
    k: usize,
    l: usize,
    code_bytes: Option<usize>,
) -> Planned {
    let m = count.rows;
    let rerank = if p.rerank == 0 {
        (4 * k).max(32)
    } else {
        p.rerank
    };
    let sel = if n == 0 { 0.0 } else { m as f64 / n as f64 };
    let scale = (1.0 / sel.max(1e-12)).clamp(1.0, p.max_scale.max(1.0));
    let inline_list = ((l as f64 * scale).ceil() as usize).max(l);
    let chosen = match p.plan {
        Some(Plan::Scan) if code_bytes.is_none() => Plan::Exact,
        Some(forced) => forced,
        None if m as usize <= rerank => Plan::Exact,
        None => match code_bytes {
            None => {
                // No codes in memory: read every match, or traverse.
                if m as f64 <= inline_list as f64 {
                    Plan::Exact
                } else {
                    Plan::Inline
                }
            }
            Some(b) => {
                let scan =
                    m as f64 * b as f64 * p.cost.code_byte_ns + rerank as f64 * p.cost.expansion_ns;
                let inline = inline_list as f64 * p.cost.expansion_ns;
                if scan < inline {
                    Plan::Scan
                } else {
                    Plan::Inline
                }
            }
        },
    };
    let list = match chosen {
        Plan::Inline => inline_list,
        Plan::Scan => rerank,
        Plan::Exact => m as usize,
    };
    Planned {
        plan: chosen,
        count,
        list,
    }
}

/// What a batch search is filtered by: the filters and the planner's options.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryFilter<'a> {
    /// The filters.
    pub filters: Filters<'a>,
    /// The planner's options.
    pub params: FilterParams,
}

impl QueryFilter<'_> {
    /// No filter.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether no query is filtered.
    pub fn is_none(&self) -> bool {
        self.filters.is_none()
    }
}
