//! The fields of requests, from a JSON body or (with a binary body) the query string: k, the
//! search parameters, filters, ids and attributes.

use std::sync::Arc;

use serde_json::{Map, Value};
use trawl::filter::{Attributes, AttrsBuilder, Expr, FilterParams, Plan};
use trawl::kinds::named::ParamValue;
use trawl::kinds::Options;

use crate::error::{ApiError, ApiResult};
use crate::sched::OwnedFilters;

/// A request's fields other than the vectors.
#[derive(Debug, Default)]
pub struct Fields {
    map: Map<String, Value>,
    /// Fields from the query string are text (`"10"`), not JSON numbers.
    text: bool,
}

impl Fields {
    /// The fields of a JSON body.
    pub fn json(map: Map<String, Value>) -> Self {
        Self { map, text: false }
    }

    /// The fields of a query string (each value a string).
    pub fn query(pairs: Vec<(String, String)>) -> ApiResult<Self> {
        let mut map = Map::new();
        for (k, v) in pairs {
            if map.insert(k.clone(), Value::String(v)).is_some() {
                return Err(ApiError::invalid(format!(
                    "the query string gives {k:?} twice"
                )));
            }
        }
        Ok(Self { map, text: true })
    }

    /// Removes and returns field `name`.
    pub fn take(&mut self, name: &str) -> Option<Value> {
        self.map.remove(name)
    }

    /// Refuses any field left (a misspelt one would otherwise be ignored silently).
    pub fn finish(self, known: &str) -> ApiResult<()> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(k) => Err(ApiError::invalid(format!(
                "unknown field {k:?}; this endpoint takes {known}"
            ))),
        }
    }

    /// A whole number field (`None` when absent).
    pub fn count(&mut self, name: &str) -> ApiResult<Option<usize>> {
        let Some(v) = self.take(name) else {
            return Ok(None);
        };
        let n = match &v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) if self.text => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        n.and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("{name} = {v}: expected a whole number ≥ 0")))
    }

    /// A string field.
    pub fn string(&mut self, name: &str) -> ApiResult<Option<String>> {
        match self.take(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(ApiError::invalid(format!(
                "{name} = {v}: expected a string"
            ))),
        }
    }

    /// `base` with the search parameters set: the `params` object of a JSON body, or every
    /// remaining field of a query string (called last).
    pub fn options(&mut self, base: &Options) -> ApiResult<Options> {
        let mut o = base.clone();
        if self.text {
            for (name, v) in std::mem::take(&mut self.map) {
                let text = v.as_str().unwrap_or_default();
                o.set_search_param(&name, ParamValue::Text(text))?;
            }
        } else {
            match self.take("params") {
                None | Some(Value::Null) => {}
                Some(Value::Object(m)) => {
                    for (name, v) in &m {
                        o.set_search_param(name, ParamValue::Json(v))?;
                    }
                }
                Some(v) => {
                    return Err(ApiError::invalid(format!(
                        "params = {v}: expected an object of search parameters"
                    )))
                }
            }
        }
        o.validate()?;
        Ok(o)
    }

    /// The filters of `nq` queries: `filter` as text, a JSON object, or a list of one per
    /// query (each text, object or null); and the planner's options (`filter_plan`).
    pub fn filters(&mut self, nq: usize) -> ApiResult<(OwnedFilters, FilterParams)> {
        let plan = match self.string("filter_plan")?.as_deref() {
            None | Some("auto") => None,
            Some(p) => Some(Plan::from_name(p).ok_or_else(|| {
                ApiError::invalid(format!(
                    "filter_plan = {p:?}: expected auto, inline, scan or exact"
                ))
            })?),
        };
        let params = FilterParams {
            plan,
            ..FilterParams::default()
        };
        let filters = match self.take("filter") {
            None | Some(Value::Null) => OwnedFilters::None,
            Some(Value::Array(items)) if !self.text => {
                if items.len() != nq {
                    return Err(ApiError::invalid(format!(
                        "filter: {} filters for {nq} queries (one per query, null for none)",
                        items.len()
                    )));
                }
                let v = items
                    .iter()
                    .enumerate()
                    .map(|(i, f)| match f {
                        Value::Null => Ok(None),
                        f => one_filter(f, self.text).map(Some).map_err(|e| {
                            ApiError::invalid(format!("filter of query {i}: {}", e.message))
                        }),
                    })
                    .collect::<ApiResult<Vec<_>>>()?;
                OwnedFilters::PerQuery(v)
            }
            Some(f) => OwnedFilters::All(one_filter(&f, self.text)?),
        };
        Ok((filters, params))
    }

    /// Ids (`ids`: a JSON array of whole numbers, or `1,2,3` in a query string).
    pub fn ids(&mut self, name: &str) -> ApiResult<Option<Vec<u64>>> {
        match self.take(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64().ok_or_else(|| {
                        ApiError::invalid(format!("{name}: {v} is not an id (a whole number ≥ 0)"))
                    })
                })
                .collect::<ApiResult<Vec<_>>>()
                .map(Some),
            Some(Value::String(s)) if self.text => s
                .split(',')
                .filter(|t| !t.trim().is_empty())
                .map(|t| {
                    t.trim().parse::<u64>().map_err(|_| {
                        ApiError::invalid(format!(
                            "{name}: {t:?} is not an id (a whole number ≥ 0)"
                        ))
                    })
                })
                .collect::<ApiResult<Vec<_>>>()
                .map(Some),
            Some(v) => Err(ApiError::invalid(format!(
                "{name} = {v}: expected an array of ids"
            ))),
        }
    }

    /// The attributes of `n` vectors being written: `labels` (one list of strings per
    /// vector), `attrs` (an object of columns: field → one value per vector, null for none;
    /// numbers are numeric fields, strings and booleans keyed labels) and `attributes` (one
    /// object per vector, the JSON-lines form).
    pub fn attributes(&mut self, n: usize) -> ApiResult<Option<Arc<Attributes>>> {
        let labels = self.take("labels").filter(|v| !v.is_null());
        let attrs = self.take("attrs").filter(|v| !v.is_null());
        let rows = self.take("attributes").filter(|v| !v.is_null());
        if labels.is_none() && attrs.is_none() && rows.is_none() {
            return Ok(None);
        }
        let bad = |e: trawl::filter::FilterError| ApiError::invalid(format!("attributes: {e}"));
        let mut b = AttrsBuilder::new(n).map_err(bad)?;
        if let Some(l) = labels {
            let rows = list_of(&l, "labels", n)?;
            for (i, r) in rows.iter().enumerate() {
                let items = match r {
                    Value::Array(a) => a.as_slice(),
                    Value::Null => &[],
                    v => std::slice::from_ref(v),
                };
                for item in items {
                    let text = match item {
                        Value::String(s) => s.clone(),
                        Value::Number(x) => x.to_string(),
                        v => {
                            return Err(ApiError::invalid(format!(
                                "labels[{i}]: {v} is not a label (a string)"
                            )))
                        }
                    };
                    b.add_label(i as u32, &text).map_err(bad)?;
                }
            }
        }
        if let Some(a) = attrs {
            let Value::Object(cols) = a else {
                return Err(ApiError::invalid(
                    "attrs must be an object: field name → one value per vector",
                ));
            };
            for (field, col) in &cols {
                for (i, v) in list_of(col, &format!("attrs.{field}"), n)?
                    .iter()
                    .enumerate()
                {
                    trawl::filter::input::add_json(&mut b, i as u32, field, v).map_err(bad)?;
                }
            }
        }
        if let Some(r) = rows {
            for (i, row) in list_of(&r, "attributes", n)?.iter().enumerate() {
                match row {
                    Value::Object(m) => {
                        for (k, v) in m {
                            trawl::filter::input::add_json(&mut b, i as u32, k, v).map_err(bad)?;
                        }
                    }
                    Value::Null => {}
                    v => {
                        return Err(ApiError::invalid(format!(
                            "attributes[{i}] = {v}: expected an object"
                        )))
                    }
                }
            }
        }
        Ok(Some(Arc::new(b.finish().map_err(bad)?)))
    }
}

fn list_of<'a>(v: &'a Value, name: &str, n: usize) -> ApiResult<&'a [Value]> {
    match v {
        Value::Array(a) if a.len() == n => Ok(a),
        Value::Array(a) => Err(ApiError::invalid(format!(
            "{name} has {} entries for {n} vectors (one per vector)",
            a.len()
        ))),
        _ => Err(ApiError::invalid(format!(
            "{name} must be an array of one entry per vector"
        ))),
    }
}

/// One filter: text (`lang = "en" AND year >= 2020`) or the JSON form (an object; in a query
/// string, text starting with `{`).
fn one_filter(v: &Value, text: bool) -> ApiResult<Expr> {
    let r = match v {
        Value::String(s) if text && s.trim_start().starts_with('{') => {
            trawl::filter::parse_json_str(s)
        }
        Value::String(s) => trawl::filter::parse(s),
        Value::Object(_) => trawl::filter::parse_json(v),
        v => {
            return Err(ApiError::invalid(format!(
                "filter = {v}: expected the text form (a string) or the JSON form (an object)"
            )))
        }
    };
    r.map_err(|e| ApiError::invalid(format!("filter: {e}")))
}
