//! The tokens of the filter language's text form, read one at a time (the parser looks one
//! token ahead, so an error is reported where the text first goes wrong).

use super::expr::CmpOp;
use super::parse::ParseError;

/// The keywords of the language, matched without regard to case. A field with one of these
/// names is written in backquotes.
pub(crate) const KEYWORDS: [&str; 8] = ["AND", "OR", "NOT", "IN", "BETWEEN", "HAS", "ANY", "ALL"];

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// A bare word: a field name or a keyword.
    Word,
    /// A backquoted field name (backquotes doubled inside).
    Quoted(String),
    /// A quoted string literal, escapes resolved.
    Str(String),
    /// An integer literal.
    Int(i64),
    /// A floating-point literal (finite).
    Float(f64),
    /// `(`.
    Open,
    /// `)`.
    Close,
    /// `,`.
    Comma,
    /// A comparison operator.
    Op(CmpOp),
    /// The end of the text.
    End,
}

/// A token and where it lies in the text (byte offsets).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    /// What it is.
    pub tok: Tok,
    /// The offset of its first byte.
    pub start: usize,
    /// The offset just past its last byte.
    pub end: usize,
}

/// Whether `c` may start a bare field name.
pub(crate) fn ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `c` may continue a bare field name.
pub(crate) fn ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

/// The keyword `word` is, if it is one (matched without regard to case).
pub(crate) fn keyword(word: &str) -> Option<&'static str> {
    KEYWORDS
        .iter()
        .copied()
        .find(|k| k.eq_ignore_ascii_case(word))
}

/// `s` cut to at most `max` characters, with `...` when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

impl Token {
    /// Whether the token is the keyword `kw` (upper case).
    pub fn is_kw(&self, src: &str, kw: &str) -> bool {
        self.tok == Tok::Word && src[self.start..self.end].eq_ignore_ascii_case(kw)
    }

    /// The token as an error message names it: `'AND'`, `the string "en"`, `the end of the
    /// filter`.
    pub fn describe(&self, src: &str) -> String {
        match &self.tok {
            Tok::End => "the end of the filter".to_string(),
            Tok::Str(s) => format!("the string {:?}", clip(s, 24)),
            Tok::Word if keyword(&src[self.start..self.end]).is_some() => {
                format!("the keyword '{}'", &src[self.start..self.end])
            }
            _ => format!("'{}'", clip(&src[self.start..self.end], 32)),
        }
    }
}

/// Reads tokens from a text.
#[derive(Debug)]
pub(crate) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `src`.
    pub fn new(src: &'a str) -> Self {
        Self { src, pos: 0 }
    }

    /// The character at byte offset `at`, if any.
    fn char_at(&self, at: usize) -> Option<char> {
        self.src.get(at..).and_then(|s| s.chars().next())
    }

    /// The next token (`Tok::End` at the end, and from then on).
    pub fn next_token(&mut self) -> Result<Token, ParseError> {
        while let Some(c) = self.char_at(self.pos).filter(|c| c.is_whitespace()) {
            self.pos += c.len_utf8();
        }
        let start = self.pos;
        let Some(c) = self.char_at(start) else {
            return Ok(Token {
                tok: Tok::End,
                start,
                end: start,
            });
        };
        let tok = match c {
            '(' => self.single(Tok::Open),
            ')' => self.single(Tok::Close),
            ',' => self.single(Tok::Comma),
            '=' | '!' | '<' | '>' => self.operator(c)?,
            '\'' | '"' => self.string(c)?,
            '`' => self.backquoted()?,
            '-' | '0'..='9' => self.number()?,
            c if ident_start(c) => {
                self.pos = self.scan(start + 1, ident_continue);
                Tok::Word
            }
            c => {
                return Err(ParseError::hinted(
                    self.src,
                    start,
                    format!("unexpected character {c:?}"),
                    "a field name not of the form [A-Za-z_][A-Za-z0-9_.:-]* goes in \
                     backquotes, a string in quotes",
                ))
            }
        };
        Ok(Token {
            tok,
            start,
            end: self.pos,
        })
    }

    /// A one-character token.
    fn single(&mut self, tok: Tok) -> Tok {
        self.pos += 1;
        tok
    }

    /// The offset of the first character at or after `from` that is not `keep`.
    fn scan(&self, from: usize, keep: impl Fn(char) -> bool) -> usize {
        let rest = &self.src[from..];
        from + rest.find(|c: char| !keep(c)).unwrap_or(rest.len())
    }

    /// `=`, `==`, `!=`, `<>`, `<`, `<=`, `>`, `>=`.
    fn operator(&mut self, c: char) -> Result<Tok, ParseError> {
        let start = self.pos;
        let next = self.char_at(start + 1);
        let (op, len) = match (c, next) {
            ('=', Some('=')) => (CmpOp::Eq, 2),
            ('=', _) => (CmpOp::Eq, 1),
            ('!', Some('=')) => (CmpOp::Ne, 2),
            ('<', Some('>')) => (CmpOp::Ne, 2),
            ('<', Some('=')) => (CmpOp::Le, 2),
            ('<', _) => (CmpOp::Lt, 1),
            ('>', Some('=')) => (CmpOp::Ge, 2),
            ('>', _) => (CmpOp::Gt, 1),
            _ => {
                return Err(ParseError::hinted(
                    self.src,
                    start,
                    "expected '=' after '!'",
                    "not equal is '!=' or '<>'; negation is NOT",
                ))
            }
        };
        self.pos += len;
        Ok(Tok::Op(op))
    }

    /// A string in `quote`s, with the escapes `\\`, `\"`, `\'`, `\n` and `\t`.
    fn string(&mut self, quote: char) -> Result<Tok, ParseError> {
        let start = self.pos;
        let mut out = String::new();
        let mut at = start + 1;
        loop {
            let Some(c) = self.char_at(at) else {
                let col = ParseError::location(self.src, start);
                let msg = format!("unterminated string starting at {col} (no closing quote)");
                return Err(ParseError::raw(self.src, start, msg));
            };
            at += c.len_utf8();
            if c == quote {
                break;
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let escaped = match self.char_at(at) {
                Some('\\') => '\\',
                Some('"') => '"',
                Some('\'') => '\'',
                Some('n') => '\n',
                Some('t') => '\t',
                Some(e) => {
                    return Err(ParseError::hinted(
                        self.src,
                        at - 1,
                        format!("unknown escape '\\{e}' in a string"),
                        "the escapes are \\\\, \\\", \\', \\n and \\t",
                    ))
                }
                None => continue,
            };
            at += 1;
            out.push(escaped);
        }
        self.pos = at;
        Ok(Tok::Str(out))
    }

    /// A field name in backquotes, a backquote inside written twice.
    fn backquoted(&mut self) -> Result<Tok, ParseError> {
        let start = self.pos;
        let mut out = String::new();
        let mut at = start + 1;
        loop {
            let Some(c) = self.char_at(at) else {
                let col = ParseError::location(self.src, start);
                let msg = format!("unterminated backquoted field name starting at {col}");
                return Err(ParseError::raw(self.src, start, msg));
            };
            at += c.len_utf8();
            if c == '`' {
                if self.char_at(at) != Some('`') {
                    break;
                }
                at += 1;
            }
            out.push(c);
        }
        if out.is_empty() {
            return Err(ParseError::at(self.src, start, "empty field name ``"));
        }
        self.pos = at;
        Ok(Tok::Quoted(out))
    }

    /// `-?digits` (an integer), or with `.digits` and/or an exponent `e[+-]digits` (a float).
    fn number(&mut self) -> Result<Tok, ParseError> {
        let start = self.pos;
        let b = self.src.as_bytes();
        // The whole run of characters that could belong to the number, so that `12ab` or
        // `1.2.3` is refused whole rather than read as a number and something else.
        let mut end = start + 1;
        while end < b.len() {
            let c = b[end];
            let sign = matches!(c, b'+' | b'-') && matches!(b[end - 1], b'e' | b'E');
            if !(c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || sign) {
                break;
            }
            end += 1;
        }
        let text = &self.src[start..end];
        if !well_formed_number(text) {
            let msg = if !text
                .trim_start_matches('-')
                .starts_with(|c: char| c.is_ascii_digit())
            {
                "expected a digit after '-'".to_string()
            } else {
                format!("malformed number '{}'", clip(text, 32))
            };
            return Err(ParseError::at(self.src, start, msg));
        }
        let integer = !text.contains(['.', 'e', 'E']);
        let tok = if integer {
            text.parse::<i64>().map(Tok::Int).map_err(|_| {
                let msg = format!("integer {} does not fit in 64 bits", clip(text, 32));
                let hint = "a '.' or an exponent makes it a floating-point number";
                ParseError::hinted(self.src, start, msg, hint)
            })?
        } else {
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Tok::Float(f),
                _ => {
                    let msg = format!("number {} is out of range", clip(text, 32));
                    return Err(ParseError::at(self.src, start, msg));
                }
            }
        };
        self.pos = end;
        Ok(tok)
    }
}

/// Whether `t` is `-?digits(.digits)?([eE][+-]?digits)?`.
fn well_formed_number(t: &str) -> bool {
    fn digits(b: &[u8], i: &mut usize) -> bool {
        let from = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > from
    }
    let b = t.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    if !digits(b, &mut i) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(b, &mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(b, &mut i) {
            return false;
        }
    }
    i == b.len()
}
