//! Builds the launcher's native part, the `cdylib` of `launcher/native` that a template loads to
//! confine each tool it forks, and leaves its bytes in `OUT_DIR/native.so` for the crate to
//! carry (`template::NATIVE`). The launcher binary is then the only file a machine needs.
//!
//! Cargo cannot make a crate depend on another crate's `cdylib`, and that library is built from
//! this crate, so it is built here by a second cargo, with its own target directory (beside
//! this build's, never inside its lock) and the same profile and target. That cargo builds
//! this crate again, as a dependency of the library: it finds [`NESTED`] set and carries
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set for the second cargo: the library's own build of this crate carries no library.
const NESTED: &str = "AUTOTOOL_LAUNCHER_NATIVE_BUILD";
/// The library's package and file name.
const PACKAGE: &str = "autotool-launcher-native";
const FILE: &str = "libautotool_launcher_native.so";

fn main() {
    let out = PathBuf::from(var("OUT_DIR"));
    let blob = out.join("native.so");
    println!("cargo::rerun-if-env-changed={NESTED}");
    if std::env::var_os(NESTED).is_some() {
        write(&blob, &[]);
        return;
    }
    let manifest = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().unwrap_or(&manifest).to_path_buf();
    // What the library is made of: this crate, the library's crate, the policy crate, and the
    // versions and profiles the workspace pins.
    for watched in [
        manifest.join("src"),
        manifest.join("native"),
        manifest.join("Cargo.toml"),
        manifest.join("build.rs"),
        workspace.join("policy/src"),
        workspace.join("policy/Cargo.toml"),
        workspace.join("Cargo.toml"),
        workspace.join("Cargo.lock"),
    ] {
        println!("cargo::rerun-if-changed={}", watched.display());
    }
    let target = var("TARGET");
    let release = var("PROFILE") == "release";
    let target_dir = nested_target_dir(&out);
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .args(["--locked", "-p", PACKAGE, "--lib", "--target", &target])
        .arg("--target-dir")
        .arg(&target_dir)
        .env(NESTED, "1")
        // The library's pages live in memory for as long as a template does: no debug
        // information in it (its symbols stay, for backtraces).
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .env("CARGO_PROFILE_DEV_STRIP", "debuginfo")
        // A lint run (`cargo clippy`) lints the library's crate itself; the build here is a
        // plain one.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if release {
        cargo.arg("--release");
    }
    let status = cargo
        .status()
        .unwrap_or_else(|e| panic!("running cargo to build {PACKAGE}: {e}"));
    assert!(
        status.success(),
        "building {PACKAGE} (the launcher's native part) failed ({status}); its errors are above"
    );
    let built = target_dir
        .join(&target)
        .join(if release { "release" } else { "debug" })
        .join(FILE);
    let bytes = std::fs::read(&built).unwrap_or_else(|e| panic!("reading {built:?}: {e}"));
    assert!(
        bytes.starts_with(b"\x7fELF"),
        "{built:?} is not an ELF shared library"
    );
    write(&blob, &bytes);
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo did not set {name}"))
}

/// Where the second cargo builds: beside this build's `build/` directory
/// (`<target>/<profile>/build/<package>-<hash>/out` → `<target>/<profile>/launcher-native`),
/// so every build of this crate shares it; else inside `OUT_DIR`.
fn nested_target_dir(out: &Path) -> PathBuf {
    let profile_dir = out
        .parent()
        .and_then(Path::parent)
        .filter(|build| build.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent);
    match profile_dir {
        Some(dir) => dir.join("launcher-native"),
        None => out.join("launcher-native"),
    }
}

/// Write `bytes` to `path` unless it already holds them (a rewrite would rebuild the crate).
fn write(path: &Path, bytes: &[u8]) {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {path:?}: {e}"));
}
