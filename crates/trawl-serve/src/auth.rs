//! API keys and their scopes: `read:KEY` (searches and descriptions) or `write:KEY` (also
//! inserts, upserts, deletes, merges and verification), from a file (one per line, `#`
//! comments) or an environment variable (separated by commas or whitespace). A request
//! carries its key as `Authorization: Bearer KEY` or `X-API-Key: KEY`.

use std::path::Path;

use axum::http::HeaderMap;

use crate::error::ApiError;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Searches, index descriptions, metrics, a merge's status.
    Read,
    /// Everything: also inserts, upserts, deletes, merges and verification.
    Write,
}

impl Scope {
    /// `read` or `write`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// The keys the service accepts.
#[derive(Clone, Default)]
pub struct ApiKeys {
    keys: Vec<(Vec<u8>, Scope)>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves.
        f.debug_struct("ApiKeys")
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// Shortest key accepted: a shorter one is guessable.
pub const MIN_KEY_LEN: usize = 16;

impl ApiKeys {
    /// Keys from text: `read:KEY` or `write:KEY` entries, one per line or separated by commas
    /// or whitespace; `#` starts a comment. `origin` names the text's source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            for entry in line.split(|c: char| c == ',' || c.is_whitespace()) {
                if entry.is_empty() {
                    continue;
                }
                let at = format!("{origin}, line {}", i + 1);
                let (scope, key) = entry.split_once(':').ok_or_else(|| {
                    format!("{at}: expected read:KEY or write:KEY, found an entry without a scope")
                })?;
                let scope = match scope {
                    "read" => Scope::Read,
                    "write" => Scope::Write,
                    s => return Err(format!("{at}: unknown scope {s:?} (read or write)")),
                };
                if key.len() < MIN_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(format!(
                        "{at}: a key must be at least {MIN_KEY_LEN} printable characters \
                         without spaces"
                    ));
                }
                if keys.iter().any(|(k, _)| k == key.as_bytes()) {
                    return Err(format!("{at}: the key is listed twice"));
                }
                keys.push((key.as_bytes().to_vec(), scope));
            }
        }
        if keys.is_empty() {
            return Err(format!("{origin} holds no key"));
        }
        Ok(Self { keys })
    }

    /// Keys from the file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the API key file {}: {e}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is no key (every request is allowed).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The scope of `key`, compared in constant time against every key.
    fn scope_of(&self, key: &[u8]) -> Option<Scope> {
        let mut found = None;
        for (k, s) in &self.keys {
            if constant_time_eq(k, key) {
                found = Some(*s);
            }
        }
        found
    }

    /// Whether the request with `headers` may do what needs `need`: `401` without a valid
    /// key, `403` for a read key on a write.
    pub fn check(&self, headers: &HeaderMap, need: Scope) -> Result<(), ApiError> {
        if self.is_empty() {
            return Ok(());
        }
        let Some(key) = presented_key(headers) else {
            return Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "unauthorized",
                "an API key is required: send `Authorization: Bearer KEY` or `X-API-Key: KEY`",
            ));
        };
        match self.scope_of(key) {
            None => Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the API key is not valid",
            )),
            Some(s) if s < need => Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "the API key has the {} scope; this request needs {}",
                    s.name(),
                    need.name()
                ),
            )),
            Some(_) => Ok(()),
        }
    }
}

/// The key a request presents, if any.
fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(v) = headers.get("x-api-key") {
        return Some(v.as_bytes());
    }
    let v = headers.get(axum::http::header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = v.split_at(v.len().min(7));
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
}

/// Byte equality whose time depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn keys_parse_with_their_scopes_and_bad_entries_are_named() {
        let k = ApiKeys::parse(
            "# keys\nread:rrrrrrrrrrrrrrrr\nwrite:wwwwwwwwwwwwwwww  # admin\n",
            "keys.txt",
        )
        .unwrap();
        assert_eq!(k.len(), 2);
        let read = headers("authorization", "Bearer rrrrrrrrrrrrrrrr");
        let write = headers("x-api-key", "wwwwwwwwwwwwwwww");
        assert!(k.check(&read, Scope::Read).is_ok());
        assert_eq!(k.check(&read, Scope::Write).unwrap_err().status, 403);
        assert!(k.check(&write, Scope::Write).is_ok());
        assert_eq!(
            k.check(&HeaderMap::new(), Scope::Read).unwrap_err().status,
            401
        );
        let wrong = headers("x-api-key", "xxxxxxxxxxxxxxxx");
        assert_eq!(k.check(&wrong, Scope::Read).unwrap_err().status, 401);
        for (text, msg) in [
            ("rrrrrrrrrrrrrrrr", "without a scope"),
            ("admin:rrrrrrrrrrrrrrrr", "unknown scope"),
            ("read:short", "at least 16"),
            ("read:rrrrrrrrrrrrrrrr,write:rrrrrrrrrrrrrrrr", "twice"),
            ("# nothing", "holds no key"),
        ] {
            let e = ApiKeys::parse(text, "env").unwrap_err();
            assert!(e.contains(msg), "{text}: {e}");
        }
    }
}
