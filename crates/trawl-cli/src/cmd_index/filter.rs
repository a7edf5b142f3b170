//! The filter flags of `search`, `bench` and `gt`: `--filter` (one expression for every
//! query), `--filters` (a file, line `i` query `i`'s expression, an empty line none) and
//! `--filter-plan` (force a plan, for benchmarks).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::Args;
use trawl::filter::{Expr, FilterParams, Filters, Plan, QueryFilter};

/// Filters as parsed from the flags.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// No filter.
    None,
    /// One for every query.
    All(Expr),
    /// One per query.
    PerQuery(Vec<Option<Expr>>),
}

/// The filter flags.
#[derive(Debug, Args, Clone, Default)]
pub struct FilterArgs {
    /// Return only vectors matching this filter, e.g. `lang = "en" AND year >= 2024`
    /// (numeric fields: = != < <= > >= IN BETWEEN; labels: `label = "x"` for a plain label,
    /// `key = "v"` for a label `key=v`, IN (any of), HAS ALL (…); AND, OR, NOT, parentheses).
    #[arg(long, conflicts_with = "filters")]
    pub filter: Option<String>,
    /// One filter per query: line i is query i's filter (an empty line: none).
    #[arg(long)]
    pub filters: Option<PathBuf>,
    /// How filtered queries are searched: auto (the planner, from the number of matches),
    /// inline (the graph traversal, results filtered, list scaled), scan (matches scored by
    /// PQ in memory, the best read) or exact (every match read).
    #[arg(long, default_value = "auto", value_parser = ["auto", "inline", "scan", "exact"])]
    pub filter_plan: String,
    #[arg(skip)]
    parsed: OnceLock<Parsed>,
}

/// Reads a filter file: one expression per line, an empty line for no filter.
pub fn read_filter_file(path: &Path) -> Result<Vec<Option<Expr>>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the filter file {}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let line = line.trim();
            if line.is_empty() {
                return Ok(None);
            }
            trawl::filter::parse(line)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("{}, line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

impl FilterArgs {
    /// The filters, parsed once.
    pub fn parsed(&self) -> Result<&Parsed> {
        if let Some(p) = self.parsed.get() {
            return Ok(p);
        }
        let p = match (&self.filter, &self.filters) {
            (Some(text), _) => Parsed::All(
                trawl::filter::parse(text).map_err(|e| anyhow::anyhow!("--filter: {e}"))?,
            ),
            (None, Some(path)) => Parsed::PerQuery(read_filter_file(path)?),
            (None, None) => Parsed::None,
        };
        Ok(self.parsed.get_or_init(|| p))
    }

    /// The planner's options.
    pub fn params(&self) -> FilterParams {
        FilterParams {
            plan: Plan::from_name(&self.filter_plan),
            ..FilterParams::default()
        }
    }

    /// The filter of a batch of `nq` queries.
    pub fn query_filter(&self, nq: usize) -> Result<QueryFilter<'_>> {
        let filters = match self.parsed()? {
            Parsed::None => Filters::None,
            Parsed::All(e) => Filters::All(e),
            Parsed::PerQuery(v) => {
                if v.len() != nq {
                    anyhow::bail!(
                        "--filters holds {} lines for {nq} queries (one line per query)",
                        v.len()
                    );
                }
                Filters::PerQuery(v)
            }
        };
        Ok(QueryFilter {
            filters,
            params: self.params(),
        })
    }
}
