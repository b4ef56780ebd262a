//! What makes `setup --remove` an undo: before setup writes an app's config, it records in the
//! autotool home (`$AUTOTOOL_HOME/setup/<app-id>.json`, owner-only: it holds the user's own
//! config) the config's path, its exact text before setup first wrote it (or that there was no
//! file, and which directories setup created for it), and the SHA-256 of the exact bytes setup
//! wrote last.
//!
//! `--remove` then puts the original back byte for byte (or deletes the file setup created,
//! and each directory it created if that is empty) when the file still holds exactly what
//! setup wrote. When the file changed since (the user or the app edited it), only the entry
//! comes out ([`super::remove`]); and where setup had pointed a user's own `autotool` entry
//! here, that entry is put back as it ran instead. The record is forgotten once it is used.
//!
//! Several setups in a row keep the first original, the user's, not setup's own output; a file
//! edited between two setups keeps that original for the entry, but is no longer put back
//! whole (`exact` false): that would undo the edit.

use super::{App, Entry, edit, served};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What setup remembers about one app's config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The config file as located when setup wrote it.
    pub config: PathBuf,
    /// Its text before setup first wrote it; `None`: there was no file.
    pub original: Option<String>,
    /// The directories setup created for a new file, deepest first.
    #[serde(default)]
    pub created_dirs: Vec<PathBuf>,
    /// SHA-256 (hex) of the bytes setup wrote last.
    pub written_sha256: String,
    /// Whether putting `original` back is still an undo (false once the file changed between
    /// two setups).
    pub exact: bool,
    /// Values `setup --import` moved into the key store: `original` holds each one's
    /// placeholder instead ([`super::moved`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved: Vec<super::moved::Moved>,
}

/// The record of `app` in `dir`.
pub fn path(dir: &Path, app: App) -> PathBuf {
    dir.join(format!("{}.json", app.id()))
}

/// The SHA-256 of `bytes`, in hex.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `app`'s record in `dir` for `config`, if there is a readable one (a record of another path,
/// kept when the app's config moved, does not count).
pub fn load(dir: &Path, app: App, config: &Path) -> Option<Record> {
    let bytes = std::fs::read(path(dir, app)).ok()?;
    let record: Record = serde_json::from_slice(&bytes).ok()?;
    (record.config == config).then_some(record)
}

/// Forget `app`'s record.
pub fn forget(dir: &Path, app: App) -> std::io::Result<()> {
    match std::fs::remove_file(path(dir, app)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The directories a write of `config` would create, deepest first.
fn missing_dirs(config: &Path) -> Vec<PathBuf> {
    config
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| std::fs::symlink_metadata(d).is_err())
        .map(Path::to_path_buf)
        .collect()
}

/// Record, before setup writes `after` over `before` (`None`: no file) in `app`'s `config`,
/// what `--remove` needs. Written owner-only in `dir` (created 0700).
pub fn remember(
    dir: &Path,
    app: App,
    config: &Path,
    before: Option<&str>,
    after: &str,
) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    let fresh = || Record {
        config: config.to_path_buf(),
        original: before.map(str::to_string),
        created_dirs: if before.is_none() {
            missing_dirs(config)
        } else {
            Vec::new()
        },
        written_sha256: sha256(after.as_bytes()),
        exact: true,
        moved: Vec::new(),
    };
    let record = match load(dir, app, config) {
        // Setup's own output is being rewritten: the original stays the user's.
        Some(old) if before.map(|b| sha256(b.as_bytes())).as_ref() == Some(&old.written_sha256) => {
            Record {
                written_sha256: sha256(after.as_bytes()),
                ..old
            }
        }
        // Edited since, and no autotool entry left in it: the user's file now, a new start.
        Some(_) if before.is_none_or(|b| served::served(app, b).is_none()) => fresh(),
        // Edited since, with the entry still in it: keep the first original for the entry,
        // but putting it back whole would undo the edit.
        Some(old) => Record {
            written_sha256: sha256(after.as_bytes()),
            exact: false,
            ..old
        },
        None => fresh(),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let bytes = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    crate::home::write_private(&path(dir, app), &bytes)
}

/// Mask the values of `moved` in `app`'s record of `config` (its original text), and list them
/// there, so `--remove` can put them back from the key store.
pub fn mask_record(
    dir: &Path,
    app: App,
    config: &Path,
    moved: &[(String, super::moved::Moved)],
) -> std::io::Result<()> {
    let Some(mut record) = load(dir, app, config) else {
        return Ok(());
    };
    record.original = record.original.map(|o| super::moved::mask(&o, moved));
    record.moved.extend(moved.iter().map(|(_, m)| m.clone()));
    let bytes = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    crate::home::write_private(&path(dir, app), &bytes)
}

/// What `--remove` makes of a record and the config's `current` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// The file is exactly what setup wrote: put `original` back (`None`: delete the file and
    /// the empty directories setup created).
    Restore { original: Option<String> },
    /// The file changed since: take the entry out as usual, except that the user's own
    /// `autotool` entry setup pointed here (`Some`) goes back to running this.
    Entry { users: Option<Entry> },
}

/// What `--remove` does with `record` for `app`, whose config now reads `current`.
pub fn decide(app: App, record: &Record, current: &str) -> Undo {
    if record.exact && sha256(current.as_bytes()) == record.written_sha256 {
        return Undo::Restore {
            original: record.original.clone(),
        };
    }
    let users = record
        .original
        .as_deref()
        .and_then(|o| served::served(app, o))
        .map(|s| Entry {
            command: s.command,
            args: s.args,
        });
    Undo::Entry { users }
}

/// `current` with the user's own entry `users` back in place of setup's (its other settings
/// as they are now), or `None` where the format cannot say it (then the entry is left).
pub fn put_back(app: App, os: super::Os, users: &Entry, current: &str) -> Option<String> {
    // Only the apps whose existing entry setup repoints can have had one replaced.
    if matches!(app, App::ClaudeCode | App::Codex | App::Goose) {
        return None;
    }
    match edit::edit_for(app, os, users, current).ok()? {
        edit::Edit::Changed { text, .. } => Some(text),
        edit::Edit::Present { .. } => Some(current.to_string()),
    }
}

/// Delete the file setup created at `config` (a symbolic link's target stays), then each of
/// `created_dirs` that is empty.
pub fn delete_created(config: &Path, created_dirs: &[PathBuf]) -> std::io::Result<()> {
    std::fs::remove_file(config)?;
    for d in created_dirs {
        // Not empty: something else lives there now; it stays.
        if std::fs::remove_dir(d).is_err() {
            break;
        }
    }
    Ok(())
}
