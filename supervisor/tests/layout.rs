//! The supervisor's layout, kept: no cycle between its top-level modules (each `use crate::…`,
//! `crate::…` and `super::…` path of a module's non-test code is an edge to the module it
//! names), and no non-test module over [`LIMIT`] lines but the few named in [`ALLOWED`] with
//! their reason. The checker is tested on small synthetic trees first, so it is known to fail
//! on a cycle and on a long file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The most lines of non-test code a module may have.
const LIMIT: usize = 700;

/// Modules allowed over [`LIMIT`], each with why. An entry no longer needed fails the test,
/// so the list stays as short as the tree allows.
const ALLOWED: &[(&str, &str)] = &[(
    "redact.rs",
    "the redactor is being rewritten as one unit; it is split with that rewrite",
)];

/// A source tree: paths relative to `src/` (`egress/conn/dial.rs`) and their text.
type Tree = BTreeMap<String, String>;

fn read_tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut tree = Tree::new();
    walk(root, root, &mut tree);
    tree
}

/// The module path of a file: `tool/mod.rs` is `tool`, `egress/conn/dial.rs` is
/// `egress::conn::dial`; `None` for the crate roots and for test files.
fn module_of(rel: &str) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.iter().any(|p| p == "tests") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [] => None,
        [only] if only == "lib" || only == "main" => None,
        _ => Some(parts),
    }
}

/// The text before the file's test module: `#[cfg(test)]`, maybe more attributes, then
/// `mod tests`.
fn non_test(text: &str) -> &str {
    for (at, _) in text.match_indices("#[cfg(test)]\n") {
        let mut rest = text[at..].lines().skip(1);
        let opens_tests = loop {
            match rest.next() {
                Some(l) if l.starts_with("#[") => continue,
                Some(l) => break l.starts_with("mod tests"),
                None => break false,
            }
        };
        if opens_tests {
            return &text[..at];
        }
    }
    text
}

/// Lines of non-test code.
fn size(text: &str) -> usize {
    non_test(text).matches('\n').count()
}

/// The top-level modules `text` (the file of module `module`) names, its own excepted. Code
/// after the first `#[cfg(test)]` and comment lines are not read.
fn edges(module: &[String], text: &str) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    };
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = BTreeSet::new();
    let bytes = code.as_bytes();
    let ident = |at: usize| -> String {
        code[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut i = 0;
    while i < bytes.len() {
        // A path starts where the previous character cannot continue an identifier or path.
        let starts =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || b"_:".contains(&bytes[i - 1]));
        if starts && bytes[i..].starts_with(b"crate::") {
            let after = i + "crate::".len();
            if code[after..].starts_with('{') {
                named.extend(group_heads(&code[after..]));
            } else {
                named.insert(ident(after));
            }
            i = after;
            continue;
        }
        if starts && bytes[i..].starts_with(b"super::") {
            // Climb one level per `super::` from the module's own path.
            let mut at = i;
            let mut depth = module.len();
            while code[at..].starts_with("super::") {
                depth = depth.saturating_sub(1);
                at += "super::".len();
            }
            if depth > 0 {
                named.insert(module[0].clone());
            } else if code[at..].starts_with('{') {
                named.extend(group_heads(&code[at..]));
            } else {
                named.insert(ident(at));
            }
            i = at;
            continue;
        }
        i += 1;
    }
    named.remove(&module[0]);
    named.remove("");
    named
}

/// The first segment of each path in a `{a, b::c, d::{e, f}}` group that starts `text`.
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut expecting = false;
    for (i, c) in text.char_indices() {
        match c {
            '{' => {
                depth += 1;
                expecting = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expecting = true,
            c if expecting && (c.is_ascii_alphabetic() || c == '_') => {
                let head: String = text[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                heads.push(head);
                expecting = false;
            }
            _ => {}
        }
    }
    heads
}

/// The graph of top-level modules: each to the top-level modules its files name. Names that
/// are not modules of the tree (`crate::Result`, a re-export) are dropped.
fn graph(tree: &Tree) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in tree {
        if let Some(module) = module_of(rel) {
            let out = edges(&module, text);
            graph.entry(module[0].clone()).or_default().extend(out);
        }
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for out in graph.values_mut() {
        out.retain(|m| known.contains(m));
    }
    graph
}

/// A cycle of the graph, as the modules on it with the first repeated at the end.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(at.to_string(), Mark::Open);
        path.push(at.to_string());
        for next in graph.get(at).into_iter().flatten() {
            match marks.get(next.as_str()) {
                Some(Mark::Open) => {
                    let from = path.iter().position(|m| m == next).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(c) = visit(graph, next, marks, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        marks.insert(at.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for start in graph.keys() {
        if !marks.contains_key(start.as_str())
            && let Some(c) = visit(graph, start, &mut marks, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// What is wrong with the tree's sizes: modules over `limit` not allowed, and allowances no
/// longer needed (or naming no file).
fn size_problems(tree: &Tree, limit: usize, allowed: &[(&str, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (rel, text) in tree {
        if module_of(rel).is_none() && !matches!(rel.as_str(), "lib.rs" | "main.rs") {
            continue;
        }
        let n = size(text);
        if n > limit && !allowed.iter().any(|(f, _)| f == rel) {
            problems.push(format!(
                "{rel}: {n} lines of non-test code, over {limit}; split it by responsibility"
            ));
        }
    }
    for (file, _) in allowed {
        match tree.get(*file) {
            None => problems.push(format!(
                "{file}: allowed over the limit, but not in the tree"
            )),
            Some(text) if size(text) <= limit => problems.push(format!(
                "{file}: {} lines, within {limit} now; drop its allowance",
                size(text)
            )),
            Some(_) => {}
        }
    }
    problems
}

fn synthetic(files: &[(&str, &str)]) -> Tree {
    files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

#[test]
fn the_checker_finds_a_cycle_in_a_small_tree() {
    // a -> b through a grouped `use`, b -> c through a nested `super::super::`, c -> a.
    let cyclic = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("a.rs", "//! A.\nuse crate::{b::Thing, x};\n"),
        ("b.rs", "//! B.\nmod inner;\n"),
        (
            "b/inner.rs",
            "//! B's inner.\nuse super::super::c::Other;\n",
        ),
        ("c.rs", "//! C.\nfn f() { let _ = crate::a::g(); }\n"),
    ]);
    let g = graph(&cyclic);
    assert_eq!(g["a"], BTreeSet::from(["b".to_string()]), "x is no module");
    assert_eq!(g["b"], BTreeSet::from(["c".to_string()]));
    assert_eq!(g["c"], BTreeSet::from(["a".to_string()]));
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );

    // The same tree with c's edge only in a comment, in its tests, or to itself: no cycle.
    let acyclic = synthetic(&[
        ("a.rs", "use crate::{b::Thing, x};\n"),
        ("b.rs", "mod inner;\n"),
        (
            "b/inner.rs",
            "use super::super::c::Other;\nuse super::Mine;\n",
        ),
        (
            "c.rs",
            "// see crate::a\nuse crate::c::Me;\n#[cfg(test)]\nmod tests {\n    use crate::a::g;\n}\n",
        ),
        ("c/tests.rs", "use crate::a::g;\n"),
    ]);
    let g = graph(&acyclic);
    assert!(g["c"].is_empty(), "{g:?}");
    assert_eq!(find_cycle(&g), None);
}

#[test]
fn the_checker_finds_a_long_module_and_a_stale_allowance() {
    let long = format!("//! Long.\n{}", "fn f() {}\n".repeat(20));
    let with_tests = format!(
        "//! Short, long tests.\n#[cfg(test)]\nmod tests {{\n{}}}\n",
        "fn t() {}\n".repeat(50)
    );
    let with_allowed_tests = format!(
        "//! Short.\n#[cfg(test)]\nfn helper() {{}}\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests {{\n{}}}\n",
        "fn t() {}\n".repeat(50)
    );
    let tree = synthetic(&[
        ("long.rs", &long),
        ("short.rs", &with_tests),
        ("short_too.rs", &with_allowed_tests),
        ("also/tests.rs", &"x\n".repeat(50)),
    ]);
    assert_eq!(
        size_problems(&tree, 10, &[]),
        ["long.rs: 21 lines of non-test code, over 10; split it by responsibility"]
    );
    assert!(size_problems(&tree, 10, &[("long.rs", "why")]).is_empty());
    assert_eq!(
        size_problems(&tree, 30, &[("long.rs", "why"), ("gone.rs", "why")]),
        [
            "long.rs: 21 lines, within 30 now; drop its allowance",
            "gone.rs: allowed over the limit, but not in the tree",
        ]
    );
}

fn supervisor_tree() -> Tree {
    read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn the_supervisor_has_no_module_cycle() {
    let g = graph(&supervisor_tree());
    // Read at all: the tree has its modules and the library names the registry.
    assert!(g.len() > 10, "{g:?}");
    assert!(g["library"].contains("registry"), "{g:?}");
    if let Some(cycle) = find_cycle(&g) {
        panic!(
            "the supervisor's modules depend on each other in a cycle: {}; move what both \
             need into a module both may use",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn no_supervisor_module_is_over_the_limit() {
    let problems = size_problems(&supervisor_tree(), LIMIT, ALLOWED);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
