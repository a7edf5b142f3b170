//! Filtered search: attributes of the indexed vectors (labels and numeric fields), the filter
//! language over them, and predicates compiled against an index's attributes.
//!
//! A filter is written in the text form ([`parse()`]: `lang = "en" AND year >= 2024`) or the
//! JSON form ([`parse_json()`]: `{"lang": "en", "year": {"$gte": 2024}}`); both read into an
//! [`Expr`], whose [`Display`](std::fmt::Display) writes the text form back.

mod display;
pub mod expr;
pub mod json;
mod lex;
pub mod parse;

pub use expr::{CmpOp, Expr, Value};
pub use json::{parse_json, parse_json_str};
pub use parse::{parse, ParseError};
