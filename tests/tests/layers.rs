//! The layers of every crate of the workspace, written down once, and checked on the sources.
//!
//! A source file *imports* another when its code names a module path that resolves to the other file:
//! `use crate::a::b`, `use super::x`, `use child::y` (a module it declares), or such a path written in
//! code (`crate::log::warn(..)`). For every crate below, the test reads every non-test source file,
//! resolves those paths to files, and fails
//! - on an import from a lower layer to a higher one (the layer table below says which is which), and
//! - on any import circle between files, whatever their layers (a parent `mod.rs` that uses its child
//!   while the child uses something defined in the parent is a circle too).
//!
//! Change the layers here, in this one table, never around it. Test modules (`#[cfg(test)] mod ..`,
//! inline or in their own file) are not read: tests may look at anything.
//!
//! Run alone: `cargo test --release -p rshmem-tests --test layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate: its source folder (from the workspace root) and its layers, bottom first. Each layer is a
/// list of module paths (`"config"` covers `config.rs`, `config/mod.rs` and everything under
/// `config/`; `""` is the crate root, `lib.rs`). A file belongs to the layer of the longest path that
/// covers it; a file no layer covers is an error (add it to a layer).
struct Crate {
    name: &'static str,
    src: &'static str,
    layers: &'static [(&'static str, &'static [&'static str])],
}

const CRATES: &[Crate] = &[
    Crate { name: "rshmem-common", src: "common/src", layers: &[("helpers", &["backoff", "bounded"]), ("api", &[""])] },
    Crate {
        name: "rshmem-ibgda",
        src: "ibgda/src",
        layers: &[
            ("codes", &["codes"]),
            ("mlx5 layouts", &["mlx5"]),
            ("work requests", &["wqe"]),
            ("queue pairs", &["qp"]),
            ("posting", &["post"]),
            ("NIC model", &["nicmodel"]),
            ("emulated NIC", &["emu"]),
            ("api", &[""]),
        ],
    },
    Crate {
        name: "rshmem-device",
        src: "device/src",
        layers: &[
            ("types", &["types"]),
            ("state", &["state"]),
            ("arch", &["arch"]),
            ("route", &["route"]),
            ("remote", &["remote"]),
            ("ops", &["ops"]),
            ("coll", &["coll"]),
            ("point", &["point"]),
            ("api", &["capi", ""]),
        ],
    },
    Crate {
        name: "rshmem",
        src: "runtime/src",
        layers: &[
            // Services: no rshmem layer above them.
            ("error", &["error"]),
            ("config", &["config"]),
            ("log", &["log"]),
            ("heap", &["heap"]),
            ("bootstrap", &["bootstrap"]),
            ("node", &["node"]),
            // Where kernels run and memory lives.
            ("platform", &["platform"]),
            // What --diagnose and automatic selection check.
            ("probe", &["probe"]),
            // Which PEs this PE reaches, and how.
            ("transport", &["transport"]),
            ("teams", &["teams"]),
            ("runtime", &["runtime"]),
            // The API of user programs (api/): the plain host calls, typed memory, kernels, streams,
            // collectives, MPI. They find the running instance with runtime::get.
            ("api", &["api"]),
            // The C ABI, over the Rust API.
            ("c abi", &["api/capi"]),
            // lib.rs: the crate's index, re-exporting the API.
            ("crate root", &[""]),
        ],
    },
    Crate {
        name: "rshmem-python",
        src: "python/src",
        layers: &[("errors", &["errors"]), ("types", &["dtype"]), ("memory", &["mem"]), ("heap", &["heap"]), ("operations", &["ops"]), ("module", &[""])],
    },
    Crate { name: "rshmem-launcher", src: "launcher/src", layers: &[("parts", &["cli", "output", "signals", "netns", "pmi", "child", "selftest", "bind", "split"]), ("job", &["job"]), ("main", &[""])] },
];

// ------------------------------------------------------------------------------------------- reading

/// Source text with comments, string and char literals blanked (newlines kept), so that a path in a
/// comment or a message is not an import.
fn code_only(s: &str) -> String {
    let b = s.as_bytes();
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
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || (b.get(i + 1) == Some(&b'#') && !is_ident(b.get(i.wrapping_sub(1)).copied()))) {
            // raw string r"..", r#".."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            j = (j + close.len()).min(b.len());
            for &x in &b[i..j] {
                blank(&mut out, x);
            }
            i = j;
        } else if c == b'"' {
            out.push(b' ');
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
            out.push(b' ');
            i += 1;
        } else if c == b'\'' && !is_ident(b.get(i.wrapping_sub(1)).copied()) {
            // A char literal ('x', '\n', '\u{..}') — or a lifetime ('a), which is left alone.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&x| x == b'\'').map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                // multi-byte UTF-8 char literal
                let s = std::str::from_utf8(&b[i + 1..]).ok().and_then(|t| t.chars().next().map(|ch| ch.len_utf8()));
                s.filter(|&l| b.get(i + 1 + l) == Some(&b'\'')).map(|l| i + 1 + l)
            };
            match end {
                Some(e) => {
                    for &x in &b[i..=e] {
                        blank(&mut out, x);
                    }
                    i = e + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_ident(c: Option<u8>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Whether a `#[cfg(..)]` attribute's condition holds only in test builds (`test`, `all(test, ..)`).
fn is_test_cfg(cond: &str) -> bool {
    let words: Vec<&str> = cond.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
    words.contains(&"test") && !cond.contains("not(test") && !cond.starts_with("any(")
}

/// The next `#[cfg(..)]` at or after `from` whose condition is test-only: (start, end of attribute).
fn next_test_cfg(s: &str, mut from: usize) -> Option<(usize, usize)> {
    while let Some(p) = s[from..].find("#[cfg(") {
        let at = from + p;
        let mut depth = 0;
        let mut end = None;
        for (k, ch) in s[at + 5..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(at + 5 + k + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let end = end?;
        if is_test_cfg(&s[at + 6..end - 1]) {
            return Some((at, end + 1));
        }
        from = end;
    }
    None
}

/// Removes test-only items (`#[cfg(test)]` or `#[cfg(all(test, ..))]` on an item whose body is a brace
/// block or ends with `;`) from code produced by [`code_only`].
fn without_test_items(code: &str) -> String {
    let mut s = code.to_string();
    let mut from = 0;
    while let Some((at, attr_end)) = next_test_cfg(&s, from) {
        let rest = &s[attr_end..];
        // The item ends at the matching close of its first brace block, or at a `;` before any brace.
        let semi = rest.find(';');
        let brace = rest.find('{');
        let end = match (brace, semi) {
            (Some(b), Some(sc)) if sc < b => attr_end + sc + 1,
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = s.len();
                for (k, ch) in s[attr_end + b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = attr_end + b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(sc)) => attr_end + sc + 1,
            (None, None) => s.len(),
        };
        let blanked: String = s[at..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
        s.replace_range(at..end, &blanked);
        from = at;
    }
    s
}

/// The module names a file declares (`mod x;` / `pub(crate) mod x;`), and which of them are test-only
/// (`#[cfg(test)]` on the declaration).
fn declared_modules(raw: &str) -> (Vec<String>, Vec<String>) {
    let code = code_only(raw);
    let (mut all, mut tests) = (vec![], vec![]);
    let mut attrs_test = false;
    for line in code.lines() {
        let t = line.trim();
        let mut t2 = t;
        if let Some(c) = t.strip_prefix("#[cfg(") {
            let close = c.find(")]").unwrap_or(c.len());
            if is_test_cfg(&c[..close]) {
                attrs_test = true;
            }
            t2 = c.get(close + 2..).unwrap_or("").trim();
            if t2.is_empty() {
                continue;
            }
        }
        let decl = t2
            .strip_prefix("pub(crate) mod ")
            .or_else(|| t2.strip_prefix("pub(super) mod "))
            .or_else(|| t2.strip_prefix("pub mod "))
            .or_else(|| t2.strip_prefix("mod "));
        if let Some(d) = decl {
            let name: String = d.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if d[name.len()..].trim_start().starts_with(';') {
                if attrs_test {
                    tests.push(name.clone());
                }
                all.push(name);
            }
        }
        if !t.starts_with("#[") {
            attrs_test = false;
        }
    }
    (all, tests)
}

/// A source file of a crate: its module path (`[]` for lib.rs) and its code.
struct File {
    rel: String,
    module: Vec<String>,
    code: String,
    children: Vec<String>,
}

/// Reads a crate's module tree from lib.rs (or main.rs), following `mod` declarations and skipping
/// test-only modules.
fn read_crate(root: &Path, src: &str) -> Vec<File> {
    let dir = root.join(src);
    let top = ["lib.rs", "main.rs"].iter().map(|f| dir.join(f)).find(|p| p.exists()).unwrap_or_else(|| panic!("{src}: no lib.rs or main.rs"));
    let mut files = vec![];
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(top, vec![])];
    while let Some((path, module)) = stack.pop() {
        let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (children, test_children) = declared_modules(&raw);
        // Where this file's children live: next to lib.rs/main.rs/mod.rs, else in a folder named after it.
        let base = if matches!(path.file_name().and_then(|f| f.to_str()), Some("lib.rs" | "main.rs" | "mod.rs")) {
            path.parent().unwrap().to_path_buf()
        } else {
            path.with_extension("")
        };
        for c in children.iter().filter(|c| !test_children.contains(c)) {
            let a = base.join(format!("{c}.rs"));
            let b = base.join(c).join("mod.rs");
            let p = if a.exists() { a } else if b.exists() { b } else { continue };
            let mut m = module.clone();
            m.push(c.clone());
            stack.push((p, m));
        }
        let rel = path.strip_prefix(&dir).unwrap().to_string_lossy().replace('\\', "/");
        files.push(File { rel, module, code: without_test_items(&code_only(&raw)), children });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    files
}

/// The module paths a piece of code names: every `crate::..`, `super::..`, `self::..` path and every
/// path that starts with one of `children`, with `use` groups (`a::{b, c::d}`) expanded. Each result
/// is (start, segments) with start "crate", "super", "self" or "child".
fn paths_in(code: &str, children: &[String]) -> Vec<(usize, String, Vec<String>)> {
    let b = code.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let prev = if i > 0 { Some(b[i - 1]) } else { None };
        if !is_ident(Some(b[i])) || is_ident(prev) || (i >= 2 && &b[i - 2..i] == b"::") {
            i += 1;
            continue;
        }
        let start_word: String = code[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let after = i + start_word.len();
        let is_path = code[after..].starts_with("::");
        let kind = match start_word.as_str() {
            "crate" | "super" | "self" => start_word.clone(),
            w if children.iter().any(|c| c == w) => "child".to_string(),
            _ => String::new(),
        };
        if kind.is_empty() || !is_path {
            i = after.max(i + 1);
            continue;
        }
        let first = if kind == "child" { vec![start_word.clone()] } else { vec![] };
        let (list, end) = expand(code, after + 2, first);
        // `crate::name!(..)`: a macro, exported at the crate root wherever it is defined.
        let kind = if code[end.min(code.len())..].trim_start().starts_with('!') { format!("{kind}!") } else { kind };
        for segs in list {
            out.push((i, kind.clone(), segs));
        }
        i = end.max(i + 1);
    }
    out
}

/// Expands the path continuing at `at` (just after a `::`) with the segments so far, `use` groups
/// included; returns the paths and where parsing stopped.
fn expand(code: &str, mut at: usize, mut segs: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let b = code.as_bytes();
    loop {
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        if at < b.len() && b[at] == b'{' {
            let mut out = vec![];
            at += 1;
            loop {
                while at < b.len() && (b[at].is_ascii_whitespace() || b[at] == b',') {
                    at += 1;
                }
                if at >= b.len() || b[at] == b'}' {
                    return (if out.is_empty() { vec![segs] } else { out }, at + 1);
                }
                let (list, end) = expand(code, at, segs.clone());
                out.extend(list);
                at = end;
            }
        }
        let w: String = code[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if w.is_empty() {
            // `*` or something else: the path ends here.
            return (vec![segs], at + usize::from(at < b.len() && b[at] == b'*'));
        }
        at += w.len();
        if w != "self" {
            segs.push(w);
        }
        let rest = &code[at..];
        let trimmed = rest.trim_start();
        if let Some(r) = trimmed.strip_prefix("::") {
            at = code.len() - r.len();
            continue;
        }
        // ` as name` after a use path
        return (vec![segs], at);
    }
}

/// The file that a path from `from` (module path) names, if any: the deepest module it reaches.
fn resolve(modules: &BTreeMap<Vec<String>, usize>, from: &[String], kind: &str, segs: &[String]) -> Option<usize> {
    let mut m: Vec<String> = match kind {
        "crate" => vec![],
        "super" => from[..from.len().saturating_sub(1)].to_vec(),
        _ => from.to_vec(),
    };
    let mut segs = segs;
    // `super::super::x`
    while segs.first().is_some_and(|s| s == "super") {
        m.pop();
        segs = &segs[1..];
    }
    let mut found = modules.get(&m).copied();
    for s in segs {
        m.push(s.clone());
        match modules.get(&m) {
            Some(&f) => found = Some(f),
            None => break,
        }
    }
    found
}

struct Graph {
    files: Vec<File>,
    /// from -> to -> the paths that tie them
    edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
}

fn graph(files: Vec<File>) -> Graph {
    let modules: BTreeMap<Vec<String>, usize> = files.iter().enumerate().map(|(i, f)| (f.module.clone(), i)).collect();
    // Where each macro is defined (`macro_rules! name`).
    let mut macros: BTreeMap<String, usize> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        for part in f.code.split("macro_rules!").skip(1) {
            let name: String = part.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            macros.entry(name).or_insert(i);
        }
    }
    let mut edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        let nested = nested_spans(&f.code);
        for (at, kind, segs) in paths_in(&f.code, &f.children) {
            // Inside an inline `mod x { .. }` or a macro body, `super::` and `self::` name this file
            // (or something inside it), not another file.
            let depth = nested.iter().filter(|&&(a, b)| a <= at && at < b).count();
            if depth > 0 && (kind.starts_with("super") || kind.starts_with("self")) && segs.iter().take_while(|s| *s == "super").count() < depth {
                continue;
            }
            let target = match kind.strip_suffix('!') {
                Some(k) if k == "crate" && segs.len() == 1 => macros.get(&segs[0]).copied(),
                Some(k) => resolve(&modules, &f.module, k, &segs),
                None => resolve(&modules, &f.module, &kind, &segs),
            };
            let kind = kind.trim_end_matches('!').to_string();
            let Some(t) = target else { continue };
            if t != i {
                let text = match kind.as_str() {
                    "child" => segs.join("::"),
                    k => format!("{k}::{}", segs.join("::")),
                };
                edges.entry(i).or_default().entry(t).or_default().insert(text);
            }
        }
    }
    Graph { files, edges }
}

/// Byte spans of the blocks in which `super` does not leave the file: inline `mod name { .. }` blocks
/// and `macro_rules!` bodies (whose modules and paths are expanded where the macro is used, usually in
/// this file).
fn nested_spans(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let close = |open: usize| -> usize {
        let mut depth = 0;
        for (k, &c) in b[open..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return open + k + 1;
                    }
                }
                _ => {}
            }
        }
        b.len()
    };
    let mut v = vec![];
    for (kw, needs_name) in [("mod ", true), ("macro_rules!", false)] {
        let mut from = 0;
        while let Some(p) = code[from..].find(kw) {
            let at = from + p;
            from = at + kw.len();
            if at > 0 && is_ident(Some(b[at - 1])) {
                continue;
            }
            let rest = &code[at + kw.len()..];
            let name_len = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$').count();
            if needs_name && name_len == 0 {
                continue;
            }
            let skip = rest.len() - rest.trim_start().len() + name_len;
            if let Some(open) = rest[skip..].find(|c: char| !c.is_whitespace()).filter(|&o| rest[skip + o..].starts_with('{')) {
                let start = at + kw.len() + skip + open;
                v.push((start, close(start)));
            }
        }
    }
    v
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(g: &Graph) -> Vec<Vec<usize>> {
    struct T<'a> {
        g: &'a Graph,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        let succ: Vec<usize> = t.g.edges.get(&v).map(|m| m.keys().copied().collect()).unwrap_or_default();
        for w in succ {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = vec![];
            loop {
                let w = t.stack.pop().unwrap();
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let n = g.files.len();
    let mut t = T { g, index: vec![None; n], low: vec![0; n], on: vec![false; n], stack: vec![], next: 0, out: vec![] };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The layer index of a module path: the longest layer path covering it.
fn layer_of(c: &Crate, module: &[String]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (li, (_, paths)) in c.layers.iter().enumerate() {
        for p in *paths {
            let segs: Vec<&str> = if p.is_empty() { vec![] } else { p.split('/').collect() };
            let covers = if segs.is_empty() { module.is_empty() } else { module.len() >= segs.len() && module.iter().zip(&segs).all(|(a, b)| a == b) };
            if covers && best.is_none_or(|(_, l)| segs.len() > l) {
                best = Some((li, segs.len()));
            }
        }
    }
    best.map(|(li, _)| li)
}

/// Everything wrong with one crate's sources under `root`: files in no layer, upward imports, circles.
fn problems(root: &Path, c: &Crate) -> Vec<String> {
    let g = graph(read_crate(root, c.src));
    let mut bad = vec![];
    let layer: Vec<Option<usize>> = g.files.iter().map(|f| layer_of(c, &f.module)).collect();
    for (f, l) in g.files.iter().zip(&layer) {
        if l.is_none() {
            bad.push(format!("{}: {}/{} is in no layer: add its module path to a layer of {} in tests/tests/layers.rs", c.name, c.src, f.rel, c.name));
        }
    }
    for (&from, tos) in &g.edges {
        for (&to, names) in tos {
            if let (Some(a), Some(b)) = (layer[from], layer[to]) {
                if b > a {
                    bad.push(format!(
                        "{}: upward import: {}/{} (layer {:?}) uses {}/{} (layer {:?}, higher): {}",
                        c.name,
                        c.src,
                        g.files[from].rel,
                        c.layers[a].0,
                        c.src,
                        g.files[to].rel,
                        c.layers[b].0,
                        names.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
    for comp in circles(&g) {
        let mut ties = vec![];
        for &a in &comp {
            for &b in &comp {
                if let Some(names) = g.edges.get(&a).and_then(|m| m.get(&b)) {
                    ties.push(format!("    {} -> {}: {}", g.files[a].rel, g.files[b].rel, names.iter().cloned().collect::<Vec<_>>().join(", ")));
                }
            }
        }
        bad.push(format!(
            "{}: import circle of {} files ({}):\n{}",
            c.name,
            comp.len(),
            comp.iter().map(|&i| g.files[i].rel.as_str()).collect::<Vec<_>>().join(", "),
            ties.join("\n")
        ));
    }
    bad
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn every_crate_keeps_its_layers_and_has_no_import_circle() {
    let root = workspace_root();
    let mut bad = vec![];
    for c in CRATES {
        let files = read_crate(&root, c.src);
        assert!(!files.is_empty(), "{}: no source files under {}", c.name, c.src);
        bad.extend(problems(&root, c));
    }
    assert!(bad.is_empty(), "{} layering problem(s):\n{}", bad.len(), bad.join("\n"));
}

/// Every crate of the workspace with a src/ folder has its layers written down here.
#[test]
fn every_crate_with_sources_is_in_the_table() {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest.split("members = [").nth(1).unwrap().split(']').next().unwrap();
    for m in members.split(',').map(|m| m.trim().trim_matches('"')).filter(|m| !m.is_empty()) {
        let src = format!("{m}/src");
        let kernels_or_tests = m.ends_with("kernels") || m == "tests" || m.starts_with("tests/") || m == "examples" || m.starts_with("build/");
        if root.join(&src).is_dir() && !kernels_or_tests {
            assert!(CRATES.iter().any(|c| c.src == src), "crate {m} has sources but no layers in tests/tests/layers.rs");
        }
    }
}

/// The checker itself: on a small synthetic crate it finds an upward import, a parent/child circle
/// and a file in no layer, and accepts the same crate once they are mended.
#[test]
fn the_checker_finds_upward_imports_and_circles() {
    let dir = std::env::temp_dir().join(format!("rshmem-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("low")).unwrap();
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    const C: Crate = Crate { name: "synthetic", src: "src", layers: &[("low", &["low"]), ("high", &["high"]), ("api", &[""])] };
    write("lib.rs", "pub mod low;\npub mod high;\npub use high::run;\n");
    write("high.rs", "use crate::low::parts::Part;\npub fn run() -> Part { Part }\n");
    write("low/mod.rs", "pub mod parts;\npub mod extra;\n// crate::high::run in a comment is no import\n");
    write("low/parts.rs", "pub struct Part;\nfn f() -> &'static str { \"crate::high::run\" }\n");
    write("low/extra.rs", "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::high::run; }\n");
    assert_eq!(problems(&dir, &C), Vec::<String>::new(), "the clean synthetic crate must pass");

    // An upward import: low uses high.
    write("low/extra.rs", "pub fn g() { crate::high::run(); }\n");
    let p = problems(&dir, &C);
    assert!(p.iter().any(|s| s.contains("upward import") && s.contains("low/extra.rs") && s.contains("crate::high::run")), "{p:?}");
    // ... which also closes a circle high -> low/parts? no: high -> low/parts only; low/extra -> high.
    write("low/extra.rs", "pub fn g() {}\n");

    // A parent/child circle inside one layer.
    write("low/mod.rs", "pub mod parts;\npub mod extra;\npub struct Shared;\npub fn h() { parts::make(); }\n");
    write("low/parts.rs", "pub struct Part;\npub fn make() -> super::Shared { super::Shared }\n");
    let p = problems(&dir, &C);
    assert!(p.iter().any(|s| s.contains("import circle of 2 files") && s.contains("low/mod.rs") && s.contains("low/parts.rs")), "{p:?}");
    write("low/mod.rs", "pub mod parts;\npub mod extra;\n");
    write("low/parts.rs", "pub struct Part;\n");

    // A file in no layer.
    write("lib.rs", "pub mod low;\npub mod high;\npub mod stray;\n");
    write("stray.rs", "use crate::{low::parts::Part, high};\n");
    let p = problems(&dir, &C);
    assert!(p.iter().any(|s| s.contains("stray.rs is in no layer")), "{p:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
