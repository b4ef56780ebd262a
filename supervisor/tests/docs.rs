//! Docs that stay true: every repository path a doc names exists in the checkout.
//!
//! The docs read are the top-level `README.md`, every `docs/*.md`, and the `README.md` of each
//! top-level directory (the crates' and the Python package's).
//!
//! What counts as a repository path (the rule [`named_paths`] applies):
//! - a Markdown link target (`[text](target)`) that is not a URL (`scheme:`), not a bare anchor
//!   (`#…`) and not a mail address; its `#anchor` is dropped;
//! - a backticked span that is one token (no whitespace) with a `/`, whose first segment is one
//!   of [`TOP`], the repository's own top-level directories (`supervisor/src/…`, `tests/…`,
//!   `docs/…`, `.ci/…`, `policy/src/…`, …); a trailing `:LINE` is dropped.
//!
//! Not repository paths, so never checked: anything under the user's home or autotool's
//! (`~/.autotool/…`, `$AUTOTOOL_HOME/…`), examples with a placeholder or a glob (`tools/<name>/…`,
//! `tests/suite/*.rs`, `…`), commands (a span with a space), Rust paths (`autotool::agent`).
//! A `{a,b}` group is expanded, each alternative checked.
//!
//! A path is found when it exists relative to the repository root or to the directory of the
//! doc naming it (a crate README names its own `tests/…`; `docs/x.md` links `y.md`).
//! The checker is tested first on made-up text, so it is known to catch a path that does not
//! exist and to leave the home-directory and example paths alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The repository's top-level directories: a backticked path starting with one of these is a
/// repository path.
const TOP: &[&str] = &[
    "supervisor",
    "launcher",
    "policy",
    "tests",
    "integration",
    "bench",
    "python",
    "docs",
    ".ci",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Expands the first `{a,b,…}` group of `path`, recursively.
fn expand(path: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (path.find('{'), path.find('}')) else {
        return vec![path.to_owned()];
    };
    if close < open {
        return vec![path.to_owned()];
    }
    let (head, tail) = (&path[..open], &path[close + 1..]);
    path[open + 1..close]
        .split(',')
        .flat_map(|alt| expand(&format!("{head}{alt}{tail}")))
        .collect()
}

/// Whether `s` is an example rather than a path of this checkout.
fn is_example(s: &str) -> bool {
    s.starts_with('~')
        || s.starts_with('$')
        || s.starts_with('/')
        || s.contains(['<', '>', '*', '?', '…'])
        || s.contains("...")
}

/// The repository paths `text` names, in order, each `{…}` group expanded.
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Link targets.
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split('#').next().unwrap_or("").trim();
            rest = &rest[end..];
            if target.is_empty()
                || target.contains(':')
                || target.contains(char::is_whitespace)
                || is_example(target)
            {
                continue;
            }
            out.extend(expand(target));
        }
        // Backticked spans: odd pieces of a split on '`'.
        for (n, span) in line.split('`').enumerate() {
            if n % 2 == 0 || span.contains(char::is_whitespace) || !span.contains('/') {
                continue;
            }
            let span = match span.rsplit_once(':') {
                Some((p, l)) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => p,
                _ => span,
            };
            let first = span.split('/').next().unwrap_or("");
            if !TOP.contains(&first) || is_example(span) || span.contains("://") {
                continue;
            }
            out.extend(expand(span));
        }
    }
    out
}

/// The paths `text` (a doc in `doc_dir`) names that exist neither under `root` nor `doc_dir`.
fn missing(root: &Path, doc_dir: &Path, text: &str) -> Vec<String> {
    named_paths(text)
        .into_iter()
        .filter(|p| !root.join(p).exists() && !doc_dir.join(p).exists())
        .collect()
}

fn docs(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(path);
        }
    }
    for top in TOP {
        let readme = root.join(top).join("README.md");
        if readme.exists() {
            docs.push(readme);
        }
    }
    docs.sort();
    docs
}

#[test]
fn the_checker_catches_a_made_up_path_and_leaves_examples_alone() {
    let root = repo_root();
    let text = "\
Code: `supervisor/src/agent/provider.rs` and `supervisor/src/lib.rs:12`, see [keys](keys.md)
and [nowhere](no-such-page.md#top), `policy/src/{names,nonames}.rs`.
Not paths: `~/.autotool/.env`, `$AUTOTOOL_HOME/tools/x`, `tools/<name>/tool.py`,
`tests/suite/*.rs`, `cargo test -p autotool --test docs`, `autotool::agent::Provider`,
[site](https://example.com/a/b), [here](#which-api), `https://x.y/supervisor/`.
```
supervisor/src/in/a/fence.rs
```
";
    assert_eq!(
        named_paths(text),
        [
            "keys.md",
            "supervisor/src/agent/provider.rs",
            "supervisor/src/lib.rs",
            "no-such-page.md",
            "policy/src/names.rs",
            "policy/src/nonames.rs",
        ]
    );
    assert_eq!(
        missing(&root, &root.join("docs"), text),
        [
            "supervisor/src/agent/provider.rs",
            "no-such-page.md",
            "policy/src/nonames.rs"
        ]
    );
}

#[test]
fn every_repository_path_a_doc_names_exists() {
    let root = repo_root();
    let docs = docs(&root);
    assert!(docs.len() > 10, "found only {} docs", docs.len());
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        checked += named_paths(&text).len();
        for path in missing(&root, doc.parent().unwrap(), &text) {
            let name = doc.strip_prefix(&root).unwrap().display();
            problems.push(format!("{name}: `{path}` does not exist"));
        }
    }
    assert!(checked > 50, "only {checked} paths named in all the docs");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_doc_cites_a_design_section_outside_the_repository() {
    let root = repo_root();
    let mut problems = Vec::new();
    for doc in docs(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("DESIGN §") {
                let name = doc.strip_prefix(&root).unwrap().display();
                problems.push(format!("{name}:{}: {line}", n + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
