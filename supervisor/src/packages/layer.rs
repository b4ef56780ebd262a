//! Layers: the packages a runtime lacks, installed once per content address into
//! `$AUTOTOOL_HOME/layers/<address>/` (`site/` the packages, `lock.txt` what was installed,
//! `layer.json` written last: a layer without it is never used), shared by every tool whose set
//! needs the same files, and collected when no live tool's version names it.
//!
//! A build holds an exclusive `flock` on `layers/.<address>.lock` (a second process waits for
//! it and then finds the layer ready), and in `.build-<address>-*` beside the layer: fetches
//! the locked wheels as files (pip `download`), counts what they unpack to
//! ([`super::wheels`]: over the limit, nothing is unpacked), has uv install exactly those
//! files, watching the directory's size all along, makes every file world-readable (a
//! confined tool may run as another user) and renames it into place.

use super::resolve::{message, run, run_command};
use super::wheels;
use super::{Limits, PackagesError, SITE_DIR, Source, io};
use crate::tool::runtime::Python;
use crate::tool::runtime::build::Private;
use autotool_policy::packages::Lock;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The file written last into a layer.
const STAMP: &str = "layer.json";
/// The most files a layer may hold.
const MAX_FILES: u64 = 200_000;

#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    address: String,
    /// The canonical lock text installed.
    lock: String,
    python: String,
    size_bytes: u64,
    files: u64,
}

/// The content address of `lock` installed for `python`: what the layer's files are decided
/// by (the locked files, the interpreter's version and the machine's architecture).
pub(super) fn address(python: &Python, lock: &Lock) -> String {
    let text = format!(
        "autotool-layer/1\npython {}\n{}-linux\n{}",
        python.version,
        std::env::consts::ARCH,
        lock.to_requirements()
    );
    crate::version::code_hash(text.as_bytes())
}

/// Whether the layer at `dir` is complete and holds `lock`.
pub(super) fn ready(dir: &Path, lock: &Lock) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(STAMP)) else {
        return false;
    };
    serde_json::from_str::<Stamp>(&text).is_ok_and(|s| s.lock == lock.to_requirements())
        && dir.join(SITE_DIR).is_dir()
}

/// Bytes and files under `dir`, not following links.
fn usage(dir: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            files += 1;
            bytes += meta.len();
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    (bytes, files)
}

fn check_usage(dir: &Path, limits: Limits) -> Result<(u64, u64), PackagesError> {
    let (bytes, files) = usage(dir);
    if bytes > limits.layer_bytes || files > MAX_FILES {
        return Err(PackagesError::TooLarge {
            limit_mib: limits.layer_bytes >> 20,
        });
    }
    Ok((bytes, files))
}

/// Every directory 0755 and every file world-readable (executable bits kept).
fn open_up(dir: &Path) -> std::io::Result<()> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))?;
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let meta = std::fs::symlink_metadata(e.path())?;
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                let mode = meta.permissions().mode() & 0o777;
                let open = mode | 0o444 | if mode & 0o100 != 0 { 0o011 } else { 0 };
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(open & 0o755))?;
            }
        }
    }
    Ok(())
}

/// Hold the layer's build lock, waiting at most `bound`.
async fn lock(
    layers: &Path,
    address: &str,
    bound: Duration,
) -> Result<std::fs::File, PackagesError> {
    use rustix::fs::{FlockOperation, flock};
    let path = layers.join(format!(".{address}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io("opening", &path))?;
    let t0 = Instant::now();
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
            Err(e) => return Err(io("locking", &path)(e.into())),
        }
        if t0.elapsed() > bound {
            return Err(PackagesError::Timeout {
                what: "waiting for another autotool process installing the same packages",
                secs: bound.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Install `lock` as the layer `address` in `layers`.
pub(super) async fn build(
    uv: &Path,
    python: &Python,
    layers: &Path,
    address: &str,
    lock: &Lock,
    limits: Limits,
    private: &Private,
) -> Result<(), PackagesError> {
    std::fs::create_dir_all(layers).map_err(io("creating", layers))?;
    let _held = self::lock(layers, address, limits.timeout).await?;
    let dir = layers.join(address);
    if ready(&dir, lock) {
        return Ok(());
    }
    let staging = tempfile::Builder::new()
        .prefix(&format!(".build-{address}-"))
        .tempdir_in(layers)
        .map_err(io("making a build directory in", layers))?;
    let site = staging.path().join(SITE_DIR);
    let lock_file = staging.path().join("lock.txt");
    let text = lock.to_requirements();
    std::fs::write(&lock_file, &text).map_err(io("writing", &lock_file))?;
    let source = Source::current();
    let root = staging.path().to_path_buf();
    let watch = move || check_usage(&root, limits).map(|_| ());
    // First the wheels, as files: nothing of them is unpacked yet (see `wheels`). pip's
    // temporary files and uv's cache for this build are inside the build directory, so the
    // watch sees every byte either writes.
    let fetch = staging.path().join(".fetch");
    let (wheels, tmp, cache) = (fetch.join("wheels"), fetch.join("tmp"), fetch.join("cache"));
    for d in [&wheels, &tmp, &cache] {
        std::fs::create_dir_all(d).map_err(io("creating", d))?;
    }
    let interpreter = python.interpreter.clone();
    let pip =
        tokio::task::spawn_blocking(move || crate::tool::runtime::build::pip_for(&interpreter))
            .await
            .unwrap_or_default();
    let mut download = crate::tool::runtime::build::pip_command(
        &python.interpreter,
        &pip,
        "download",
        private,
        &source,
    );
    download
        .env("TMPDIR", &tmp)
        .args([
            "--no-cache-dir",
            "--no-deps",
            "--require-hashes",
            "--quiet",
            "--dest",
        ])
        .arg(&wheels)
        .arg("-r")
        .arg(&lock_file);
    let out = run_command(
        download,
        limits.timeout,
        "fetching the packages",
        Some(&watch),
    )
    .await?;
    if !out.success {
        let said = message(&source, &out.stderr);
        return Err(PackagesError::Install(
            if said.contains("No module named pip") {
                format!(
                    "{said}\n(autotool fetches the wheels with the pip wheel the runtime's Python ships \
                 for ensurepip, and this one has none: on Debian or Ubuntu `sudo apt install \
                 python3-pip-whl`)"
                )
            } else {
                said
            },
        ));
    }
    // Then their real unpacked size, counted without writing anything; over the limit, uv
    // never sees them.
    let counted = wheels.clone();
    let layer_bytes = limits.layer_bytes;
    tokio::task::spawn_blocking(move || wheels::measure(&counted, layer_bytes, MAX_FILES))
        .await
        .map_err(|e| PackagesError::Install(e.to_string()))??;
    // Then uv installs those very files (their hashes pinned by the lock), hard-linking from
    // a cache that is removed afterwards: at most what was counted is written once.
    let mut args: Vec<std::ffi::OsString> = ["pip", "install", "--target"]
        .iter()
        .map(Into::into)
        .collect();
    args.push(site.clone().into());
    args.extend(
        [
            "--require-hashes",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--no-index",
            "--link-mode",
            "hardlink",
            "--compile-bytecode",
            "--quiet",
            "--find-links",
        ]
        .iter()
        .map(Into::into),
    );
    args.push(wheels.into());
    args.push("--python".into());
    args.push(python.interpreter.clone().into());
    args.push("-r".into());
    args.push(lock_file.into());
    args.push("--cache-dir".into());
    args.push(cache.into());
    let out = run(
        uv,
        &args,
        &source,
        private,
        limits.timeout,
        "installing the packages",
        Some(&watch),
    )
    .await?;
    if !out.success {
        return Err(PackagesError::Install(message(&source, &out.stderr)));
    }
    std::fs::remove_dir_all(&fetch).map_err(io("removing", &fetch))?;
    let (size_bytes, files) = check_usage(staging.path(), limits)?;
    open_up(staging.path()).map_err(io("opening up", staging.path()))?;
    let stamp = Stamp {
        address: address.to_string(),
        lock: text,
        python: python.version.clone(),
        size_bytes,
        files,
    };
    let stamp_path = staging.path().join(STAMP);
    let json = serde_json::to_vec_pretty(&stamp).unwrap_or_default();
    std::fs::write(&stamp_path, json).map_err(io("writing", &stamp_path))?;
    std::fs::set_permissions(&stamp_path, std::fs::Permissions::from_mode(0o644))
        .map_err(io("opening up", &stamp_path))?;
    // An incomplete layer in the way (its stamp never written) goes first.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io("removing the incomplete layer", &dir))?;
    }
    let kept = staging.keep();
    if let Err(e) = std::fs::rename(&kept, &dir) {
        let _ = std::fs::remove_dir_all(&kept);
        return Err(io("putting the layer in place at", &dir)(e));
    }
    Ok(())
}

fn age(path: &Path) -> Duration {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default()
}

/// Remove the layers `referenced` does not name that are older than `grace`, and builds that
/// nobody holds the lock of.
pub(super) fn collect(layers: &Path, referenced: &BTreeSet<String>, grace: Duration) -> usize {
    use rustix::fs::{FlockOperation, flock};
    let Ok(entries) = std::fs::read_dir(layers) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path: PathBuf = e.path();
        let address = match name.strip_prefix(".build-") {
            Some(rest) => rest.split('-').next().unwrap_or_default().to_string(),
            None if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) => name.clone(),
            None => continue,
        };
        let building = name.starts_with(".build-");
        if !building && (referenced.contains(&address) || age(&path) < grace) {
            continue;
        }
        // Never under a build in progress.
        let lock_path = layers.join(format!(".{address}.lock"));
        let Ok(file) = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
        else {
            continue;
        };
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
            if !building {
                let _ = std::fs::remove_file(&lock_path);
                tracing::info!("removed the unused package layer {address}");
            }
        }
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn collect_keeps_what_is_named_young_or_being_built() {
        let dir = tempfile::tempdir().unwrap();
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let c = "c".repeat(64);
        for n in [&a, &b, &c] {
            std::fs::create_dir_all(dir.path().join(n).join(SITE_DIR)).unwrap();
        }
        let other = dir.path().join("not-a-layer");
        std::fs::create_dir(&other).unwrap();
        let referenced = BTreeSet::from([a.clone()]);
        // Everything is young: nothing goes.
        assert_eq!(
            collect(dir.path(), &referenced, Duration::from_secs(3600)),
            0
        );
        // c's build lock is held: it stays.
        let held = std::fs::File::create(dir.path().join(format!(".{c}.lock"))).unwrap();
        rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
        assert_eq!(collect(dir.path(), &referenced, Duration::ZERO), 1);
        assert!(dir.path().join(&a).exists());
        assert!(!dir.path().join(&b).exists());
        assert!(dir.path().join(&c).exists());
        assert!(other.exists());
        drop(held);
        assert_eq!(collect(dir.path(), &referenced, Duration::ZERO), 1);
        assert!(!dir.path().join(&c).exists());
    }

    #[test]
    fn usage_counts_every_byte_and_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/x"), vec![0u8; 1000]).unwrap();
        std::fs::write(dir.path().join("y"), vec![0u8; 24]).unwrap();
        let (bytes, files) = usage(dir.path());
        assert_eq!(files, 3);
        assert!(bytes >= 1024, "{bytes}");
        let limits = Limits {
            layer_bytes: 1000,
            ..Limits::default()
        };
        assert!(matches!(
            check_usage(dir.path(), limits),
            Err(PackagesError::TooLarge { .. })
        ));
    }
}
