//! The canonical text form of a filter: what [`parse`](super::parse::parse) reads back to an
//! equal tree.
//!
//! Strings are double-quoted with `\\`, `\"`, `\n` and `\t` escaped; floats are written in
//! their shortest exact form, always with a `.` or an exponent (`1.0`, `1e-7`); a field that
//! is not a plain identifier, or is a keyword, is written in backquotes. Operands are
//! parenthesised where precedence needs it and where an `And` is an operand of an `And` (an
//! `Or` of an `Or`), so that the nesting survives the round trip.
//!
//! The round trip is exact for every tree the parser can produce: each `And` and `Or` with at
//! least two operands, field names non-empty, floats finite. An `And` or `Or` of one operand
//! is written as that operand; one of none as `()`, and a non-finite float as `NaN`, `inf` or
//! `-inf`, neither of which parses.

use std::fmt;

use super::expr::{Expr, Value};
use super::lex::{ident_continue, ident_start, keyword};

/// A field name as the text form writes it: bare when it can be, else in backquotes.
struct Field<'a>(&'a str);

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars();
        let plain = chars.next().is_some_and(ident_start)
            && chars.all(ident_continue)
            && keyword(self.0).is_none();
        if plain {
            f.write_str(self.0)
        } else {
            write!(f, "`{}`", self.0.replace('`', "``"))
        }
    }
}

impl fmt::Display for Value {
    /// The literal as the text form writes it: `42`, `2.5`, `"en"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(i) => write!(f, "{i}"),
            // `{:?}` is the shortest text that reads back to the same f64, and always has a
            // `.` or an exponent (`1.0`, `1e100`), so it reads back as a float.
            Self::Float(x) => write!(f, "{x:?}"),
            Self::Str(s) => {
                f.write_str("\"")?;
                for c in s.chars() {
                    match c {
                        '\\' => f.write_str("\\\\")?,
                        '"' => f.write_str("\\\"")?,
                        '\n' => f.write_str("\\n")?,
                        '\t' => f.write_str("\\t")?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("\"")
            }
        }
    }
}

/// `values` separated by `, `.
struct List<'a>(&'a [Value]);

impl fmt::Display for List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

/// What `e` is written as: an `And` or `Or` of one operand is written as that operand.
fn shown(mut e: &Expr) -> &Expr {
    while let Expr::And(v) | Expr::Or(v) = e {
        match v.as_slice() {
            [only] => e = only,
            _ => break,
        }
    }
    e
}

/// Whether `e` is written as a chain of `AND`s.
fn is_and(e: &Expr) -> bool {
    matches!(shown(e), Expr::And(v) if v.len() > 1)
}

/// Whether `e` is written as a chain of `OR`s.
fn is_or(e: &Expr) -> bool {
    matches!(shown(e), Expr::Or(v) if v.len() > 1)
}

/// `items` joined by `sep`, those for which `wrap` holds in parentheses.
fn join(
    f: &mut fmt::Formatter<'_>,
    items: &[Expr],
    sep: &str,
    wrap: fn(&Expr) -> bool,
) -> fmt::Result {
    if items.is_empty() {
        return f.write_str("()");
    }
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        if wrap(e) && items.len() > 1 {
            write!(f, "({e})")?;
        } else {
            write!(f, "{e}")?;
        }
    }
    Ok(())
}

impl fmt::Display for Expr {
    /// The canonical text form, which [`parse`](super::parse()) reads back to an equal tree
    /// (for trees with at least two operands in each `And` and `Or`, non-empty field names
    /// and finite floats): strings double-quoted, floats in their shortest exact form with a
    /// `.` or an exponent, fields that are not plain identifiers (or are keywords) in
    /// backquotes, and parentheses where precedence needs them and around an `And` within an
    /// `And` (an `Or` within an `Or`), so that the nesting survives.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::And(items) => join(f, items, " AND ", |e| is_and(e) || is_or(e)),
            Self::Or(items) => join(f, items, " OR ", is_or),
            Self::Not(e) if is_and(e) || is_or(e) => write!(f, "NOT ({e})"),
            Self::Not(e) => write!(f, "NOT {e}"),
            Self::Cmp { field, op, value } => {
                write!(f, "{} {} {value}", Field(field), op.symbol())
            }
            Self::In { field, values } => write!(f, "{} IN ({})", Field(field), List(values)),
            Self::Has { field, all, values } => {
                let which = if *all { "ALL" } else { "ANY" };
                write!(f, "{} HAS {which} ({})", Field(field), List(values))
            }
        }
    }
}
