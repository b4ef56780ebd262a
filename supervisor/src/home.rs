//! `$AUTOTOOL_HOME` (default `~/.autotool`): where autotool keeps everything it owns.
//!
//! ```text
//! $AUTOTOOL_HOME/            0700: nothing in here is anyone else's business
//! ├── autotool.db            the ledger (SQLite, WAL; see `ledger`)
//! ├── tools/                 0755 down to each tool's files (0644), see below
//! │   └── <name>/<version>/  tool.py + manifest.json
//! ├── runtime/               the Python environment tools run on
//! ├── logs/                  0700
//! └── .env                   autotool's own model (written by the user; see `dotenv`)
//! ```
//!
//! Tool directories and files are world-readable on purpose: when the supervisor runs as root,
//! a confined tool runs as `nobody` and must still read its own code through the read-only
//! mount the launcher gives it. The home root stays 0700, so outside the sandbox nobody else
//! reaches any of it.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The home `--home` names for this process, set once at start ([`set_override`]).
static OVERRIDE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Make `root` this process's home, as `AUTOTOOL_HOME` would (and over it): `serve --home` and
/// `connect --home`, which is how `autotool setup` registers a home other than the default
/// (an app's config cannot always carry an environment). The supervisor cannot set the
/// variable itself (`std::env::set_var` is unsafe), so [`Home::from_env`] reads this first.
/// Only the first call counts; it returns whether it was that one.
pub fn set_override(root: &Path) -> Result<bool, HomeError> {
    let root = std::path::absolute(root).map_err(|source| HomeError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    Ok(OVERRIDE.set(root).is_ok())
}

/// The home [`set_override`] set, if any.
pub fn overridden() -> Option<&'static Path> {
    OVERRIDE.get().map(PathBuf::as_path)
}

/// Mode of the home root.
pub const ROOT_MODE: u32 = 0o700;
/// Mode of `tools/`, each tool's directory and each version directory.
pub const TOOL_DIR_MODE: u32 = 0o755;
/// Mode of `tool.py` and `manifest.json`.
pub const TOOL_FILE_MODE: u32 = 0o644;
/// Mode of `logs/`.
pub const LOG_DIR_MODE: u32 = 0o700;

/// Why the home could not be found or prepared.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error(
        "neither AUTOTOOL_HOME nor HOME is set, so autotool does not know where to keep its tools; \
         set AUTOTOOL_HOME to a directory"
    )]
    NoHome,
    #[error(
        "the autotool home {path:?} is not safe to use: {why}; pick a home only you can change \
         (the default ~/.autotool, or set AUTOTOOL_HOME)"
    )]
    Unsafe { path: PathBuf, why: String },
    #[error(
        "the autotool home {path:?} is a file, not a directory; move that file away, or set \
         AUTOTOOL_HOME (or --home) to a directory (the default is ~/.autotool)"
    )]
    NotADirectory { path: PathBuf },
    #[error("cannot prepare {path:?}: {source}; check that it is a directory you may write")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The autotool home directory and the fixed places inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// The `--home` of `serve` or `connect` ([`set_override`]) if given, else `$AUTOTOOL_HOME`
    /// if set and non-empty (made absolute against the current directory), else
    /// `$HOME/.autotool`. Touches nothing on disk; see [`Home::ensure`].
    pub fn from_env() -> Result<Home, HomeError> {
        Home::from_vars(
            overridden()
                .map(Path::to_path_buf)
                .or_else(|| std::env::var_os("AUTOTOOL_HOME").map(PathBuf::from)),
            std::env::var_os("HOME").map(PathBuf::from),
        )
    }

    /// [`Home::from_env`] with the two variables given.
    pub fn from_vars(
        autotool_home: Option<PathBuf>,
        home: Option<PathBuf>,
    ) -> Result<Home, HomeError> {
        let root = match (autotool_home, home) {
            (Some(h), _) if !h.as_os_str().is_empty() => h,
            (_, Some(h)) if !h.as_os_str().is_empty() => h.join(".autotool"),
            _ => return Err(HomeError::NoHome),
        };
        let root = std::path::absolute(&root).map_err(|source| HomeError::Io {
            path: root.clone(),
            source,
        })?;
        Ok(Home { root })
    }

    /// A home at `root` exactly (tests, `--home`).
    pub fn at(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `tools/`: one directory per tool name.
    pub fn tools_dir(&self) -> PathBuf {
        self.root.join("tools")
    }

    /// `autotool.db`: the ledger.
    pub fn db_path(&self) -> PathBuf {
        self.root.join("autotool.db")
    }

    /// `runtime/`: the Python environment tools run on.
    pub fn runtime_dir(&self) -> PathBuf {
        self.root.join("runtime")
    }

    /// `layers/`: tools' installed packages, one directory per content address
    /// (`crate::packages`).
    pub fn layers_dir(&self) -> PathBuf {
        self.root.join("layers")
    }

    /// `.env`: autotool's own model settings, the only place they are read from for `serve`
    /// (a key in the host's environment is never used for autotool's own model).
    pub fn env_file(&self) -> PathBuf {
        self.root.join(".env")
    }

    /// `logs/`: the supervisor's log files.
    pub fn log_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// `logs/tools/<name>.log`: what a tool wrote to stderr, redacted and bounded (the older
    /// part in `<name>.log.1`).
    pub fn tool_log(&self, name: &str) -> PathBuf {
        self.log_dir().join("tools").join(format!("{name}.log"))
    }

    /// Create the home and its directories if missing, and set their modes: the root 0700 when
    /// autotool creates it (a directory the user pointed `AUTOTOOL_HOME` at keeps its mode, with
    /// a warning if others may write to it), `tools/` and `runtime/` 0755, `logs/` 0700. Safe
    /// to call from several processes at once.
    pub fn ensure(&self) -> Result<(), HomeError> {
        self.check_place()?;
        match fs::metadata(&self.root) {
            Ok(meta) => {
                if meta.permissions().mode() & 0o022 != 0 {
                    tracing::warn!(
                        home = %self.root.display(),
                        "the autotool home is writable by other users, who could change its \
                         tools; run `chmod 700` on it"
                    );
                }
            }
            Err(_) => ensure_dir(&self.root, ROOT_MODE)?,
        }
        ensure_dir(&self.tools_dir(), TOOL_DIR_MODE)?;
        ensure_dir(&self.runtime_dir(), TOOL_DIR_MODE)?;
        ensure_dir(&self.log_dir(), LOG_DIR_MODE)?;
        Ok(())
    }

    /// Refuse a home another user could change: one that belongs to someone else, or one below
    /// a directory others may write without the sticky bit (they could rename the home away and
    /// put their own in its place). A home under `/tmp` (sticky) is allowed once it is this
    /// user's own.
    pub fn check_place(&self) -> Result<(), HomeError> {
        self.check_kind()?;
        let unsafe_ = |u: Untrusted| HomeError::Unsafe {
            path: self.root.clone(),
            why: u.to_string(),
        };
        // The nearest directory above the home that exists: what is missing below it, autotool
        // creates (0700).
        if let Some(above) = self.root.ancestors().skip(1).find(|p| p.exists()) {
            check_container(above).map_err(unsafe_)?;
        }
        match fs::symlink_metadata(&self.root) {
            Ok(meta) => {
                let me = rustix::process::geteuid().as_raw();
                if meta.file_type().is_symlink() {
                    check_owned(&self.root).map_err(unsafe_)?;
                } else if meta.uid() != me {
                    return Err(unsafe_(Untrusted {
                        path: self.root.clone(),
                        why: format!("it belongs to uid {}, not to you (uid {me})", meta.uid()),
                    }));
                }
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    /// Refuse a home that is there but is not a directory (a file, or a link to one): every
    /// path inside it would fail with "Not a directory", which names the wrong file. A home
    /// that does not exist yet is fine (autotool creates it). Only looks.
    pub fn check_kind(&self) -> Result<(), HomeError> {
        match fs::metadata(&self.root) {
            Ok(meta) if !meta.is_dir() => Err(HomeError::NotADirectory {
                path: self.root.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// `work/` (0700): the working directories of the uv processes autotool runs, so none of
    /// them starts below a directory other users can write.
    pub fn work_dir(&self) -> PathBuf {
        self.root.join("work")
    }

    /// `cache/` (0700): uv's and pip's caches, autotool's alone (`cache/uv`, `cache/pip`).
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }
}

/// Why a path could be changed by someone other than this user (or root).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path:?} {why}")]
pub struct Untrusted {
    pub path: PathBuf,
    pub why: String,
}

/// Whether `path` and every directory above it can be changed only by this user or root: each
/// (and each symlink on the way, and the place it leads to) belongs to the effective user or
/// to root, and none is writable by group or others, except a directory with the sticky bit
/// (as `/tmp`), where others may add entries but not rename or remove this user's.
///
/// Root counts as trusted: it owns the machine (and autotool's own binary) anyway; what is
/// kept out is every other local user.
pub fn check_owned(path: &Path) -> Result<(), Untrusted> {
    check_chain(path, false)
}

/// [`check_owned`] for a directory that holds something of this user's: a sticky directory
/// others may write (as `/tmp`) is fine there too, since they cannot rename or remove what is
/// this user's in it.
pub fn check_container(dir: &Path) -> Result<(), Untrusted> {
    check_chain(dir, true)
}

fn check_chain(path: &Path, sticky_last: bool) -> Result<(), Untrusted> {
    let me = rustix::process::geteuid().as_raw();
    let absolute = std::path::absolute(path).map_err(|e| Untrusted {
        path: path.to_path_buf(),
        why: format!("cannot be located: {e}"),
    })?;
    let real = fs::canonicalize(&absolute).map_err(|e| Untrusted {
        path: path.to_path_buf(),
        why: format!("cannot be resolved: {e}"),
    })?;
    for chain in [&absolute, &real] {
        let mut at = PathBuf::new();
        for part in chain.components() {
            at.push(part);
            let meta = fs::symlink_metadata(&at).map_err(|e| Untrusted {
                path: at.clone(),
                why: format!("cannot be read: {e}"),
            })?;
            let uid = meta.uid();
            if uid != me && uid != 0 {
                return Err(Untrusted {
                    path: at.clone(),
                    why: format!("belongs to uid {uid}, neither you (uid {me}) nor root"),
                });
            }
            if meta.file_type().is_symlink() {
                continue;
            }
            let mode = meta.mode() & 0o7777;
            let sticky = meta.is_dir() && mode & 0o1000 != 0;
            let last = at == *chain && !sticky_last;
            // A sticky directory protects the entries in it, not itself as the target.
            if mode & 0o022 != 0 && (last || !sticky) {
                return Err(Untrusted {
                    path: at.clone(),
                    why: format!("is writable by other users (mode {mode:o})"),
                });
            }
        }
    }
    Ok(())
}

/// Create `path` as a directory only this user may use (0700, missing parents too), or check
/// that the one there is: owned by this user, not writable by others, and below directories
/// only this user or root can change ([`check_owned`]).
pub fn private_dir(path: &Path) -> Result<(), Untrusted> {
    let fail = |why: String| Untrusted {
        path: path.to_path_buf(),
        why,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| fail(format!("cannot be created: {e}")))?;
    let meta = fs::symlink_metadata(path).map_err(|e| fail(format!("cannot be read: {e}")))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        return Err(fail("is not a directory".into()));
    }
    if meta.uid() != me {
        return Err(fail(format!(
            "belongs to uid {}, not to you (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(|e| fail(format!("cannot be made private: {e}")))?;
    }
    check_owned(path)
}

/// Create `path` (and missing parents) and give it exactly `mode`, whatever the umask.
/// autotool's per-user cache, shared by every autotool home of the user:
/// `$XDG_CACHE_HOME/autotool` (an absolute one), else `~/.cache/autotool`; `None` without
/// either.
pub fn user_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .map(|c| c.join("autotool"))
}

pub fn ensure_dir(path: &Path, mode: u32) -> Result<(), HomeError> {
    let io_err = |source| HomeError::Io {
        path: path.to_path_buf(),
        source,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(io_err)?;
    let meta = fs::metadata(path).map_err(io_err)?;
    if meta.permissions().mode() & 0o7777 != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_err)?;
    }
    Ok(())
}

/// Write `bytes` to `path`, readable by the owner alone from the first byte: a new file (mode
/// 0600, any stale temporary removed first) written, synced and renamed over `path`.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_home_is_refused_below_a_directory_others_may_write_unless_it_is_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        // Not made yet, two levels down: the nearest existing directory is what counts.
        let home = Home::at(open.join("a/b/home"));
        let e = home.ensure().unwrap_err();
        assert!(e.to_string().contains("writable by other users"), "{e}");
        assert!(!open.join("a").exists());
        // The control: with the sticky bit, as /tmp, it is made.
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        home.ensure().unwrap();
        let mode = fs::metadata(home.root()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, ROOT_MODE);
        home.check_place().unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn a_home_that_is_a_file_is_named_as_such_not_blamed_on_a_file_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("home");
        fs::write(&file, "").unwrap();
        let home = Home::at(&file);
        for e in [home.check_kind().unwrap_err(), home.ensure().unwrap_err()] {
            let text = e.to_string();
            assert!(matches!(e, HomeError::NotADirectory { .. }), "{text}");
            assert!(text.contains("is a file, not a directory"), "{text}");
            assert!(text.contains("AUTOTOOL_HOME"), "{text}");
        }
        // A link to the file is the file; a home not made yet, or a directory, is fine.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(Home::at(&link).check_kind().is_err());
        Home::at(dir.path().join("later")).check_kind().unwrap();
        Home::at(dir.path()).check_kind().unwrap();
    }

    #[test]
    fn a_file_others_may_write_or_below_such_a_directory_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("uv.toml");
        fs::write(&file, "").unwrap();
        check_owned(&file).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check_owned(&file).is_err());
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_owned(&file).is_err());
        // A sticky directory above is fine: others cannot replace what is this user's.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        check_owned(&file).unwrap();
        // A symlink leads where it leads: the place it points to is checked too.
        let open = tempfile::tempdir().unwrap();
        fs::set_permissions(open.path(), fs::Permissions::from_mode(0o777)).unwrap();
        fs::write(open.path().join("real.toml"), "").unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(open.path().join("real.toml"), &link).unwrap();
        assert!(check_owned(&link).is_err());
    }
}
