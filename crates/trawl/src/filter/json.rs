//! The filter language's JSON form (as DiskANN's `diskann-label-filter` and MongoDB write
//! it), read into an [`Expr`].
//!
//! - `{"$and": [f, …]}`, `{"$or": [f, …]}` (at least one filter each), `{"$not": f}`;
//! - `{"field": v}`: the field equals `v` (a number or a string);
//! - `{"field": {"$op": v, …}}` with the operators `$eq`, `$ne`, `$lt`, `$lte`, `$gt`, `$gte`
//!   (a number or a string), `$in`, `$nin` (not in), `$any` (has any), `$all` (has all) (a
//!   non-empty array of numbers and strings).
//!
//! Several keys in one object (fields and `$and`/`$or`/`$not` alike), or several operators
//! for one field, all hold: they make one [`Expr::And`], in key order (sorted, as
//! `serde_json`'s map is). A JSON integer that fits in an `i64` is [`Value::Int`], any other
//! number [`Value::Float`]. Booleans, `null` and objects are not values.
//!
//! Errors name the JSON path of the offending part, e.g.
//! `$and[1].year: "$gte" takes a number or a string, found an array`.

use serde_json::Value as Json;

use super::expr::{CmpOp, Expr, Value};
use super::parse::{chain, ParseError, MAX_DEPTH, MAX_LEN};

/// Reads a filter in the JSON form from a parsed JSON value.
///
/// ```
/// use trawl::filter::{parse, parse_json};
///
/// let v = serde_json::json!({"lang": "en", "year": {"$gte": 2024}});
/// assert_eq!(parse_json(&v).unwrap(), parse(r#"lang = "en" AND year >= 2024"#).unwrap());
/// ```
pub fn parse_json(v: &Json) -> Result<Expr, ParseError> {
    filter(v, "", 0)
}

/// Reads a filter in the JSON form from JSON text; a syntax error is reported at its place in
/// the text.
pub fn parse_json_str(text: &str) -> Result<Expr, ParseError> {
    if text.len() > MAX_LEN {
        return Err(ParseError::bare(format!(
            "the filter is {} bytes long; at most {MAX_LEN} are accepted",
            text.len()
        )));
    }
    let v: Json = serde_json::from_str(text).map_err(|e| {
        let pos = offset(text, e.line(), e.column());
        let what = e.to_string();
        // serde_json's message ends with its own "at line L column C".
        let what = what.split(" at line ").next().unwrap_or(&what).to_string();
        ParseError::at(text, pos, format!("invalid JSON: {what}"))
    })?;
    parse_json(&v)
}

/// The byte offset of serde_json's line (from 1) and column (bytes from 1; 0 before the
/// line's first character), on a character boundary.
fn offset(text: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    let mut pos = (line_start + column.saturating_sub(1)).min(text.len());
    while !text.is_char_boundary(pos) {
        pos -= 1;
    }
    pos
}

/// What kind of JSON value `v` is, with an article.
fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(a) if a.is_empty() => "an empty array",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// An error at JSON path `path` (empty: the root).
fn error(path: &str, what: String) -> ParseError {
    if path.is_empty() {
        ParseError::bare(what)
    } else {
        ParseError::bare(format!("{path}: {what}"))
    }
}

/// `path` followed by the key `key`.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A filter: an object whose every key is a logical operator or a field.
fn filter(v: &Json, path: &str, depth: usize) -> Result<Expr, ParseError> {
    if depth > MAX_DEPTH {
        return Err(error(
            path,
            format!("the filter nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    let Json::Object(map) = v else {
        return Err(error(
            path,
            format!("a filter is a JSON object, found {}", kind(v)),
        ));
    };
    if map.is_empty() {
        return Err(error(
            path,
            "a filter is a non-empty JSON object".to_string(),
        ));
    }
    let mut parts = Vec::new();
    for (key, value) in map {
        let at = child(path, key);
        match key.as_str() {
            "$and" | "$or" => {
                let items = filters(value, &at, key, depth)?;
                parts.push(if key == "$and" {
                    Expr::And(items)
                } else {
                    Expr::Or(items)
                });
            }
            "$not" => parts.push(Expr::Not(Box::new(filter(value, &at, depth + 1)?))),
            k if k.starts_with('$') => {
                let what = format!(
                    "unknown operator \"{k}\" (a filter's keys are \"$and\", \"$or\", \"$not\" \
                     and field names)"
                );
                return Err(error(path, what));
            }
            "" => return Err(error(path, "a field name may not be empty".to_string())),
            field => field_filter(field, value, &at, &mut parts)?,
        }
    }
    Ok(chain(parts, Expr::And))
}

/// The operands of `$and` or `$or` (`op`): a non-empty array of filters.
fn filters(v: &Json, path: &str, op: &str, depth: usize) -> Result<Vec<Expr>, ParseError> {
    match v {
        Json::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, item)| filter(item, &format!("{path}[{i}]"), depth + 1))
            .collect(),
        _ => Err(error(
            path,
            format!(
                "\"{op}\" takes a non-empty array of filters, found {}",
                kind(v)
            ),
        )),
    }
}

/// `{"field": v}` or `{"field": {operators}}`: its predicates, added to `parts`.
fn field_filter(
    field: &str,
    v: &Json,
    path: &str,
    parts: &mut Vec<Expr>,
) -> Result<(), ParseError> {
    let ops = match v {
        Json::Object(ops) => ops,
        Json::Number(_) | Json::String(_) => {
            let value = scalar(v).ok_or_else(|| error(path, "a number out of range".into()))?;
            parts.push(Expr::Cmp {
                field: field.to_string(),
                op: CmpOp::Eq,
                value,
            });
            return Ok(());
        }
        _ => {
            let what = format!(
                "a field takes a number, a string or an object of operators, found {}",
                kind(v)
            );
            return Err(error(path, what));
        }
    };
    if ops.is_empty() {
        let what = "a field's object of operators is empty (the operators are \"$eq\", \
                    \"$ne\", \"$lt\", \"$lte\", \"$gt\", \"$gte\", \"$in\", \"$nin\", \"$any\" \
                    and \"$all\")";
        return Err(error(path, what.to_string()));
    }
    for (op, arg) in ops {
        parts.push(operator(field, op, arg, path)?);
    }
    Ok(())
}

/// One operator `op` of a field, with its argument.
fn operator(field: &str, op: &str, arg: &Json, path: &str) -> Result<Expr, ParseError> {
    let field = field.to_string();
    let cmp = match op {
        "$eq" => Some(CmpOp::Eq),
        "$ne" => Some(CmpOp::Ne),
        "$lt" => Some(CmpOp::Lt),
        "$lte" => Some(CmpOp::Le),
        "$gt" => Some(CmpOp::Gt),
        "$gte" => Some(CmpOp::Ge),
        _ => None,
    };
    if let Some(op_) = cmp {
        let value = scalar(arg).ok_or_else(|| {
            error(
                path,
                format!("\"{op}\" takes a number or a string, found {}", kind(arg)),
            )
        })?;
        return Ok(Expr::Cmp {
            field,
            op: op_,
            value,
        });
    }
    let values = |arg: &Json| values(arg, op, path);
    Ok(match op {
        "$in" => Expr::In {
            field,
            values: values(arg)?,
        },
        "$nin" => Expr::Not(Box::new(Expr::In {
            field,
            values: values(arg)?,
        })),
        "$any" => Expr::Has {
            field,
            all: false,
            values: values(arg)?,
        },
        "$all" => Expr::Has {
            field,
            all: true,
            values: values(arg)?,
        },
        _ => {
            let what = format!(
                "unknown operator \"{op}\" (the operators are \"$eq\", \"$ne\", \"$lt\", \
                 \"$lte\", \"$gt\", \"$gte\", \"$in\", \"$nin\", \"$any\" and \"$all\")"
            );
            return Err(error(path, what));
        }
    })
}

/// The argument of a list operator `op`: a non-empty array of numbers and strings.
fn values(arg: &Json, op: &str, path: &str) -> Result<Vec<Value>, ParseError> {
    let items = match arg {
        Json::Array(items) if !items.is_empty() => items,
        _ => {
            let what = format!(
                "\"{op}\" takes a non-empty array of numbers and strings, found {}",
                kind(arg)
            );
            return Err(error(path, what));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            scalar(item).ok_or_else(|| {
                let what = format!("a value is a number or a string, found {}", kind(item));
                error(&format!("{path}.{op}[{i}]"), what)
            })
        })
        .collect()
}

/// A number or a string as a [`Value`]; `None` for anything else (and a non-finite number,
/// which serde_json does not produce).
fn scalar(v: &Json) -> Option<Value> {
    match v {
        Json::String(s) => Some(Value::Str(s.clone())),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Some(Value::Int(i)),
            None => n.as_f64().filter(|x| x.is_finite()).map(Value::Float),
        },
        _ => None,
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
