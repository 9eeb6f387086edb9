//! The rule this test enforces: inside each crate, the top-level modules (a file `src/x.rs` or a
//! folder `src/x/`) form layers, never a circle. A module may name a module of a lower layer
//! (`use crate::x::…`, `crate::x::f()`, `super::x` from a top-level file), and the lower one
//! must not name it back, not even through a third module.
//!
//! The test reads the source, not the compiler's view: it drops comments, string literals and
//! `#[cfg(test)] mod` items, then collects every `crate::…` and root-reaching `super::…` path,
//! `use crate::{a, b::c}` groups included.
//!
//! When it fails, it prints a circle as the files that close it. Break the circle by direction:
//! decide which module is the base, then move what the base takes from the upper module (a shared
//! type, an error, an accessor like `impl Runtime { fn streams() }`) into the base or into the
//! upper module's own file, so the arrow points down only. A re-export does not break a circle;
//! `docs/architecture.md` lists each crate's layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules are layered. Not yet the engine: its runtime state (`runtime/`),
/// the recorder and the concept services still name each other.
const CRATES: [&str; 4] = ["systems", "components", "device", "acl"];

/// For each top-level module, the modules it names, each with the first place it does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

#[test]
fn no_crate_has_an_import_circle_between_its_top_level_modules() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut circles = Vec::new();
    for krate in CRATES {
        let graph = module_graph(&workspace.join(krate).join("src"), workspace);
        if let Some(circle) = find_circle(&graph) {
            circles.push(format!("{krate}: {}", circle.join("\n    -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "top-level modules import each other in a circle:\n{}",
        circles.join("\n")
    );
}

/// The graph of `src`'s top-level modules (`bin/` holds crates of their own).
fn module_graph(src: &Path, workspace: &Path) -> Graph {
    let files: Vec<(PathBuf, Vec<String>)> = rust_files(src)
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(src).unwrap().with_extension("");
            let path = rel.iter().map(|c| c.to_str().unwrap().to_owned());
            let path = path.filter(|c| c != "mod").collect();
            (file, path)
        })
        .filter(|(_, path): &(_, Vec<String>)| !["lib", "main", "bin"].contains(&path[0].as_str()))
        .collect();
    let tops: BTreeSet<&str> = files.iter().map(|(_, path)| path[0].as_str()).collect();
    let mut graph = Graph::new();
    for (file, path) in files
        .iter()
        .filter(|(_, path)| path.last().unwrap() != "tests")
    {
        let code = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(workspace).unwrap().display();
        for (line, target) in references(&code, path.len()) {
            if target != path[0] && tops.contains(target.as_str()) {
                let edges = graph.entry(path[0].clone()).or_default();
                edges.entry(target).or_insert(format!("{shown}:{line}"));
            }
        }
    }
    graph
}

/// Every `.rs` file under `dir`, in a fixed order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for p in entries {
        match p.is_dir() {
            true => out.extend(rust_files(&p)),
            false if p.extension().is_some_and(|e| e == "rs") => out.push(p),
            false => {}
        }
    }
    out
}

/// The top-level modules `code` (a file `depth` modules below the crate root) names, with
/// the line of each reference.
fn references(code: &str, depth: usize) -> Vec<(usize, String)> {
    let words = without_test_items(tokens(code));
    let mut out = Vec::new();
    for (k, (line, w)) in words.iter().enumerate() {
        let after = |n: usize| words.get(k + n).map_or("", |(_, t)| t.as_str());
        let start = if w == "crate" && after(1) == "::" && (k == 0 || words[k - 1].1 != "::") {
            k + 2
        } else if w == "super" && (k == 0 || words[k - 1].1 != "::") {
            let supers = (0..)
                .take_while(|&n| after(2 * n) == "super" && after(2 * n + 1) == "::")
                .count();
            if supers < depth {
                continue;
            }
            k + 2 * supers
        } else {
            continue;
        };
        tree_heads(&words, start, &mut |name| {
            out.push((*line, name.to_owned()))
        });
    }
    out
}

/// Calls `each` with the first name of the path or use tree starting at `words[at]`.
fn tree_heads(words: &[(usize, String)], at: usize, each: &mut impl FnMut(&str)) {
    let Some((_, w)) = words.get(at) else { return };
    if w != "{" {
        return each(w);
    }
    let (mut depth, mut item_start) = (0, true);
    for (_, w) in &words[at..] {
        match w.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 1 => item_start = true,
            name if depth == 1 && item_start => {
                item_start = false;
                each(name);
            }
            _ => {}
        }
        if depth == 0 {
            break;
        }
    }
}

/// `words` without the items under `#[cfg(test)]` (test modules may name any module).
fn without_test_items(words: Vec<(usize, String)>) -> Vec<(usize, String)> {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut out = Vec::new();
    let mut k = 0;
    while k < words.len() {
        if !words[k..].iter().map(|w| w.1.as_str()).take(7).eq(CFG_TEST) {
            out.push(words[k].clone());
            k += 1;
            continue;
        }
        // Skip the item: up to its `;`, or to the `}` that closes its body.
        let mut depth = 0;
        k += CFG_TEST.len();
        while let Some((_, w)) = words.get(k) {
            k += 1;
            match w.as_str() {
                "{" => depth += 1,
                "}" if depth == 1 => break,
                "}" => depth -= 1,
                ";" if depth == 0 => break,
                _ => {}
            }
        }
    }
    out
}

/// `code` as identifiers, `::` and single punctuation marks, each with its line; comments and
/// string and char literals are left out.
fn tokens(code: &str) -> Vec<(usize, String)> {
    let c: Vec<char> = code.chars().collect();
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    // Just past the first `pat` at or after `from` (the end if none).
    let past = |from: usize, pat: &[char]| {
        let at = (from..c.len()).find(|&j| c[j..].starts_with(pat));
        at.map_or(c.len(), |j| j + pat.len())
    };
    while i < c.len() {
        let rest = &c[i..];
        let word = rest
            .iter()
            .take_while(|ch| ch.is_alphanumeric() || **ch == '_');
        let word = word.count();
        let quoted = rest[0] == '"' || (rest[0] == '\'' && rest.get(2) == Some(&'\''));
        let skip_to = if rest.starts_with(&['/', '/']) {
            past(i, &['\n']) - 1
        } else if rest.starts_with(&['/', '*']) {
            past(i + 2, &['*', '/'])
        } else if let Some(close) = raw_string_close(&c, i) {
            past(i + 1 + close.len(), &close)
        } else if quoted || rest.starts_with(&['\'', '\\']) {
            let mut j = i + 1;
            while j < c.len() && c[j] != rest[0] {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if word > 0 {
            out.push((line, rest[..word].iter().collect()));
            i += word;
            continue;
        } else {
            let colons = rest.starts_with(&[':', ':']);
            let token = if colons {
                "::".into()
            } else {
                rest[0].to_string()
            };
            if !rest[0].is_whitespace() {
                out.push((line, token));
            }
            line += (rest[0] == '\n') as usize;
            i += 1 + colons as usize;
            continue;
        };
        let skip_to = skip_to.clamp(i + 1, c.len());
        line += c[i..skip_to].iter().filter(|&&ch| ch == '\n').count();
        i = skip_to;
    }
    out
}

/// The closing quote and hashes of the raw string literal starting at `c[i]`, if one does.
fn raw_string_close(c: &[char], i: usize) -> Option<Vec<char>> {
    let before = i.checked_sub(1).map(|j| c[j]);
    if c[i] != 'r' || before.is_some_and(|b| b != 'b' && (b.is_alphanumeric() || b == '_')) {
        return None;
    }
    let hashes = c[i + 1..].iter().take_while(|&&ch| ch == '#').count();
    let close = std::iter::once('"').chain(std::iter::repeat_n('#', hashes));
    (c.get(i + 1 + hashes) == Some(&'"')).then(|| close.collect())
}

/// A circle in `graph` as `module (where it names the next)` steps, if there is one.
fn find_circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_owned());
            return Some(circle);
        }
        if !done.insert(m.to_owned()) {
            return None;
        }
        path.push(m.to_owned());
        for next in g.get(m).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(next, g, done, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    let circle = graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))?;
    let steps = circle
        .windows(2)
        .map(|w| format!("{} ({})", w[0], graph[&w[0]][&w[1]]));
    Some(steps.chain(circle.last().cloned()).collect())
}
