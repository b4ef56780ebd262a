//! What the supervisor's integration tests share: the Python runtime they run tools on, and the
//! launcher to confine with (or why confined runs are skipped here).
#![allow(dead_code)]

use autotool::tool::launcher;
use autotool::tool::process::SandboxMode;
use autotool::tool::runtime::{self, Python};
use std::path::{Path, PathBuf};

/// The test runtime: `$AUTOTOOL_TEST_RUNTIME`, default `/opt/autotool-test-runtime` (a venv with
/// `mcp` 2.3.0 and `httpx2`, made by `.ci/test`).
pub fn runtime() -> Python {
    let venv = std::env::var_os("AUTOTOOL_TEST_RUNTIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/autotool-test-runtime"));
    runtime::resolve(Some(&venv.join("bin/python3"))).unwrap_or_else(|e| {
        panic!(
            "the test runtime is missing ({e}); create it with `python3 -m venv {v} && \
             {v}/bin/pip install mcp==2.3.0 httpx2` or set AUTOTOOL_TEST_RUNTIME",
            v = venv.display()
        )
    })
}

/// The launcher to confine with, or why confined runs are skipped here.
pub fn confining_launcher() -> Result<PathBuf, String> {
    let path = std::env::var_os("AUTOTOOL_LAUNCHER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/autotool-launcher")
        });
    if !path.is_file() {
        return Err(format!(
            "no launcher at {} (build it with `cargo build -p autotool-launcher`)",
            path.display()
        ));
    }
    let missing = launcher::probe(&path).map_err(|e| e.to_string())?.missing();
    if missing.is_empty() {
        Ok(path)
    } else {
        Err(format!("this machine lacks {}", missing.join(", ")))
    }
}

/// The launcher a scenario in `mode` uses: `Some(None)` unconfined, `Some(Some(path))` confined,
/// `None` (after printing `SKIP <name> (strict): why`) where this machine cannot confine.
pub fn launcher_for(name: &str, mode: SandboxMode) -> Option<Option<PathBuf>> {
    match mode {
        SandboxMode::Strict => match confining_launcher() {
            Ok(path) => Some(Some(path)),
            Err(why) => {
                eprintln!("SKIP {name} (strict): {why}");
                None
            }
        },
        SandboxMode::Off => Some(None),
    }
}

/// The text blocks of a tool's result, joined by newlines.
pub fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            rmcp::model::ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sandbox this machine can run tools in: `strict` where it can confine (always in CI),
/// else `off`, said once.
pub fn sandbox() -> &'static str {
    match confining_launcher() {
        Ok(_) => "strict",
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "this machine cannot confine in CI: {why}"
            );
            eprintln!("note: running unconfined: {why}");
            "off"
        }
    }
}
