//! Search parameters set by name: the names of Python's `SearchParams` (the network service's
//! `params` object and query string use them), each checked here and written into an
//! [`Options`], which resolves them per kind like every other front end's.

use crate::kinds::graph::search::{Grain, WidthPolicy, WidthSchedule};
use crate::kinds::{Error, Options};

/// Every search parameter [`Options::set_search_param`] knows, by its Python name.
pub const SEARCH_PARAM_NAMES: [&str; 35] = [
    "L",
    "beam_width",
    "strategy",
    "entry_list",
    "pipe_width",
    "pipe_start_width",
    "pipe_max_width",
    "dynamic_width",
    "page_search",
    "rerank_batch",
    "rerank_threshold",
    "rerank_bound",
    "prefetch",
    "prefetch_window",
    "converge_prefetch",
    "rerank_lookahead",
    "rerank_depth",
    "rerank_n",
    "ivf_batch",
    "ivf_epsilon",
    "ivf_beta",
    "heuristic",
    "page_merge",
    "page_buffer",
    "page_mates",
    "centroid_list",
    "accel_batch",
    "batch",
    "staleness",
    "grain",
    "strict_steps",
    "probe",
    "range_slack",
    "range_width",
    "range_early_stop",
];

/// A parameter's value: from JSON, or the text of a query string.
#[derive(Debug, Clone, Copy)]
pub enum ParamValue<'a> {
    /// A JSON value (`null` resets an optional parameter to its default).
    Json(&'a serde_json::Value),
    /// Text (`"100"`, `"true"`, `"pipe"`; empty resets an optional parameter).
    Text(&'a str),
}

impl ParamValue<'_> {
    fn is_null(&self) -> bool {
        match self {
            Self::Json(v) => v.is_null(),
            Self::Text(t) => t.is_empty() || *t == "null" || *t == "None",
        }
    }

    fn shown(&self) -> String {
        match self {
            Self::Json(v) => v.to_string(),
            Self::Text(t) => format!("{t:?}"),
        }
    }

    fn count(&self, name: &str, min: usize) -> Result<usize, Error> {
        let v = match self {
            Self::Json(v) => v.as_u64(),
            Self::Text(t) => t.trim().parse::<u64>().ok(),
        };
        match v.and_then(|v| usize::try_from(v).ok()) {
            Some(v) if v >= min => Ok(v),
            _ => Err(Error::InvalidInput(format!(
                "{name} = {}: expected a whole number ≥ {min}",
                self.shown()
            ))),
        }
    }

    fn float(&self, name: &str) -> Result<f32, Error> {
        let v = match self {
            Self::Json(v) => v.as_f64(),
            Self::Text(t) => t.trim().parse::<f64>().ok(),
        };
        match v {
            Some(v) if v.is_finite() => Ok(v as f32),
            _ => Err(Error::InvalidInput(format!(
                "{name} = {}: expected a finite number",
                self.shown()
            ))),
        }
    }

    fn flag(&self, name: &str) -> Result<bool, Error> {
        let v = match self {
            Self::Json(v) => v.as_bool(),
            Self::Text(t) => match t.trim() {
                "true" | "True" | "1" => Some(true),
                "false" | "False" | "0" => Some(false),
                _ => None,
            },
        };
        v.ok_or_else(|| {
            Error::InvalidInput(format!("{name} = {}: expected true or false", self.shown()))
        })
    }

    fn text(&self, name: &str) -> Result<&str, Error> {
        match self {
            Self::Json(serde_json::Value::String(s)) => Ok(s),
            Self::Text(t) => Ok(t),
            Self::Json(v) => Err(Error::InvalidInput(format!(
                "{name} = {v}: expected a string"
            ))),
        }
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<T, Error>
    where
        T::Err: std::fmt::Display,
    {
        let t = self.text(name)?;
        t.parse()
            .map_err(|e| Error::InvalidInput(format!("{name} = {t:?}: {e}")))
    }
}

impl Options {
    /// Sets the search parameter `name` (a name of [`SEARCH_PARAM_NAMES`], as Python's
    /// `SearchParams` spells it) to `value`, checked; an unknown name is an error listing the
    /// known ones. What the value means for each kind is resolved later, as for every front
    /// end ([`Options::params`]).
    pub fn set_search_param(&mut self, name: &str, value: ParamValue<'_>) -> Result<(), Error> {
        let v = value;
        match name {
            "L" => {
                self.l = if v.is_null() {
                    None
                } else {
                    Some(v.count(name, 1)?)
                }
            }
            "beam_width" => self.beam_width = v.count(name, 1)?,
            "strategy" => self.strategy = v.text(name)?.to_string(),
            "entry_list" => self.entry_list = v.count(name, 0)?,
            "pipe_width" => self.pipe_width = v.parsed::<WidthPolicy>(name)?,
            "pipe_start_width" => self.pipe_start_width = v.count(name, 1)?,
            "pipe_max_width" => self.pipe_max_width = v.count(name, 1)?,
            "dynamic_width" => {
                self.dynamic_width = if v.is_null() {
                    None
                } else {
                    Some(v.parsed::<WidthSchedule>(name)?)
                }
            }
            "page_search" => self.page_search = v.flag(name)?,
            "rerank_batch" => self.rerank_batch = v.count(name, 1)?,
            "rerank_threshold" => self.rerank_threshold = v.float(name)?,
            "rerank_bound" => self.rerank_bound = v.float(name)?,
            "prefetch" => self.prefetch = v.flag(name)?,
            "prefetch_window" => self.prefetch_window = v.count(name, 0)?,
            "converge_prefetch" => self.converge_prefetch = v.flag(name)?,
            "rerank_lookahead" => self.rerank_lookahead = v.count(name, 0)?,
            "rerank_depth" => self.rerank_depth = v.count(name, 0)?,
            "rerank_n" => {
                self.rerank_n = if v.is_null() {
                    None
                } else {
                    Some(v.count(name, 1)?)
                }
            }
            "ivf_batch" => self.ivf_batch = v.count(name, 1)?,
            "ivf_epsilon" => self.ivf_epsilon = v.float(name)?,
            "ivf_beta" => self.ivf_beta = v.count(name, 1)?,
            "heuristic" => self.heuristic = v.flag(name)?,
            "page_merge" => self.page_merge = v.flag(name)?,
            "page_buffer" => self.page_buffer = v.flag(name)?,
            "page_mates" => self.page_mates = v.flag(name)?,
            "centroid_list" => self.centroid_list = v.count(name, 0)?,
            "accel_batch" => self.accel_batch = v.count(name, 0)?,
            "batch" => self.flash_batch = v.count(name, 0)?,
            "staleness" => self.staleness = v.count(name, 0)?,
            "grain" => self.grain = v.parsed::<Grain>(name)?,
            "strict_steps" => self.strict_steps = v.count(name, 0)?,
            "probe" => self.probe = v.count(name, 0)?,
            "range_slack" => self.range_slack = v.float(name)?,
            "range_width" => self.range_width = v.count(name, 0)?,
            "range_early_stop" => self.range_early_stop = v.count(name, 0)?,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown search parameter {name:?}; the parameters are {}",
                    SEARCH_PARAM_NAMES.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// The value of search parameter `name` (a name of [`SEARCH_PARAM_NAMES`]) as JSON, as
    /// [`Options::set_search_param`] takes it back; `None` for an unknown name.
    pub fn search_param(&self, name: &str) -> Option<serde_json::Value> {
        use serde_json::json;
        Some(match name {
            "L" => json!(self.l),
            "beam_width" => json!(self.beam_width),
            "strategy" => json!(self.strategy),
            "entry_list" => json!(self.entry_list),
            "pipe_width" => json!(self.pipe_width.name()),
            "pipe_start_width" => json!(self.pipe_start_width),
            "pipe_max_width" => json!(self.pipe_max_width),
            "dynamic_width" => json!(self.dynamic_width.map(|w| w.to_string())),
            "page_search" => json!(self.page_search),
            "rerank_batch" => json!(self.rerank_batch),
            "rerank_threshold" => json!(self.rerank_threshold),
            "rerank_bound" => json!(self.rerank_bound),
            "prefetch" => json!(self.prefetch),
            "prefetch_window" => json!(self.prefetch_window),
            "converge_prefetch" => json!(self.converge_prefetch),
            "rerank_lookahead" => json!(self.rerank_lookahead),
            "rerank_depth" => json!(self.rerank_depth),
            "rerank_n" => json!(self.rerank_n),
            "ivf_batch" => json!(self.ivf_batch),
            "ivf_epsilon" => json!(self.ivf_epsilon),
            "ivf_beta" => json!(self.ivf_beta),
            "heuristic" => json!(self.heuristic),
            "page_merge" => json!(self.page_merge),
            "page_buffer" => json!(self.page_buffer),
            "page_mates" => json!(self.page_mates),
            "centroid_list" => json!(self.centroid_list),
            "accel_batch" => json!(self.accel_batch),
            "batch" => json!(self.flash_batch),
            "staleness" => json!(self.staleness),
            "grain" => json!(self.grain.name()),
            "strict_steps" => json!(self.strict_steps),
            "probe" => json!(self.probe),
            "range_slack" => json!(self.range_slack),
            "range_width" => json!(self.range_width),
            "range_early_stop" => json!(self.range_early_stop),
            _ => return None,
        })
    }

    /// The search parameters where these options differ from `base`, by name.
    pub fn search_params_changed(
        &self,
        base: &Options,
    ) -> serde_json::Map<String, serde_json::Value> {
        SEARCH_PARAM_NAMES
            .iter()
            .filter_map(|&n| {
                let v = self.search_param(n)?;
                (Some(&v) != base.search_param(n).as_ref()).then(|| (n.to_string(), v))
            })
            .collect()
    }

    /// These options with every parameter of the JSON object `params` set
    /// ([`Options::set_search_param`]), then checked.
    pub fn with_search_params(
        &self,
        params: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Options, Error> {
        let mut o = self.clone();
        for (name, value) in params {
            o.set_search_param(name, ParamValue::Json(value))?;
        }
        o.validate()?;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_sets_its_option_and_bad_values_are_named() {
        let mut o = Options::default();
        let j = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        o.set_search_param("L", ParamValue::Json(&j("64"))).unwrap();
        o.set_search_param("strategy", ParamValue::Text("pipe"))
            .unwrap();
        o.set_search_param("page_search", ParamValue::Text("true"))
            .unwrap();
        o.set_search_param("batch", ParamValue::Json(&j("8")))
            .unwrap();
        o.set_search_param("rerank_n", ParamValue::Json(&j("null")))
            .unwrap();
        assert_eq!(o.l, Some(64));
        assert_eq!(o.strategy, "pipe");
        assert!(o.page_search);
        assert_eq!(o.flash_batch, 8);
        assert_eq!(o.rerank_n, None);
        let e = o
            .set_search_param("L", ParamValue::Json(&j("-3")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("L = -3"), "{e}");
        let e = o
            .set_search_param("beam", ParamValue::Text("4"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown search parameter \"beam\""), "{e}");
        let e = o
            .set_search_param("grain", ParamValue::Text("sometimes"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("grain"), "{e}");
        // Every listed name is known, and reads back what was set.
        let mut back = Options::default();
        for (name, v) in o.search_params_changed(&Options::default()) {
            back.set_search_param(&name, ParamValue::Json(&v)).unwrap();
        }
        assert_eq!(back, o);
        for name in SEARCH_PARAM_NAMES {
            assert!(o.search_param(name).is_some(), "{name}");
            let e = o.set_search_param(name, ParamValue::Json(&j("{}")));
            if let Err(e) = e {
                assert!(!e.to_string().contains("unknown"), "{name}: {e}");
            }
        }
    }
}
