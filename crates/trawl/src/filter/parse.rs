//! The filter language's text form, read into an [`Expr`] by a recursive-descent parser.
//!
//! ```text
//! expr      := or
//! or        := and ( OR and )*
//! and       := unary ( AND unary )*
//! unary     := NOT unary | '(' expr ')' | predicate
//! predicate := field cmpop value
//!            | field [NOT] IN '(' value (',' value)* [','] ')'
//!            | field [NOT] BETWEEN value AND value
//!            | field HAS ANY '(' value (',' value)* [','] ')'
//!            | field HAS ALL '(' value (',' value)* [','] ')'
//!            | field HAS value
//! cmpop     := '=' | '==' | '!=' | '<>' | '<' | '<=' | '>' | '>='
//! value     := integer | float | 'single-quoted' | "double-quoted"
//! field     := [A-Za-z_][A-Za-z0-9_.:-]* | `backquoted`
//! ```
//!
//! Keywords (`AND OR NOT IN BETWEEN HAS ANY ALL`) are matched without regard to case and are
//! not field names; a field so named, or one with other characters, is written in backquotes
//! (a backquote inside written twice). An integer is `-?digits` and must fit in an `i64`; a
//! number with a `.` (digits on both sides) or an exponent is a float, and must be finite.
//! Strings take the escapes `\\`, `\"`, `\'`, `\n` and `\t`.
//!
//! `NOT` binds tighter than `AND`, which binds tighter than `OR`. A chain `a AND b AND c` is
//! one [`Expr::And`] of three operands (likewise `OR`); a parenthesised operand stays one
//! operand, so `(a AND b) AND c` is an `And` within an `And`. `x BETWEEN lo AND hi` is
//! `And([x >= lo, x <= hi])`, `x NOT IN (…)` is `Not(x IN (…))` and `x HAS v` is
//! `x HAS ANY (v)`.
//!
//! Texts over [`MAX_LEN`] bytes and nesting (of `NOT` and parentheses) deeper than
//! [`MAX_DEPTH`] are refused.

use std::fmt;

use super::expr::{CmpOp, Expr, Value};
use super::lex::{keyword, Lexer, Tok, Token};

/// The longest filter text accepted, in bytes.
pub const MAX_LEN: usize = 64 * 1024;

/// The deepest nesting of `NOT`, parentheses (and, in the JSON form, `$and`, `$or` and
/// `$not`) accepted.
pub const MAX_DEPTH: usize = 64;

/// A filter that could not be read: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The byte offset in [`input`](Self::input) where the text goes wrong (0 for errors of
    /// the JSON form's structure, which name a JSON path in the message instead).
    pub pos: usize,
    /// What was expected and what was found, with where (`… at column 9`).
    pub message: String,
    /// The text parsed; empty where there is no text to show (a JSON value, a text over
    /// [`MAX_LEN`]).
    pub input: String,
}

/// Lines longer than this (in characters) are shown as a window around the error.
const SHOW_MAX: usize = 100;

impl ParseError {
    /// What kind of failure this is: always [`InvalidInput`](crate::ErrorKind::InvalidInput).
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::InvalidInput
    }

    /// An error at `pos` of `input`: `what` followed by ` at column N`.
    pub(crate) fn at(input: &str, pos: usize, what: impl fmt::Display) -> Self {
        let message = format!("{what} at {}", Self::location(input, pos));
        Self::raw(input, pos, message)
    }

    /// An error at `pos` of `input`: `what` followed by ` at column N (hint)`.
    pub(crate) fn hinted(input: &str, pos: usize, what: impl fmt::Display, hint: &str) -> Self {
        let message = format!("{what} at {} ({hint})", Self::location(input, pos));
        Self::raw(input, pos, message)
    }

    /// An error at `pos` of `input` with the message as given.
    pub(crate) fn raw(input: &str, pos: usize, message: String) -> Self {
        Self {
            pos,
            message,
            input: input.to_string(),
        }
    }

    /// An error with no text to show (position 0, empty input).
    pub(crate) fn bare(message: String) -> Self {
        Self {
            pos: 0,
            message,
            input: String::new(),
        }
    }

    /// `column N` (counted in characters from 1), or `line L, column N` in a text of several
    /// lines.
    pub(crate) fn location(input: &str, pos: usize) -> String {
        let (line, col) = line_col(input, pos);
        if input.contains('\n') {
            format!("line {line}, column {col}")
        } else {
            format!("column {col}")
        }
    }
}

/// The line (from 1) and column (in characters, from 1) of byte offset `pos`.
fn line_col(input: &str, pos: usize) -> (usize, usize) {
    let before = input.get(..pos).unwrap_or(input);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

impl fmt::Display for ParseError {
    /// The message, then the line of the input with the error and a caret under its position.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.input.is_empty() {
            return Ok(());
        }
        let pos = (0..=self.pos.min(self.input.len()))
            .rev()
            .find(|&p| self.input.is_char_boundary(p))
            .unwrap_or(0);
        let line_start = self.input[..pos].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.input[pos..]
            .find('\n')
            .map_or(self.input.len(), |i| pos + i);
        let line: Vec<char> = self.input[line_start..line_end].chars().collect();
        let col = self.input[line_start..pos].chars().count();
        // A window of the line around the error when the line is long.
        let (from, to) = if line.len() > SHOW_MAX {
            let from = col.saturating_sub(SHOW_MAX / 2);
            (from, (from + SHOW_MAX).min(line.len()))
        } else {
            (0, line.len())
        };
        let lead = if from > 0 { "..." } else { "" };
        let tail = if to < line.len() { "..." } else { "" };
        let shown: String = line[from..to].iter().collect();
        // Tabs under tabs, so that the caret lines up however tabs are shown.
        let pad: String = lead
            .chars()
            .chain(
                line[from..col]
                    .iter()
                    .map(|&c| if c == '\t' { '\t' } else { ' ' }),
            )
            .collect();
        write!(f, "\n  {lead}{shown}{tail}\n  {pad}^")
    }
}

impl std::error::Error for ParseError {}

/// Reads a filter in the text form (see the [module](self) documentation for the grammar).
///
/// ```
/// use trawl::filter::{parse, CmpOp, Expr, Value};
///
/// let e = parse(r#"lang = "en" AND year >= 2024"#).unwrap();
/// assert_eq!(
///     e,
///     Expr::And(vec![
///         Expr::Cmp { field: "lang".into(), op: CmpOp::Eq, value: Value::Str("en".into()) },
///         Expr::Cmp { field: "year".into(), op: CmpOp::Ge, value: Value::Int(2024) },
///     ])
/// );
/// assert!(parse("year >= AND").is_err());
/// ```
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    if text.len() > MAX_LEN {
        return Err(ParseError::bare(format!(
            "the filter is {} bytes long; at most {MAX_LEN} are accepted",
            text.len()
        )));
    }
    if text.trim().is_empty() {
        return Err(ParseError::at(text, text.len(), "the filter is empty"));
    }
    let mut p = Parser::new(text)?;
    let e = p.or()?;
    if p.tok.tok != Tok::End {
        let found = p.found();
        let what = if p.tok.tok == Tok::Close {
            "unmatched ')'".to_string()
        } else {
            format!("expected AND, OR or the end of the filter but found {found}")
        };
        return Err(p.error(p.tok.start, what));
    }
    Ok(e)
}

impl std::str::FromStr for Expr {
    type Err = ParseError;

    /// [`parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

/// `items` as one expression: the only item, or `join` of them all.
pub(crate) fn chain(mut items: Vec<Expr>, join: fn(Vec<Expr>) -> Expr) -> Expr {
    if items.len() == 1 {
        if let Some(e) = items.pop() {
            return e;
        }
    }
    join(items)
}

/// The parser: the text, the current token (one ahead of what was read) and the nesting.
struct Parser<'a> {
    src: &'a str,
    lex: Lexer<'a>,
    tok: Token,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Result<Self, ParseError> {
        let mut lex = Lexer::new(src);
        let tok = lex.next_token()?;
        Ok(Self {
            src,
            lex,
            tok,
            depth: 0,
        })
    }

    /// The current token, moving on to the next.
    fn bump(&mut self) -> Result<Token, ParseError> {
        let next = self.lex.next_token()?;
        Ok(std::mem::replace(&mut self.tok, next))
    }

    /// Whether the current token is the keyword `kw`.
    fn at_kw(&self, kw: &str) -> bool {
        self.tok.is_kw(self.src, kw)
    }

    /// The current token, as an error message names it.
    fn found(&self) -> String {
        self.tok.describe(self.src)
    }

    fn error(&self, pos: usize, what: impl fmt::Display) -> ParseError {
        ParseError::at(self.src, pos, what)
    }

    /// The text of a token.
    fn text(&self, t: &Token) -> &'a str {
        &self.src[t.start..t.end]
    }

    /// `and (OR and)*`.
    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.and()?];
        while self.at_kw("OR") {
            self.bump()?;
            items.push(self.and()?);
        }
        Ok(chain(items, Expr::Or))
    }

    /// `unary (AND unary)*`.
    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.unary()?];
        while self.at_kw("AND") {
            self.bump()?;
            items.push(self.unary()?);
        }
        Ok(chain(items, Expr::And))
    }

    /// One level deeper, at the token starting at `pos`.
    fn enter(&mut self, pos: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let what = format!("the filter nests deeper than {MAX_DEPTH} levels");
            return Err(self.error(pos, what));
        }
        Ok(())
    }

    /// `NOT unary | '(' expr ')' | predicate`.
    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.at_kw("NOT") {
            let not = self.bump()?;
            self.enter(not.start)?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(e)));
        }
        if self.tok.tok == Tok::Open {
            let open = self.bump()?;
            self.enter(open.start)?;
            let e = self.or()?;
            if self.tok.tok != Tok::Close {
                let col = ParseError::location(self.src, open.start);
                let what = format!(
                    "expected AND, OR or ')' (closing the '(' at {col}) but found {}",
                    self.found()
                );
                return Err(self.error(self.tok.start, what));
            }
            self.bump()?;
            self.depth -= 1;
            return Ok(e);
        }
        self.predicate()
    }

    /// A field name: a bare word that is not a keyword, or a backquoted name.
    fn field(&mut self) -> Result<String, ParseError> {
        match &self.tok.tok {
            Tok::Quoted(name) => {
                let name = name.clone();
                self.bump()?;
                Ok(name)
            }
            Tok::Word if keyword(self.text(&self.tok)).is_none() => {
                let t = self.bump()?;
                Ok(self.text(&t).to_string())
            }
            Tok::Word => {
                let word = self.text(&self.tok);
                let what =
                    format!("expected a field name, NOT or '(' but found the keyword '{word}'");
                let hint = format!("a field so named is written in backquotes: `{word}`");
                Err(ParseError::hinted(self.src, self.tok.start, what, &hint))
            }
            _ => {
                let what = format!(
                    "expected a field name, NOT or '(' but found {}",
                    self.found()
                );
                Err(self.error(self.tok.start, what))
            }
        }
    }

    /// A predicate on a field: a comparison, `IN`, `BETWEEN` or `HAS`.
    fn predicate(&mut self) -> Result<Expr, ParseError> {
        let field_tok = self.tok.clone();
        let field = self.field()?;
        if let Tok::Op(op) = self.tok.tok {
            let t = self.bump()?;
            let value = self.value(&format!("after '{}'", self.text(&t)))?;
            return Ok(Expr::Cmp { field, op, value });
        }
        let negated = self.at_kw("NOT");
        if negated {
            self.bump()?;
            if !self.at_kw("IN") && !self.at_kw("BETWEEN") {
                let what = format!(
                    "expected IN or BETWEEN after NOT but found {}",
                    self.found()
                );
                return Err(self.error(self.tok.start, what));
            }
        }
        let e = if self.at_kw("IN") {
            self.bump()?;
            Expr::In {
                field,
                values: self.list("IN")?,
            }
        } else if self.at_kw("BETWEEN") {
            self.bump()?;
            self.between(field)?
        } else if self.at_kw("HAS") {
            self.bump()?;
            self.has(field)?
        } else {
            let what = format!(
                "expected a comparison (=, !=, <, <=, >, >=), IN, NOT IN, BETWEEN or HAS after \
                 the field {} but found {}",
                field_tok.describe(self.src),
                self.found()
            );
            return Err(self.error(self.tok.start, what));
        };
        Ok(if negated { Expr::Not(Box::new(e)) } else { e })
    }

    /// `lo AND hi` after `field BETWEEN`.
    fn between(&mut self, field: String) -> Result<Expr, ParseError> {
        let lo = self.value("after BETWEEN")?;
        if !self.at_kw("AND") {
            let what = format!(
                "expected AND after BETWEEN's lower bound but found {}",
                self.found()
            );
            return Err(self.error(self.tok.start, what));
        }
        self.bump()?;
        let hi = self.value("after BETWEEN ... AND")?;
        Ok(Expr::And(vec![
            Expr::Cmp {
                field: field.clone(),
                op: CmpOp::Ge,
                value: lo,
            },
            Expr::Cmp {
                field,
                op: CmpOp::Le,
                value: hi,
            },
        ]))
    }

    /// `ANY (values)`, `ALL (values)` or `value` after `field HAS`.
    fn has(&mut self, field: String) -> Result<Expr, ParseError> {
        if self.at_kw("ANY") || self.at_kw("ALL") {
            let all = self.at_kw("ALL");
            self.bump()?;
            let values = self.list(if all { "HAS ALL" } else { "HAS ANY" })?;
            return Ok(Expr::Has { field, all, values });
        }
        let value = self.value("after HAS (or ANY (...) or ALL (...))")?;
        Ok(Expr::Has {
            field,
            all: false,
            values: vec![value],
        })
    }

    /// A literal: a number or a quoted string. `context` says where (`after '>='`).
    fn value(&mut self, context: &str) -> Result<Value, ParseError> {
        let v = match &self.tok.tok {
            Tok::Int(i) => Value::Int(*i),
            Tok::Float(x) => Value::Float(*x),
            Tok::Str(s) => Value::Str(s.clone()),
            Tok::Word if keyword(self.text(&self.tok)).is_none() => {
                let word = self.text(&self.tok);
                let hint = if ["inf", "infinity", "nan"]
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(word))
                {
                    "numbers must be finite".to_string()
                } else {
                    format!("a string is quoted: \"{}\"", super::lex::clip(word, 32))
                };
                let what = format!("expected a value {context} but found '{word}'");
                return Err(ParseError::hinted(self.src, self.tok.start, what, &hint));
            }
            _ => {
                let what = format!("expected a value {context} but found {}", self.found());
                return Err(self.error(self.tok.start, what));
            }
        };
        self.bump()?;
        Ok(v)
    }

    /// `'(' value (',' value)* [','] ')'` after `what` (`IN`, `HAS ANY`, `HAS ALL`).
    fn list(&mut self, what: &str) -> Result<Vec<Value>, ParseError> {
        if self.tok.tok != Tok::Open {
            let msg = format!("expected '(' after {what} but found {}", self.found());
            return Err(self.error(self.tok.start, msg));
        }
        self.bump()?;
        if self.tok.tok == Tok::Close {
            let hint = format!("{what} takes at least one value");
            let msg = "expected a value but found ')'";
            return Err(ParseError::hinted(self.src, self.tok.start, msg, &hint));
        }
        let mut values = vec![self.value(&format!("in the {what} list"))?];
        loop {
            match self.tok.tok {
                Tok::Close => break,
                Tok::Comma => {
                    self.bump()?;
                    if self.tok.tok == Tok::Close {
                        break;
                    }
                    values.push(self.value(&format!("in the {what} list"))?);
                }
                _ => {
                    let msg = format!("expected ')' or ',' but found {}", self.found());
                    return Err(self.error(self.tok.start, msg));
                }
            }
        }
        self.bump()?;
        Ok(values)
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
