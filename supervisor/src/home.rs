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
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    /// `$AUTOTOOL_HOME` if set and non-empty (made absolute against the current directory),
    /// else `$HOME/.autotool`. Touches nothing on disk; see [`Home::ensure`].
    pub fn from_env() -> Result<Home, HomeError> {
        Home::from_vars(
            std::env::var_os("AUTOTOOL_HOME").map(PathBuf::from),
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

    /// Create the home and its directories if missing, and set their modes: the root 0700 when
    /// autotool creates it (a directory the user pointed `AUTOTOOL_HOME` at keeps its mode, with
    /// a warning if others may write to it), `tools/` and `runtime/` 0755, `logs/` 0700. Safe
    /// to call from several processes at once.
    pub fn ensure(&self) -> Result<(), HomeError> {
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
