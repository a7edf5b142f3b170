//! The shape of the code, checked: no function over [`FN_MAX`] lines and no non-test source
//! file over [`FILE_MAX`] lines in the workspace's crates, and no import cycle between the
//! library's folders (directory modules; a `use crate::a::…` or path `crate::a::…` in a file of
//! folder `b/` is an edge `b → a` between the sibling folders below their common parent) nor
//! between the CLI's modules.
//!
//! Test code is exempt: files named `tests.rs` or `*_tests.rs`, modules declared under
//! `#[cfg(test)]`, and `#[cfg(test)] mod … { … }` blocks.
//!
//! [`KNOWN`] lists the violations that predate this check (the restructuring of the index-kind
//! contract removes them): an entry may only shrink; a new violation, an entry that grew, or an
//! entry that no longer exists fails the test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Longest function, in lines (signature to closing brace).
const FN_MAX: usize = 120;
/// Longest non-test source file, in lines.
const FILE_MAX: usize = 800;

/// Violations that predate the check: `(what, lines)`, `what` as the test prints it. Each
/// must be fixed, not raised. Empty since the index-kind restructuring fixed the last of
/// them; nothing is to be added.
const KNOWN: &[(&str, usize)] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Blanks comments and the contents of string and character literals (newlines kept, so
/// line numbers stay), leaving code only.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if (c == b'r' || (c == b'b' && b.get(i + 1) == Some(&b'r')))
            && !prev_ident(b, i)
            && raw_start(b, i + usize::from(c == b'b') + 1).is_some()
        {
            let start = i + usize::from(c == b'b') + 1;
            let hashes = raw_start(b, start).unwrap();
            let body = start + hashes + 1;
            out.extend(std::iter::repeat_n(b' ', body - i));
            i = body;
            loop {
                if i >= b.len() {
                    break;
                }
                if b[i] == b'"' && b[i + 1..].iter().take(hashes).all(|&h| h == b'#') {
                    let end = i + 1 + hashes;
                    out.extend(std::iter::repeat_n(b' ', end - i));
                    i = end;
                    break;
                }
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if c == b'"' {
            out.push(b'"');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(b'"');
            i += 1;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.extend(std::iter::repeat_n(b' ', j + 1 - i));
                i = j + 1;
            } else if b.get(i + 2) == Some(&b'\'') || char_len(b, i + 1).is_some() {
                let len = char_len(b, i + 1).unwrap_or(1);
                out.extend(std::iter::repeat_n(b' ', len + 2));
                i += len + 2;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The byte length of a multi-byte UTF-8 character at `i` closed by a quote, if any.
fn char_len(b: &[u8], i: usize) -> Option<usize> {
    let lead = *b.get(i)?;
    let len = match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return None,
    };
    (b.get(i + len) == Some(&b'\'')).then_some(len)
}

fn prev_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// At `i`: `#…#"` opening a raw string; the number of hashes.
fn raw_start(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    while b.get(j) == Some(&b'#') {
        j += 1;
    }
    (b.get(j) == Some(&b'"')).then_some(j - i)
}

/// The index of the brace closing the one at `open`.
fn matching(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len() - 1
}

fn line_of(code: &[u8], i: usize) -> usize {
    code[..i].iter().filter(|&&c| c == b'\n').count() + 1
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Byte ranges of `#[cfg(test)] mod name { … }` blocks, and names of `#[cfg(test)] mod name;`.
fn test_modules(code: &str) -> (Vec<(usize, usize)>, Vec<String>) {
    let b = code.as_bytes();
    let (mut blocks, mut files) = (Vec::new(), Vec::new());
    let mut from = 0;
    while let Some(p) = code[from..].find("#[cfg(test)]") {
        let at = from + p + "#[cfg(test)]".len();
        from = at;
        let rest = code[at..].trim_start();
        let rest = rest.strip_prefix("pub ").unwrap_or(rest).trim_start();
        let Some(rest) = rest.strip_prefix("mod ") else {
            continue;
        };
        let name: String = rest
            .trim_start()
            .bytes()
            .take_while(|&c| is_ident(c))
            .map(char::from)
            .collect();
        let after = &rest.trim_start()[name.len()..].trim_start();
        if after.starts_with(';') {
            files.push(name);
        } else if after.starts_with('{') {
            let open = code.len() - after.len();
            blocks.push((open, matching(b, open)));
        }
    }
    (blocks, files)
}

/// `(name, first line, lines)` of every function with a body outside test blocks.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let (tests, _) = test_modules(code);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].find("fn ") {
        let at = i + p;
        i = at + 3;
        if prev_ident(b, at) || tests.iter().any(|&(s, e)| at > s && at < e) {
            continue;
        }
        let name: String = code[i..]
            .trim_start()
            .bytes()
            .take_while(|&c| is_ident(c))
            .map(char::from)
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body's brace (or `;` of a declaration) at parenthesis depth 0.
        let mut depth = 0i32;
        let mut j = i;
        let body = loop {
            match b.get(j) {
                None => break None,
                Some(b'(') | Some(b'[') => depth += 1,
                Some(b')') | Some(b']') => depth -= 1,
                Some(b';') if depth == 0 => break None,
                Some(b'{') if depth == 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        if let Some(open) = body {
            let close = matching(b, open);
            let first = line_of(b, at);
            out.push((name, first, line_of(b, close) - first + 1));
        }
    }
    out
}

/// One source file of a crate: its path, module path and whether it is test code.
struct Source {
    path: PathBuf,
    module: Vec<String>,
    test: bool,
    code: String,
    lines: usize,
}

/// Every `.rs` file below `src`, with module paths (`a/b.rs`, `a/b/mod.rs` → `a::b`).
fn sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out: Vec<Source> = files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(src).unwrap();
            let mut module: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            Source {
                test: name == "tests" || name.ends_with("_tests"),
                lines: text.lines().count(),
                code: strip(&text),
                path,
                module,
            }
        })
        .collect();
    // Modules declared `#[cfg(test)] mod x;` are test code, with everything below them.
    let mut test_mods: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in &out {
        for name in test_modules(&s.code).1 {
            let mut m = s.module.clone();
            m.push(name);
            test_mods.insert(m);
        }
    }
    for s in &mut out {
        if test_mods.iter().any(|t| s.module.starts_with(t)) {
            s.test = true;
        }
    }
    out
}

/// Module paths `file` refers to (absolute, from the crate root): `crate::…`, `super::…`
/// and `self::…` paths, in `use` trees and in code.
fn references(file: &Source) -> Vec<Vec<String>> {
    let code = &file.code;
    let b = code.as_bytes();
    // The module that `super` and `self` are relative to.
    let here: Vec<String> = file.module.clone();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = ["crate::", "super::", "self::"].iter().find(|s| {
            code[i..].starts_with(**s) && !prev_ident(b, i) && (i == 0 || b[i - 1] != b':')
        });
        let Some(&start) = starts else {
            i += 1;
            continue;
        };
        let mut base: Vec<String> = match start {
            "crate::" => Vec::new(),
            "self::" => here.clone(),
            _ => {
                let mut m = here.clone();
                m.pop();
                m
            }
        };
        let mut j = i + start.len();
        // Further `super::` segments.
        while code[j..].starts_with("super::") {
            base.pop();
            j += "super::".len();
        }
        let (paths, end) = use_tree(code, j, &base);
        out.extend(paths);
        i = end.max(i + 1);
    }
    out
}

/// Parses a path or `use` tree at `i` below `base`: the module paths it names, and where it
/// ends.
fn use_tree(code: &str, mut i: usize, base: &[String]) -> (Vec<Vec<String>>, usize) {
    let b = code.as_bytes();
    let mut path = base.to_vec();
    loop {
        while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            i += 1;
        }
        if b.get(i) == Some(&b'{') {
            let mut out = Vec::new();
            i += 1;
            loop {
                while b
                    .get(i)
                    .is_some_and(|c| c.is_ascii_whitespace() || *c == b',')
                {
                    i += 1;
                }
                if b.get(i).is_none_or(|&c| c == b'}') {
                    return (out, i + 1);
                }
                let (sub, end) = use_tree(code, i, &path);
                out.extend(sub);
                if end <= i {
                    return (out, i + 1);
                }
                i = end;
                // Skip `as alias`.
                while b.get(i).is_some_and(|&c| c != b',' && c != b'}') {
                    i += 1;
                }
            }
        }
        let seg: String = code[i..]
            .bytes()
            .take_while(|&c| is_ident(c))
            .map(char::from)
            .collect();
        if seg.is_empty() {
            return (vec![path], i);
        }
        i += seg.len();
        if seg != "self" {
            path.push(seg);
        }
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            return (vec![path], i);
        }
    }
}

/// Cycles between sibling nodes: `edges` maps (parent, from, to); returns each cycle's
/// members.
fn cycles(edges: &BTreeSet<(Vec<String>, String, String)>) -> Vec<String> {
    let mut by_parent: BTreeMap<&Vec<String>, Vec<(&String, &String)>> = BTreeMap::new();
    for (p, a, b) in edges {
        by_parent.entry(p).or_default().push((a, b));
    }
    let mut out = Vec::new();
    for (parent, es) in by_parent {
        let mut adj: HashMap<&String, Vec<&String>> = HashMap::new();
        for &(a, b) in &es {
            adj.entry(a).or_default().push(b);
        }
        // Each pair of mutually reachable nodes is a cycle; report them as strongly
        // connected groups.
        let nodes: BTreeSet<&String> = es.iter().flat_map(|&(a, b)| [a, b]).collect();
        let reach = |from: &String| {
            let mut seen: BTreeSet<&String> = BTreeSet::new();
            let mut stack = vec![from];
            while let Some(n) = stack.pop() {
                for &m in adj.get(n).map(Vec::as_slice).unwrap_or(&[]) {
                    if seen.insert(m) {
                        stack.push(m);
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&String, BTreeSet<&String>> =
            nodes.iter().map(|&n| (n, reach(n))).collect();
        let mut done: BTreeSet<&String> = BTreeSet::new();
        for &n in &nodes {
            if done.contains(n) || !reaches[n].contains(n) {
                continue;
            }
            let group: Vec<&String> = nodes
                .iter()
                .copied()
                .filter(|m| reaches[n].contains(m) && reaches[m].contains(n))
                .collect();
            done.extend(group.iter().copied());
            let names: Vec<String> = group
                .iter()
                .map(|g| {
                    let mut p = parent.clone();
                    p.push((*g).clone());
                    p.join("::")
                })
                .collect();
            let via: Vec<String> = es
                .iter()
                .filter(|(a, b)| group.contains(a) && group.contains(b))
                .map(|(a, b)| format!("{a}→{b}"))
                .collect();
            out.push(format!("{} ({})", names.join(" ⇄ "), via.join(", ")));
        }
    }
    out
}

/// Import edges between sibling nodes: `folders_only` keeps nodes that are directory modules
/// (else every module is a node).
fn import_edges(srcs: &[Source], folders_only: bool) -> BTreeSet<(Vec<String>, String, String)> {
    let folders: BTreeSet<Vec<String>> = srcs
        .iter()
        .filter(|s| {
            let stem = s.path.file_stem().unwrap();
            stem == "mod" || s.path.with_extension("").is_dir()
        })
        .map(|s| s.module.clone())
        .collect();
    let known: BTreeSet<&Vec<String>> = srcs.iter().map(|s| &s.module).collect();
    let mut edges = BTreeSet::new();
    for s in srcs.iter().filter(|s| !s.test && !s.module.is_empty()) {
        for r in references(s) {
            // Longest known module prefix of the path.
            let target = (1..=r.len())
                .rev()
                .map(|n| r[..n].to_vec())
                .find(|m| known.contains(m));
            let Some(t) = target else { continue };
            let common = s.module.iter().zip(&t).take_while(|(a, b)| a == b).count();
            if common == s.module.len() || common == t.len() {
                continue; // within one's own subtree
            }
            let a = s.module[..=common].to_vec();
            let b = t[..=common].to_vec();
            if folders_only && !(folders.contains(&a) && folders.contains(&b)) {
                continue;
            }
            edges.insert((
                s.module[..common].to_vec(),
                a[common].clone(),
                b[common].clone(),
            ));
        }
    }
    edges
}

#[test]
fn functions_files_and_imports_keep_their_shape() {
    let root = workspace();
    let mut found: Vec<(String, usize)> = Vec::new();
    for krate in ["trawl", "trawl-cli", "trawl-py"] {
        let src = root.join("crates").join(krate).join("src");
        let srcs = sources(&src);
        assert!(srcs.len() > 3, "{}: no sources found", src.display());
        for s in srcs.iter().filter(|s| !s.test) {
            let rel = s
                .path
                .strip_prefix(root.join("crates"))
                .unwrap()
                .display()
                .to_string();
            if s.lines > FILE_MAX {
                found.push((format!("file {rel}"), s.lines));
            }
            for (name, _, len) in functions(&s.code) {
                if len > FN_MAX {
                    found.push((format!("fn {rel}:{name}"), len));
                }
            }
        }
        let edges = match krate {
            "trawl" => import_edges(&srcs, true),
            "trawl-cli" => import_edges(&srcs, false),
            _ => BTreeSet::new(),
        };
        for c in cycles(&edges) {
            found.push((format!("cycle {krate}: {c}"), 0));
        }
    }
    let known: HashMap<&str, usize> = KNOWN.iter().copied().collect();
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    for (what, n) in &found {
        seen.insert(what.as_str());
        match known.get(what.as_str()) {
            Some(&limit) if *n <= limit => {}
            Some(&limit) => bad.push(format!("{what}: {n} lines, grew from {limit}")),
            None if what.starts_with("cycle") => bad.push(format!("import {what}")),
            None if what.starts_with("file") => {
                bad.push(format!("{what}: {n} lines (most {FILE_MAX})"))
            }
            None => bad.push(format!("{what}: {n} lines (most {FN_MAX})")),
        }
    }
    for (what, _) in KNOWN {
        if !seen.contains(what) {
            bad.push(format!("{what}: fixed: remove it from KNOWN"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} shape violations:\n  {}",
        bad.len(),
        bad.join("\n  ")
    );
}

#[test]
fn the_checks_see_what_they_check() {
    // The stripper keeps lines and hides strings and comments.
    let src = "fn a() {\n  let s = \"fn b() {\";\n  // fn c() {}\n  let c = '{';\n}\n";
    let code = strip(src);
    assert_eq!(code.lines().count(), src.lines().count());
    let f = functions(&code);
    assert_eq!(f, vec![("a".to_string(), 1, 5)]);
    // Raw strings, lifetimes and nested block comments.
    let src = "fn x<'a>(v: &'a str) -> &'a str {\n r#\"}\"# ;\n /* /* } */ } */\n v\n}\n";
    assert_eq!(functions(&strip(src)), vec![("x".to_string(), 1, 5)]);
    // A declaration has no body; a test block is skipped.
    let src = "trait T { fn d(&self); }\n#[cfg(test)]\nmod tests {\n fn t() {}\n}\n";
    assert!(functions(&strip(src)).is_empty());
    // `use` trees resolve to module paths.
    let (paths, _) = use_tree("a::{b::C, d::{e, f::G}, self};", 0, &["x".into()]);
    let want: Vec<Vec<String>> = [
        vec!["x", "a", "b", "C"],
        vec!["x", "a", "d", "e"],
        vec!["x", "a", "d", "f", "G"],
        vec!["x", "a"],
    ]
    .iter()
    .map(|v| v.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(paths, want);
    // A cycle between two siblings is found, a chain is not.
    let e = |p: &[&str], a: &str, b: &str| {
        (
            p.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            a.to_string(),
            b.to_string(),
        )
    };
    let chain: BTreeSet<_> = [e(&[], "a", "b"), e(&[], "b", "c")].into();
    assert!(cycles(&chain).is_empty());
    let cyc: BTreeSet<_> = [e(&[], "a", "b"), e(&[], "b", "c"), e(&[], "c", "a")].into();
    assert_eq!(cycles(&cyc).len(), 1);
}
