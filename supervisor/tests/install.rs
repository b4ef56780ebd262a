//! What a newcomer meets first: `autotool --version` names the commit the binary was built
//! from, and every install line in the README and the docs asks for this project's version
//! (`autotool-mcp>=0.2`), never a bare `autotool-mcp` that PyPI answers with an unrelated 0.1.0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The floor every install line of the package carries.
const FLOOR: &str = ">=0.2";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let want = format!("autotool {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&want), "{text}");
    let commit = text[want.len()..].trim_end().strip_suffix(')').unwrap();
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "not a commit: {text}"
    );
    // Not to be taken for the unrelated `autotool-mcp` 0.1 on PyPI.
    let (major, minor) = env!("CARGO_PKG_VERSION").split_once('.').unwrap();
    let minor: u32 = minor.split('.').next().unwrap().parse().unwrap();
    assert!(major != "0" || minor >= 2, "{text}");
    // Built from a git checkout: the commit is its HEAD.
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output();
    match head {
        Ok(h) if h.status.success() => {
            let head = String::from_utf8(h.stdout).unwrap();
            assert!(
                head.trim().starts_with(commit),
                "--version says {commit}, HEAD is {head}"
            );
        }
        _ => eprintln!("no git here: only the shape of `{commit}` was checked"),
    }
}

/// Each mention of the `autotool-mcp` package in a pip, pipx, `uv tool`, `uv pip` or uvx
/// install command of `text` that lacks [`FLOOR`], as `line N: …`.
fn unfloored(text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == '`')
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            let installs = match *w {
                "install" => {
                    i >= 1
                        && (matches!(words[i - 1], "pip" | "pip3" | "pipx")
                            || (i >= 2
                                && words[i - 2] == "uv"
                                && matches!(words[i - 1], "tool" | "pip")))
                }
                "uvx" => true,
                _ => false,
            };
            if !installs {
                continue;
            }
            for arg in &words[i + 1..] {
                if arg.starts_with('#') || matches!(*arg, "&&" | ";" | "|" | "||") {
                    break;
                }
                if arg.contains("autotool-mcp") && !arg.contains(FLOOR) {
                    bad.push(format!("line {}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    bad
}

#[test]
fn the_checker_finds_a_bare_install_line() {
    for line in [
        "pip install autotool-mcp",
        "    pipx install autotool-mcp   # on PATH",
        "and `uv tool install 'autotool-mcp[models]'` adds",
        "python3 -m pip install --upgrade autotool-mcp && autotool demo",
        "uvx autotool-mcp",
        "uv pip install \"autotool-mcp==0.1.0\"",
    ] {
        assert_eq!(unfloored(line).len(), 1, "{line}");
    }
    for line in [
        "pip install 'autotool-mcp>=0.2'",
        "uv tool install 'autotool-mcp[models]>=0.2'",
        "pip install dist/autotool_mcp-*.whl",
        "`pip install` of the wheel",
        "the autotool-mcp package on PyPI",
    ] {
        assert_eq!(unfloored(line), Vec::<String>::new(), "{line}");
    }
}

#[test]
fn every_install_line_in_the_readme_and_docs_carries_the_floor() {
    let root = repo();
    let mut files = vec![root.join("README.md"), root.join("python/README.md")];
    for dir in [
        "docs",
        "integration",
        "supervisor",
        "launcher",
        "policy",
        "tests",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    let mut bad = Vec::new();
    let mut install_lines = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        install_lines += text
            .lines()
            .filter(|l| l.contains("install") && l.contains(&format!("autotool-mcp{FLOOR}")))
            .count();
        for b in unfloored(&text) {
            bad.push(format!("{}: {b}", f.strip_prefix(&root).unwrap().display()));
        }
    }
    assert!(
        bad.is_empty(),
        "install lines without {FLOOR}:\n{}",
        bad.join("\n")
    );
    // The README's quick start installs with the floor (so the scan above saw real lines).
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("pip install 'autotool-mcp{FLOOR}'")),
        "the README's install line"
    );
    assert!(
        install_lines >= 4,
        "only {install_lines} floored install lines found"
    );
}
