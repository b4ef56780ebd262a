//! Records the commit this binary is built from, for `autotool --version`: `AUTOTOOL_COMMIT`
//! is the short hash of `HEAD` (`git rev-parse --short HEAD`), or `AUTOTOOL_BUILD_COMMIT` when
//! the builder sets it (a source archive built outside git), or `unknown` when neither can be
//! had: no git, or a source tree that is not this repository's checkout.
//!
//! Cargo runs this again when `HEAD` moves (a commit, a checkout) through the `rerun-if-changed`
//! lines on the git directory's `HEAD`, the branch file it names and `packed-refs` (those of
//! them that exist).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `--version` says when the commit cannot be known.
const UNKNOWN: &str = "unknown";

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn commit(manifest: &Path) -> Option<String> {
    // Only this repository's own checkout counts: a source archive unpacked inside some other
    // repository must not take that repository's commit.
    let top = PathBuf::from(git(manifest, &["rev-parse", "--show-toplevel"])?);
    let ours = top.join("supervisor").canonicalize().ok()?;
    if ours != manifest.canonicalize().ok()? {
        return None;
    }
    let resolve = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { manifest.join(p) }
    };
    // Worktrees keep HEAD in their own git directory and branches in the common one. Only
    // files that exist are watched: Cargo counts a missing one as changed on every build.
    let mut watch = Vec::new();
    if let Some(dir) = git(manifest, &["rev-parse", "--git-dir"]).map(resolve) {
        watch.push(dir.join("HEAD"));
    }
    if let Some(common) = git(manifest, &["rev-parse", "--git-common-dir"]).map(resolve) {
        watch.push(common.join("packed-refs"));
        if let Some(branch) = git(manifest, &["symbolic-ref", "-q", "HEAD"]) {
            watch.push(common.join(branch));
        }
    }
    for file in watch.iter().filter(|f| f.is_file()) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let hash = git(manifest, &["rev-parse", "--short", "HEAD"])?;
    hash.chars().all(|c| c.is_ascii_hexdigit()).then_some(hash)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AUTOTOOL_BUILD_COMMIT");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let given = std::env::var("AUTOTOOL_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty() && c.chars().all(|c| c.is_ascii_hexdigit()));
    let commit = given
        .or_else(|| commit(&manifest))
        .unwrap_or_else(|| UNKNOWN.to_string());
    println!("cargo:rustc-env=AUTOTOOL_COMMIT={commit}");
}
