//! The filters of a batch search ([`Filters`]), and the planner that picks, per query, how a
//! filter is searched ([`Plan`]) from the number of rows it matches and a cost model.
//!
//! The plans:
//!
//! - **inline**: the index's own search (graph traversal, IVF lists) with the filter applied
//!   to what it returns: rows that do not match are traversed, never returned; the list size
//!   grows as the filter narrows (`L / selectivity`, at most `max_scale × L`);
//! - **scan**: every matching row scored by its code in memory (PQ, a `u16` table that stays
//!   in L1, the codes fetched ahead), the best `rerank` (the list size, between `k` and
//!   `max(4·k, 32)`) read and scored exactly — no traversal, one round trip of reads;
//! - **exact**: every matching row read and scored exactly (when they are fewer than a scan
//!   would re-rank).
//!
//! The cost model compares scoring the matches' codes and reading the re-rank's pages with
//! the pages an inline search reads; its constants are in [`CostModel`] with how they were
//! measured.

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
    /// Candidates a scan re-ranks exactly (0: the list size `L`, at least `k` and at most
    /// `max(4·k, 32)`: `L` is the one knob of recall against speed for every plan).
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

/// The planner's costs, in nanoseconds of machine time per query (threads / QPS): an inline
/// search reads about `inline_pages` pages beyond its list (the descent from its seeds, the
/// beam's reads that do not pay off), each at `page_ns`; a scan scores every match's code at
/// `code_byte_ns` a byte and reads the pages of its re-rank.
///
/// Measured by `bench/filtered.py` (its "Planner" section fits them from trawl's forced
/// `inline` and `scan` sweeps and its unfiltered one; `python3 bench/filtered.py
/// zipf-glove-400k --nq 200 --sides trawl --trawl-interleave 4`) on the development machine
/// (AMD EPYC, 2 cores, the shared virtio disk, O_DIRECT, 2 threads × 4 queries in flight;
/// GloVe-400K, 48-byte PQ): a page about 30 µs (mostly device time at that depth), 25 pages
/// beyond the list (30 pages at L 10 unfiltered), a code byte about 0.5 ns (the `u16` table,
/// codes fetched ahead, the matches gathered). What decides a plan is their ratio: a scan wins
/// below ~20% of the rows where no label start node narrows the traversal, and for a gated
/// label below a few percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// One code scored, per byte of code.
    pub code_byte_ns: f64,
    /// One page read and its record expanded or re-ranked, all included.
    pub page_ns: f64,
    /// Pages an inline search reads beyond its list size.
    pub inline_pages: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            code_byte_ns: 0.5,
            page_ns: 30_000.0,
            inline_pages: 25.0,
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
        l.clamp(k, (4 * k).max(32).max(k))
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
                let c = &p.cost;
                let scan = m as f64 * b as f64 * c.code_byte_ns + rerank as f64 * c.page_ns;
                let inline = (inline_list as f64 + c.inline_pages) * c.page_ns;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn count(rows: u64) -> Count {
        Count { rows, exact: true }
    }

    #[test]
    fn a_scan_reranks_the_list_size_within_its_bounds() {
        let p = FilterParams {
            plan: Some(Plan::Scan),
            ..FilterParams::default()
        };
        let list = |k, l| plan(&p, count(50_000), 1_000_000, k, l, Some(32)).list;
        assert_eq!(list(10, 10), 10);
        assert_eq!(list(10, 20), 20);
        assert_eq!(list(10, 100), 40);
        assert_eq!(list(50, 10), 50);
        assert_eq!(list(50, 1000), 200);
        // A forced scan without codes in memory reads every match.
        let pl = plan(&p, count(500), 1_000_000, 10, 10, None);
        assert_eq!((pl.plan, pl.list), (Plan::Exact, 500));
        // Under the planner, as few matches as a scan would re-rank are read exactly.
        let auto = FilterParams::default();
        let pl = plan(&auto, count(30), 1_000_000, 10, 100, Some(32));
        assert_eq!((pl.plan, pl.list), (Plan::Exact, 30));
    }

    #[test]
    fn the_planner_scans_narrow_filters_and_traverses_wide_ones() {
        let p = FilterParams::default();
        let n = 1_000_000;
        let pick = |m| plan(&p, count(m), n, 10, 20, Some(32)).plan;
        // 0.5% of the rows: a traversal would grow its list 16×; scoring 5,000 codes is cheap.
        assert_eq!(pick(5_000), Plan::Scan);
        // A label whose start nodes gate the traversal counts against its own rows (list
        // ×1): a scan of its few thousand codes still beats the descent's pages, not of
        // its hundred thousand.
        let gated = |m| plan(&p, count(m), m, 10, 10, Some(48)).plan;
        assert_eq!(gated(3_000), Plan::Scan);
        assert_eq!(gated(100_000), Plan::Inline);
        // Half the rows: the list doubles; scoring half a million codes is not cheap.
        assert_eq!(pick(500_000), Plan::Inline);
        // The inline list grows as the filter narrows, at most max_scale×.
        let pl = plan(
            &FilterParams {
                plan: Some(Plan::Inline),
                ..p
            },
            count(100_000),
            n,
            10,
            20,
            Some(32),
        );
        assert_eq!(pl.list, 200);
        let pl = plan(
            &FilterParams {
                plan: Some(Plan::Inline),
                ..p
            },
            count(10),
            n,
            10,
            20,
            Some(32),
        );
        assert_eq!(pl.list, 320);
    }
}
