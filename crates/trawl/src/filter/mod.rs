//! Filtered search: attributes of the indexed vectors (labels and numeric fields), the filter
//! language over them, and predicates compiled against an index's attributes.
//!
//! - [`expr`]: the filter expression tree; labels and fields, and how a filter names them.
//!   A filter is written in the text form ([`parse()`]: `lang = "en" AND year >= 2024`) or
//!   the JSON form ([`parse_json()`]: `{"lang": "en", "year": {"$gte": 2024}}`); both read
//!   into an [`Expr`], whose [`Display`](std::fmt::Display) writes the text form back.
//! - [`attrs`]: [`Attributes`], an index's attributes in memory (a Roaring bitmap per label,
//!   numeric columns with their rows ordered by value), built with [`AttrsBuilder`].
//! - [`input`]: attributes from DiskANN's label file and from JSON lines.
//! - [`file`](mod@file): `attrs.trawl`, the attributes as a file of the index.
//! - [`predicate`]: [`Predicate`], a filter compiled against attributes: `matches`, `count`,
//!   `collect`.
//! - [`plan`]: the filters of a batch ([`Filters`], [`QueryFilter`]) and the planner
//!   ([`Plan`]: inline, scan or exact).

pub mod attrs;
mod combine;
mod display;
mod error;
pub mod expr;
pub mod file;
pub mod input;
pub mod json;
mod lex;
pub mod parse;
pub mod plan;
pub mod predicate;
pub mod truth;

pub use attrs::{Attributes, AttrsBuilder, Number};
pub use error::FilterError;
pub use expr::{CmpOp, Expr, Value};
pub use json::{parse_json, parse_json_str};
pub use parse::{parse, ParseError};
pub use plan::{FilterParams, Filters, Plan, QueryFilter};
pub use predicate::{Count, Predicate};

#[cfg(test)]
mod tests;
