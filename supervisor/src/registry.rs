//! The registry: the tools directory (`$AUTOTOOL_HOME/tools`) together with the ledger, kept
//! in step.
//!
//! A tool enters in three steps: [`Registry::stage`] writes the code to a private staging
//! directory, the verifier checks it there, then [`Registry::commit`] makes it a version (or
//! [`Registry::discard`] drops it). On disk:
//!
//! ```text
//! tools/<name>/<version>/tool.py        the code, 0644
//! tools/<name>/<version>/manifest.json  name, version, description, required_env,
//!                                       functions (input/output schemas), code_hash, pin,
//!                                       created_at
//! tools/<name>/.staging-XXXXXX/         a create in progress (flock held by its process)
//! tools/<name>/.orphan-<version>-<ms>/  a version directory whose commit never completed
//! tools/<name>/tool.py                  a file a user placed by hand ([`Registry::hand_placed`])
//! ```
//!
//! # Crash consistency
//! [`Registry::commit`] does all of its work inside one `BEGIN IMMEDIATE` transaction: it takes
//! the ledger's write lock, picks the next version number, writes and fsyncs `manifest.json`,
//! renames the staging directory to `<version>/` and fsyncs the tool's directory, inserts the
//! rows, bumps the generation, and commits. A process killed at any point leaves either the old
//! state (no row; at most a staging directory or a version directory without a row) or the new
//! one (row and directory both there). A row never exists without its directory. The leftovers
//! are dealt with, under the write lock so an in-flight commit of another process is never
//! mistaken for one, by [`Registry::recover`] (run by [`Registry::open`]) and by the next
//! commit of the same name:
//! - a `.staging-*` directory that no live process holds locked and that is older than
//!   [`STALE_STAGING_AGE`] is **deleted** (it is only a copy of code whose create never
//!   finished);
//! - a `<version>/` directory without a row is **moved aside** to `.orphan-<version>-<ms>/`
//!   and kept, so the number can be used again and nothing a user might want is destroyed.
//!
//! Secret values never reach the registry: manifests and the ledger hold key names only.
//!
//! Every method blocks briefly (SQLite, fsync; up to the ledger's 5 s busy timeout when another
//! process holds the write lock): from async code, call it through `spawn_blocking`.
//! [`Registry`] and [`Staged`] are `Send + Sync`; share one registry per process in an `Arc`.

mod placed;

use crate::home::{self, Home, HomeError, TOOL_DIR_MODE, TOOL_FILE_MODE};
use crate::ledger::{
    self, CallRecord, CallRow, EventRow, Ledger, LedgerError, State, ToolRow, ToolStats,
};
pub use crate::version::{FunctionSpec, Functions, StoredFunction, TOOL_FILE, Version, code_hash};
use autotool_policy::names::{FunctionName, KeyName, NameError, ToolName};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The largest `tool.py` accepted unless the `max_code_bytes` setting says otherwise
/// ([`Registry::with_code_limit`]), in bytes.
pub const DEFAULT_CODE_LIMIT: usize = 256 * 1024;

/// The most `max_code_bytes` may be set to.
pub const MAX_CODE_LIMIT: usize = crate::pin::READ_BOUND;

/// A staging directory this old, and not locked by a live process, is a leftover.
pub const STALE_STAGING_AGE: Duration = Duration::from_secs(60);

/// The file name of a version's manifest.
pub const MANIFEST_FILE: &str = "manifest.json";

const STAGING_PREFIX: &str = ".staging-";
const ORPHAN_PREFIX: &str = ".orphan-";

/// What went wrong, in words a user or an agent can act on.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error(
        "the tool code is {size} bytes; autotool accepts at most {limit} bytes per tool (the \
         `max_code_bytes` setting): keep one tool to one purpose"
    )]
    CodeTooLarge { size: u64, limit: usize },
    #[error("{0:?} is not UTF-8 text; a tool is a Python source file")]
    NotText(PathBuf),
    #[error(
        "{path:?} changed after it was staged (sha256 was {staged}, is now {now}); stage and \
         verify it again"
    )]
    CodeChanged {
        path: PathBuf,
        staged: String,
        now: String,
    },
    #[error("there is no tool named {0:?}; `autotool tools list` shows the tools there are")]
    NotFound(String),
    #[error("{what} {path:?}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Home(#[from] HomeError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    PinHeld(#[from] ledger::PinHeld),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RegistryError + 'a {
    move |source| RegistryError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// What verification learned about a staged tool; [`Registry::commit`] adds the name, version,
/// code hash and time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub description: String,
    /// Key names from `REQUIRED_ENV`. Names only, never values.
    pub required_env: Vec<KeyName>,
    pub functions: Vec<FunctionSpec>,
    /// The packages from `REQUIRED_PACKAGES`, resolved and locked with hashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<crate::packages::PackageSet>,
    /// Mounted names from `USES`: the other tools' functions it calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uses: Vec<String>,
    /// What it declares it reaches (`REQUIRED_HOSTS`, `READ_DIRS`, `WRITE_DIRS`).
    #[serde(default)]
    pub reach: autotool_policy::reach::DeclaredReach,
}

/// `manifest.json`, as written next to `tool.py`.
#[derive(Serialize)]
struct ManifestFile<'a> {
    name: &'a str,
    version: u32,
    description: &'a str,
    required_env: &'a [KeyName],
    functions: &'a [FunctionSpec],
    #[serde(skip_serializing_if = "Option::is_none")]
    packages: Option<&'a crate::packages::PackageSet>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    uses: &'a [String],
    reach: &'a autotool_policy::reach::DeclaredReach,
    code_hash: &'a str,
    /// The code hash, description and schemas together ([`crate::pin::pin`]).
    pin: &'a str,
    created_at: String,
}

/// Code written to a staging directory, waiting for verification. Dropping it without
/// [`Registry::commit`] or [`Registry::discard`] deletes the directory.
#[derive(Debug)]
pub struct Staged {
    name: ToolName,
    dir: PathBuf,
    code_hash: String,
    /// The staging directory, opened and `flock`ed so no other process sweeps it away while
    /// it is being verified; released when this is dropped.
    _lock: File,
    /// Whether dropping this should delete `dir` (cleared once it has been renamed).
    armed: bool,
}

impl Staged {
    pub fn name(&self) -> &ToolName {
        &self.name
    }

    /// The staging directory: mount this for verification.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The staged `tool.py`.
    pub fn tool_file(&self) -> PathBuf {
        self.dir.join(TOOL_FILE)
    }

    /// sha256 of the staged code, lowercase hex.
    pub fn code_hash(&self) -> &str {
        &self.code_hash
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// What [`Registry::recover`] cleaned up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Stale staging directories deleted.
    pub removed_staging: Vec<PathBuf>,
    /// Version directories without a row, and where they were moved.
    pub moved_orphans: Vec<(PathBuf, PathBuf)>,
}

/// The tools directory and the ledger of one `$AUTOTOOL_HOME`.
#[derive(Debug)]
pub struct Registry {
    home: Home,
    ledger: Ledger,
    /// The largest code accepted, in bytes.
    code_limit: usize,
}

/// Write `bytes` to a new file at `path` with mode 0644 and fsync it.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(TOOL_FILE_MODE)
        .open(path)
        .map_err(io_err("cannot create", path))?;
    f.set_permissions(fs::Permissions::from_mode(TOOL_FILE_MODE))
        .map_err(io_err("cannot set the mode of", path))?;
    f.write_all(bytes).map_err(io_err("cannot write", path))?;
    f.sync_all().map_err(io_err("cannot sync", path))?;
    Ok(())
}

/// fsync a directory, so a rename or a new entry in it is durable.
fn sync_dir(path: &Path) -> Result<(), RegistryError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err("cannot sync", path))
}

/// Try to take the exclusive `flock` of an open directory without waiting.
fn try_lock(dir: &File) -> bool {
    rustix::fs::flock(dir, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// Read at most `limit` bytes of a file as text.
fn read_code(path: &Path, limit: usize) -> Result<String, RegistryError> {
    let f = File::open(path).map_err(io_err("cannot open", path))?;
    let mut bytes = Vec::new();
    f.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err("cannot read", path))?;
    if bytes.len() > limit {
        let size = fs::metadata(path)
            .map(|m| m.len())
            .unwrap_or(bytes.len() as u64);
        return Err(RegistryError::CodeTooLarge { size, limit });
    }
    String::from_utf8(bytes).map_err(|_| RegistryError::NotText(path.to_path_buf()))
}

/// A directory entry's name as a version number: decimal, no sign, no leading zero.
fn parse_version(name: &str) -> Option<u32> {
    if name.is_empty() || name.starts_with('0') || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

impl Registry {
    /// Open the registry of `home`: create the directories and the ledger if missing, then
    /// [`Registry::recover`] what crashed processes left behind. Recovery that cannot get the
    /// write lock in time is skipped with a warning (the next open or commit does it).
    pub fn open(home: &Home) -> Result<Registry, RegistryError> {
        home.ensure()?;
        let ledger = Ledger::open(&home.db_path())?;
        let registry = Registry {
            home: home.clone(),
            ledger,
            code_limit: DEFAULT_CODE_LIMIT,
        };
        match registry.recover() {
            Ok(r) => {
                for p in &r.removed_staging {
                    tracing::info!(dir = %p.display(), "removed an unfinished staging directory");
                }
                for (from, to) in &r.moved_orphans {
                    tracing::warn!(
                        from = %from.display(), to = %to.display(),
                        "moved aside a version directory whose commit never completed"
                    );
                }
            }
            Err(e) => tracing::warn!("registry recovery skipped: {e}"),
        }
        Ok(registry)
    }

    /// The same registry accepting code up to `limit` bytes (the `max_code_bytes` setting, at
    /// most [`MAX_CODE_LIMIT`]): the one place the size of a tool is checked.
    pub fn with_code_limit(mut self, limit: usize) -> Registry {
        self.code_limit = limit.min(MAX_CODE_LIMIT);
        self
    }

    /// The largest code accepted, in bytes.
    pub fn code_limit(&self) -> usize {
        self.code_limit
    }

    /// Refuse code larger than [`Registry::code_limit`].
    pub fn check_code_size(&self, len: usize) -> Result<(), RegistryError> {
        if len > self.code_limit {
            return Err(RegistryError::CodeTooLarge {
                size: len as u64,
                limit: self.code_limit,
            });
        }
        Ok(())
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    /// `tools/<name>/<version>/` of `v`.
    pub fn dir_of(&self, v: &Version) -> PathBuf {
        v.dir_in(&self.home.tools_dir())
    }

    /// `tools/<name>/<version>/tool.py` of `v`.
    pub fn file_of(&self, v: &Version) -> PathBuf {
        self.dir_of(v).join(TOOL_FILE)
    }

    /// The ledger, for calls, events and states beyond what the registry wraps.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn tool_dir(&self, name: &str) -> PathBuf {
        self.home.tools_dir().join(name)
    }

    /// Write `code` to a new `tools/<name>/.staging-XXXXXX/tool.py` for verification.
    pub fn stage(&self, name: &ToolName, code: &str) -> Result<Staged, RegistryError> {
        self.stage_hashed(name, code, code_hash(code.as_bytes()))
    }

    /// [`Registry::stage`] for code whose sha256 the caller already took (`hash`, of exactly
    /// `code`).
    pub fn stage_hashed(
        &self,
        name: &ToolName,
        code: &str,
        hash: String,
    ) -> Result<Staged, RegistryError> {
        self.check_code_size(code.len())?;
        let tool_dir = self.tool_dir(name.as_str());
        home::ensure_dir(&tool_dir, TOOL_DIR_MODE)?;
        let dir = tempfile::Builder::new()
            .prefix(STAGING_PREFIX)
            .rand_bytes(12)
            .tempdir_in(&tool_dir)
            .map_err(io_err("cannot create a staging directory in", &tool_dir))?
            .keep();
        // From here on `staged` owns the directory: an error below deletes it on drop.
        let lock = File::open(&dir).map_err(io_err("cannot open", &dir));
        let lock = match lock {
            Ok(l) => l,
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        // The directory was created a moment ago by this process; nobody else holds it.
        let _ = try_lock(&lock);
        let staged = Staged {
            name: name.clone(),
            dir,
            code_hash: hash,
            _lock: lock,
            armed: true,
        };
        fs::set_permissions(&staged.dir, fs::Permissions::from_mode(TOOL_DIR_MODE))
            .map_err(io_err("cannot set the mode of", &staged.dir))?;
        write_file(&staged.tool_file(), code.as_bytes())?;
        Ok(staged)
    }

    /// Stage a copy of a file (a hand-placed `tool.py`). The original stays where it is; once
    /// a version with the same code exists, [`Registry::hand_placed`] no longer lists it.
    pub fn stage_from_file(&self, name: &ToolName, path: &Path) -> Result<Staged, RegistryError> {
        let code = read_code(path, self.code_limit)?;
        self.stage(name, &code)
    }

    /// Drop a staged tool (verification failed).
    pub fn discard(&self, staged: Staged) -> Result<(), RegistryError> {
        let mut staged = staged;
        staged.armed = false;
        fs::remove_dir_all(&staged.dir).map_err(io_err("cannot remove", &staged.dir))
    }

    /// Make a verified staged tool the next version of its name and its current one, unless the
    /// user pinned the tool (checked under the write lock). See the module docs for crashes.
    pub fn commit(&self, staged: Staged, manifest: Manifest) -> Result<Version, RegistryError> {
        let mut staged = staged;
        for f in &manifest.functions {
            FunctionName::parse(&f.name)?;
        }
        let code_path = staged.tool_file();
        let now_hash = code_hash(read_code(&code_path, self.code_limit)?.as_bytes());
        if now_hash != staged.code_hash {
            return Err(RegistryError::CodeChanged {
                path: code_path,
                staged: staged.code_hash.clone(),
                now: now_hash,
            });
        }
        let name = staged.name.clone();
        let tool_dir = self.tool_dir(name.as_str());
        let created_at = ledger::now_ms();

        self.ledger.write(|tx| {
            let held = tx.held(name.as_str(), &staged.code_hash, &manifest.description)?;
            held.map_or(Ok(()), Err)?;
            let version = tx.next_version(name.as_str())?;
            let target = tool_dir.join(version.to_string());
            // Holding the write lock, nobody is mid-commit: a directory already there is a
            // leftover of a crashed commit.
            if fs::symlink_metadata(&target).is_ok() {
                move_aside(&tool_dir, &target, version)?;
            }
            let row = Version {
                name: name.clone(),
                version,
                code_hash: staged.code_hash.clone(),
                description: manifest.description.clone(),
                required_env: manifest.required_env.clone(),
                functions: Functions::new(&manifest.functions),
                packages: manifest.packages.clone().map(std::sync::Arc::new),
                uses: manifest.uses.clone(),
                reach: Some(manifest.reach.clone()),
                // Verified, not yet trusted: it becomes active after successful calls.
                state: State::Probation,
                created_at,
            };
            let pin = crate::pin::pin(&row.code_hash, &row.description, &manifest.functions);
            let file = ManifestFile {
                name: row.name.as_str(),
                version,
                description: &row.description,
                required_env: &row.required_env,
                functions: &manifest.functions,
                packages: manifest.packages.as_ref(),
                uses: &manifest.uses,
                reach: &manifest.reach,
                code_hash: &row.code_hash,
                pin: &pin,
                created_at: ledger::format_ms(created_at),
            };
            let mut json = serde_json::to_vec_pretty(&file).map_err(|e| LedgerError::Json {
                what: "manifest",
                source: e,
            })?;
            json.push(b'\n');
            let manifest_path = staged.dir.join(MANIFEST_FILE);
            // A retry after a failed commit may find the previous attempt's manifest.
            let _ = fs::remove_file(&manifest_path);
            write_file(&manifest_path, &json)?;
            sync_dir(&staged.dir)?;
            fs::rename(&staged.dir, &target)
                .map_err(io_err("cannot rename the staging directory to", &target))?;
            // The directory is the version's now; whatever happens next, recovery decides its
            // fate by whether the row made it.
            staged.armed = false;
            sync_dir(&tool_dir)?;
            tx.insert_current_version(&row)?;
            tx.bump_generation()?;
            tx.event(
                Some(name.as_str()),
                ledger::Event::Created,
                &format!("version {version}, sha256 {}", row.code_hash),
            )?;
            Ok(row)
        })
    }

    /// Every live tool's current version, sorted by name.
    pub fn current(&self) -> Result<Vec<Version>, RegistryError> {
        Ok(self.ledger.current()?)
    }

    /// [`Registry::current`], one version at a time: each is handed to `f` and dropped before
    /// the next is read, so a large library is never all parsed at once.
    pub fn current_each(&self, f: impl FnMut(Version)) -> Result<(), RegistryError> {
        Ok(self.ledger.current_each(f)?)
    }

    /// `name`'s current version, or `None` if there is no such live tool.
    pub fn get(&self, name: &str) -> Result<Option<Version>, RegistryError> {
        Ok(self.ledger.current_of(name)?)
    }

    /// One version of `name` (removed tools too).
    pub fn get_version(&self, name: &str, version: u32) -> Result<Option<Version>, RegistryError> {
        Ok(self.ledger.version(name, version)?)
    }

    /// Every version of `name`, oldest first (removed tools too: history is kept).
    pub fn versions(&self, name: &str) -> Result<Vec<Version>, RegistryError> {
        Ok(self.ledger.versions(name)?)
    }

    /// `name`'s row (current version, removal time), removed or not.
    pub fn tool(&self, name: &str) -> Result<Option<ToolRow>, RegistryError> {
        Ok(self.ledger.tool(name)?)
    }

    /// Remove `name`: it leaves [`Registry::current`] (running servers see the generation
    /// change and unmount it) and its key approvals are revoked; its versions, files, calls and
    /// events are kept. Returns false
    /// if it was already removed; [`RegistryError::NotFound`] if it never existed. Creating the
    /// name again continues its version numbers.
    pub fn remove(&self, name: &str) -> Result<bool, RegistryError> {
        self.remove_by(name, "history and files kept")
    }

    /// [`Registry::remove`], its `removed` event saying `detail` (who removed it).
    pub fn remove_by(&self, name: &str, detail: &str) -> Result<bool, RegistryError> {
        self.ledger.write(|tx| {
            if tx.tool(name)?.is_none() {
                return Err(RegistryError::NotFound(name.to_string()));
            }
            if !tx.mark_removed(name)? {
                return Ok(false);
            }
            tx.bump_generation()?;
            tx.event(Some(name), ledger::Event::Removed, detail)?;
            tx.revoke(name, None, "the tool was removed")?;
            Ok(true)
        })
    }

    /// The change counter of tools and versions; see [`Ledger::generation`].
    pub fn generation(&self) -> Result<u64, RegistryError> {
        Ok(self.ledger.generation()?)
    }

    /// Record a finished call (its error text already redacted).
    pub fn record_call(&self, call: &CallRecord) -> Result<(), RegistryError> {
        Ok(self.ledger.record_call(call)?)
    }

    /// Calls, failures and the last error of `name`, over all its versions.
    pub fn stats(&self, name: &str) -> Result<ToolStats, RegistryError> {
        Ok(self.ledger.stats(name)?)
    }

    /// The last `limit` calls of `name`, newest first.
    pub fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRow>, RegistryError> {
        Ok(self.ledger.recent_calls(name, limit)?)
    }

    /// Append an audit event (`verified`, `verification_failed`, …; see [`ledger::Event`]).
    /// `detail` must already be redacted.
    pub fn event(
        &self,
        tool: Option<&str>,
        kind: crate::ledger::Event,
        detail: &str,
    ) -> Result<(), RegistryError> {
        Ok(self.ledger.event(tool, kind, detail)?)
    }

    /// The last `limit` events of `tool` (`None`: all), newest first.
    pub fn events(&self, tool: Option<&str>, limit: u32) -> Result<Vec<EventRow>, RegistryError> {
        Ok(self.ledger.events(tool, limit)?)
    }

    /// Clean up after crashed processes (see the module docs): delete stale unlocked staging
    /// directories and move aside version directories that have no row. Runs under the
    /// ledger's write lock, so it never touches a commit in flight.
    pub fn recover(&self) -> Result<Recovery, RegistryError> {
        let dirs = self.tool_dirs()?;
        self.ledger.write(|tx| {
            let mut rec = Recovery::default();
            for (name, dir) in &dirs {
                let Ok(entries) = fs::read_dir(dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let Ok(file_name) = entry.file_name().into_string() else {
                        continue;
                    };
                    let path = entry.path();
                    if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                        continue;
                    }
                    if file_name.starts_with(STAGING_PREFIX) {
                        if stale_staging(&path) && fs::remove_dir_all(&path).is_ok() {
                            rec.removed_staging.push(path);
                        }
                    } else if let Some(version) = parse_version(&file_name)
                        && !tx.version_exists(name.as_str(), version)?
                    {
                        let to = move_aside(dir, &path, version)?;
                        rec.moved_orphans.push((path, to));
                    }
                }
            }
            if !rec.removed_staging.is_empty() || !rec.moved_orphans.is_empty() {
                tx.event(
                    None,
                    ledger::Event::Recovered,
                    &format!(
                        "removed {} unfinished staging directories, moved aside {} version \
                         directories without a ledger row",
                        rec.removed_staging.len(),
                        rec.moved_orphans.len()
                    ),
                )?;
            }
            Ok(rec)
        })
    }
}

/// Whether a staging directory is a leftover: older than [`STALE_STAGING_AGE`] and not locked
/// by a live process.
fn stale_staging(path: &Path) -> bool {
    let old = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age >= STALE_STAGING_AGE);
    // The lock, if we get it, is released when the file closes at the end of this function.
    old && File::open(path).is_ok_and(|f| try_lock(&f))
}

/// Move a version directory without a row to `.orphan-<version>-<ms>` beside it.
fn move_aside(tool_dir: &Path, path: &Path, version: u32) -> Result<PathBuf, RegistryError> {
    let mut to = tool_dir.join(format!("{ORPHAN_PREFIX}{version}-{}", ledger::now_ms()));
    let mut n = 1;
    while fs::symlink_metadata(&to).is_ok() {
        to = tool_dir.join(format!("{ORPHAN_PREFIX}{version}-{}-{n}", ledger::now_ms()));
        n += 1;
    }
    fs::rename(path, &to).map_err(io_err("cannot move aside", path))?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(parse_version("12"), Some(12));
        assert_eq!(parse_version("012"), None);
        assert_eq!(parse_version("0"), None);
        assert_eq!(parse_version("+1"), None);
        assert_eq!(parse_version(".staging-x"), None);
    }

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(
            code_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
