//! Credentials: the keys a tool may be given, where each comes from, and where it may be sent.
//!
//! Sources, first match wins (DESIGN §5):
//! 1. [`Source::Env`]: the environment of `autotool serve`, i.e. the host config's `env` block.
//!    A server inherits a whole environment (`PATH`, `HOME`…), so a variable counts as a key
//!    only when its name looks like one (ends in `_KEY`, `_TOKEN`, `_SECRET`, `_PASSWORD`…, see
//!    [`looks_like_key`]), is named in `AUTOTOOL_KEYS` (comma- or space-separated), or is a key
//!    also stored below or given an allowlist. `AUTOTOOL_*` variables never count.
//! 2. [`Source::Keychain`]: the OS keychain through `keyring` (Secret Service on Linux), service
//!    [`SERVICE`], user = the key's name. Values are stored as bytes.
//! 3. [`Source::File`]: `$AUTOTOOL_HOME/credentials` (0600, values base64), used only when the
//!    user opted in (`autotool keys add NAME --file`, or `AUTOTOOL_CREDENTIALS=file`); never a
//!    silent fallback. Where no keychain is reachable, the error says how to start one or opt in.
//!
//! Listing is cheap and never touches the keychain (which may be locked, or slow over D-Bus):
//! the names kept in the keychain are mirrored in `$AUTOTOOL_HOME/keychain.json` (names only),
//! so [`KeyStore::list`] reads three small files, and [`KeyStore::stamp`] tells a running server
//! in one `stat` per file whether to list again. The keychain is asked only for a value.
//!
//! Allowlists (`autotool keys allow NAME host…`) live in `$AUTOTOOL_HOME/allowlists.json`
//! (0600). Each entry is checked as the egress proxy reads it
//! ([`autotool_policy::hosts::AllowRule`]) and stored in its canonical form, so a list on disk
//! always parses.
//!
//! Every write takes `$AUTOTOOL_HOME/keys.lock` and replaces its file atomically, so concurrent
//! `autotool keys` commands and a server reading at the same time see whole files. No value is
//! ever written to a log, an error, argv or the ledger; [`Secret`] does not print its value.
//!
//! The keychain calls block (D-Bus round trips): from async code, call them in
//! `spawn_blocking`.

use crate::home::{Home, HomeError};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The keychain service name every autotool key is stored under.
pub const SERVICE: &str = "autotool";
/// `AUTOTOOL_CREDENTIALS=file` opts in to the credentials file; `keychain` (the default) never
/// uses it for new keys.
pub const CREDENTIALS_VAR: &str = "AUTOTOOL_CREDENTIALS";
/// Extra environment variable names that count as keys, comma- or space-separated.
pub const KEYS_VAR: &str = "AUTOTOOL_KEYS";
/// Mode of the credentials file, the keychain name list and the allowlists.
pub const FILE_MODE: u32 = 0o600;
/// The largest value `keys add` stores.
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// Name endings that make an environment variable a key (`GITHUB_TOKEN`, `TAVILY_API_KEY`).
const KEY_SUFFIXES: &[&str] = &[
    "KEY",
    "KEY_ID",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PAT",
    "CREDENTIALS",
];

/// Whether `name` is a valid key name: `^[A-Z][A-Z0-9_]*$`.
pub fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase())
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether an environment variable with this name is taken for a key without being named
/// anywhere else: it ends in one of `KEY`, `KEY_ID`, `APIKEY`, `TOKEN`, `SECRET`, `PASSWORD`,
/// `PASSWD`, `PAT`, `CREDENTIALS` (as a whole `_`-separated word).
pub fn looks_like_key(name: &str) -> bool {
    is_valid_name(name)
        && !name.starts_with("AUTOTOOL_")
        && KEY_SUFFIXES.iter().any(|suffix| {
            name == *suffix
                || name
                    .strip_suffix(suffix)
                    .is_some_and(|rest| rest.ends_with('_'))
        })
}

/// Where a key's value comes from; the order is the order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The environment of `autotool serve` (the host config's `env` block).
    Env,
    /// The OS keychain.
    Keychain,
    /// The opt-in credentials file.
    File,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Env => "environment",
            Source::Keychain => "keychain",
            Source::File => "file",
        })
    }
}

/// A key's value. Neither `Debug` nor anything else here prints it; [`Secret::expose`] is the
/// one way to the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(value: impl Into<Vec<u8>>) -> Secret {
        Secret(value.into())
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// So `Redactor::new(&store.known_values().0)` builds the redactor.
impl AsRef<[u8]> for Secret {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Best effort: the allocator may have copied it before, and the compiler may elide
        // this; it only shortens how long a value lingers in freed memory.
        self.0.iter_mut().for_each(|b| *b = 0);
    }
}

/// Why a key could not be read, stored, removed or limited. Never holds a value.
#[derive(Debug, thiserror::Error)]
pub enum CredError {
    #[error(
        "{0:?} is not a key name: use upper-case letters, digits and `_`, starting with a letter \
         (for example TAVILY_API_KEY)"
    )]
    InvalidName(String),
    #[error(
        "no OS keychain is reachable ({detail}). autotool keeps keys in the OS keychain (the \
         Secret Service on Linux). Start one: on a desktop, log in to a session running GNOME \
         Keyring or KWallet; on a server, run autotool inside `dbus-run-session` with \
         `gnome-keyring-daemon --unlock --components=secrets` started in it. Or opt in to a file \
         only you can read: `autotool keys add NAME --file`, or set AUTOTOOL_CREDENTIALS=file"
    )]
    KeychainUnavailable { detail: String },
    #[error(
        "the OS keychain refused access ({detail}); unlock it (for GNOME Keyring: \
         `gnome-keyring-daemon --unlock` reads the password on stdin) and try again, or opt in to \
         a file only you can read: `autotool keys add NAME --file`"
    )]
    KeychainLocked { detail: String },
    #[error("the OS keychain failed: {detail}")]
    Keychain { detail: String },
    #[error(
        "{CREDENTIALS_VAR}={0:?} is not understood: use `keychain` (the default) or `file` (keys \
         in $AUTOTOOL_HOME/credentials, mode 0600)"
    )]
    BadSetting(String),
    #[error("the value for {name} is empty; nothing was stored")]
    EmptyValue { name: String },
    #[error(
        "the value for {name} is {len} bytes; a key must be at least {min} bytes, shorter values \
         cannot be kept out of what the model sees (see `redact`)",
        min = crate::redact::MIN_SECRET_LEN
    )]
    ValueTooShort { name: String, len: usize },
    #[error("the value for {name} is {len} bytes; a key may be at most {MAX_VALUE_LEN} bytes")]
    ValueTooLong { name: String, len: usize },
    #[error(
        "{0}. Nothing was stored: give a host name or address, optionally `*.` in front or \
         `:port` after (for example api.tavily.com, *.example.com, localhost:8443)"
    )]
    BadHost(autotool_policy::hosts::RuleError),
    #[error(
        "{path:?} is damaged at line {line}: {why}; fix or remove that line (it holds no other \
         key)"
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("{path:?} is not valid JSON: {source}; fix it or remove it")]
    BadJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot {action} {path:?}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Home(#[from] HomeError),
}

// ---------------------------------------------------------------------------------------------
// The keychain

/// Why the keychain could not do something.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KeychainError {
    /// No keychain could be reached at all (no session bus, no Secret Service).
    #[error("{0}")]
    Unavailable(String),
    /// It is there but locked, or refused.
    #[error("{0}")]
    Locked(String),
    #[error("{0}")]
    Failed(String),
}

impl From<KeychainError> for CredError {
    fn from(e: KeychainError) -> CredError {
        match e {
            KeychainError::Unavailable(detail) => CredError::KeychainUnavailable { detail },
            KeychainError::Locked(detail) => CredError::KeychainLocked { detail },
            KeychainError::Failed(detail) => CredError::Keychain { detail },
        }
    }
}

/// The OS keychain, behind a trait so the store's logic is tested without one
/// ([`MemoryKeychain`]); the real one ([`OsKeychain`]) is tested end to end under
/// `dbus-run-session` with GNOME Keyring.
pub trait Keychain: Send + Sync + std::fmt::Debug {
    /// The value stored for `name`, or `None`.
    fn get(&self, name: &str) -> Result<Option<Secret>, KeychainError>;
    /// Store `value` for `name`, replacing any.
    fn set(&self, name: &str, value: &[u8]) -> Result<(), KeychainError>;
    /// Delete `name`; whether there was one.
    fn delete(&self, name: &str) -> Result<bool, KeychainError>;
    /// Whether a keychain is reachable at all, asked before a user types a value in.
    fn probe(&self) -> Result<(), KeychainError> {
        Ok(())
    }
}

/// The OS keychain through `keyring`: service [`SERVICE`], user = the key name.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsKeychain;

impl OsKeychain {
    fn entry(name: &str) -> Result<keyring::Entry, KeychainError> {
        keyring::Entry::new(SERVICE, name).map_err(keychain_error)
    }
}

impl Keychain for OsKeychain {
    fn get(&self, name: &str) -> Result<Option<Secret>, KeychainError> {
        match OsKeychain::entry(name)?.get_secret() {
            Ok(value) => Ok(Some(Secret(value))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(keychain_error(e)),
        }
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), KeychainError> {
        OsKeychain::entry(name)?
            .set_secret(value)
            .map_err(keychain_error)
    }

    fn delete(&self, name: &str) -> Result<bool, KeychainError> {
        match OsKeychain::entry(name)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(keychain_error(e)),
        }
    }

    /// Connects to the Secret Service (once per process); does not unlock anything.
    fn probe(&self) -> Result<(), KeychainError> {
        match keyring::Entry::store_status() {
            Ok(()) => Ok(()),
            Err(e) => Err(KeychainError::Unavailable(e.to_string())),
        }
    }
}

/// A `keyring` error as a [`KeychainError`], never carrying the data some variants hold.
fn keychain_error(e: keyring::Error) -> KeychainError {
    match e {
        keyring::Error::NoDefaultStore => {
            let detail = match keyring::Entry::store_status() {
                Err(cause) => format!("{cause}"),
                Ok(()) => "no credential store".to_owned(),
            };
            KeychainError::Unavailable(detail)
        }
        keyring::Error::NoStorageAccess(cause) => KeychainError::Locked(cause.to_string()),
        keyring::Error::PlatformFailure(cause) => {
            let detail = cause.to_string();
            // A session bus without a Secret Service answers "ServiceUnknown".
            if detail.contains("ServiceUnknown") || detail.contains("was not provided by any") {
                KeychainError::Unavailable(detail)
            } else {
                KeychainError::Failed(detail)
            }
        }
        keyring::Error::BadEncoding(_) | keyring::Error::BadDataFormat(..) => {
            KeychainError::Failed("the stored data is malformed".to_owned())
        }
        other => KeychainError::Failed(other.to_string()),
    }
}

/// A keychain in memory, for tests: optionally unreachable, like a headless machine.
#[derive(Debug, Default)]
pub struct MemoryKeychain {
    items: Mutex<BTreeMap<String, Vec<u8>>>,
    unavailable: bool,
}

impl MemoryKeychain {
    pub fn new() -> MemoryKeychain {
        MemoryKeychain::default()
    }

    /// One that fails every call as an unreachable Secret Service does.
    pub fn unavailable() -> MemoryKeychain {
        MemoryKeychain {
            unavailable: true,
            ..MemoryKeychain::default()
        }
    }

    fn items(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>>, KeychainError> {
        if self.unavailable {
            return Err(KeychainError::Unavailable(
                "no session bus (test keychain)".to_owned(),
            ));
        }
        Ok(self.items.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Keychain for MemoryKeychain {
    fn get(&self, name: &str) -> Result<Option<Secret>, KeychainError> {
        Ok(self.items()?.get(name).cloned().map(Secret))
    }

    fn set(&self, name: &str, value: &[u8]) -> Result<(), KeychainError> {
        self.items()?.insert(name.to_owned(), value.to_vec());
        Ok(())
    }

    fn delete(&self, name: &str) -> Result<bool, KeychainError> {
        Ok(self.items()?.remove(name).is_some())
    }

    fn probe(&self) -> Result<(), KeychainError> {
        self.items().map(drop)
    }
}

// ---------------------------------------------------------------------------------------------
// The environment

/// The environment `autotool serve` runs in, as far as keys go: every variable with a valid
/// key name and a non-empty value, plus the names `AUTOTOOL_KEYS` adds. Which of them count as
/// keys is decided with the stored names in view ([`KeyStore::list`]).
#[derive(Clone, Default)]
pub struct EnvSource {
    vars: BTreeMap<String, Vec<u8>>,
    extra_names: BTreeSet<String>,
}

/// Names only.
impl std::fmt::Debug for EnvSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvSource")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .field("extra_names", &self.extra_names)
            .finish()
    }
}

impl EnvSource {
    /// This process's environment.
    pub fn from_process() -> EnvSource {
        EnvSource::from_pairs(std::env::vars_os())
    }

    /// An environment given as pairs (tests; a server told its environment).
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> EnvSource
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let mut env = EnvSource::default();
        for (k, v) in pairs {
            let (Ok(name), value) = (k.into().into_string(), v.into().into_vec()) else {
                continue;
            };
            if name == KEYS_VAR {
                let list = String::from_utf8_lossy(&value).into_owned();
                env.extra_names.extend(
                    list.split([',', ' ', '\t', '\n'])
                        .filter(|n| is_valid_name(n))
                        .map(str::to_owned),
                );
            } else if is_valid_name(&name) && !name.starts_with("AUTOTOOL_") && !value.is_empty() {
                env.vars.insert(name, value);
            }
        }
        env
    }

    /// Whether the variable `name` counts as a key, given the names known elsewhere.
    fn offers(&self, name: &str, known: impl Fn(&str) -> bool) -> bool {
        self.vars.contains_key(name)
            && (looks_like_key(name) || self.extra_names.contains(name) || known(name))
    }

    /// Whether `name` is set here at all (a key stored elsewhere is shadowed by it).
    pub fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }
}

// ---------------------------------------------------------------------------------------------
// The store

/// One key as `keys list` and a server see it: never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyInfo {
    pub name: String,
    /// Where its value comes from; `None` for a name that has only an allowlist so far.
    pub source: Option<Source>,
    /// Other sources holding a value for it, shadowed by `source`.
    pub shadowed: Vec<Source>,
    /// Where it may be sent; `None` = anywhere (no limit).
    pub allowed_hosts: Option<Vec<String>>,
}

/// Where `keys add` puts a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Keychain,
    /// The credentials file, with the reason the user opted in (shown back to them).
    File {
        reason: &'static str,
    },
}

impl Target {
    /// `--file` wins; else `AUTOTOOL_CREDENTIALS` (`file` or `keychain`); else the keychain.
    pub fn choose(file_flag: bool, setting: Option<&str>) -> Result<Target, CredError> {
        if file_flag {
            return Ok(Target::File {
                reason: "you passed --file",
            });
        }
        match setting.map(str::trim) {
            None | Some("") => Ok(Target::Keychain),
            Some(s) if s.eq_ignore_ascii_case("keychain") => Ok(Target::Keychain),
            Some(s) if s.eq_ignore_ascii_case("file") => Ok(Target::File {
                reason: "AUTOTOOL_CREDENTIALS=file is set",
            }),
            Some(other) => Err(CredError::BadSetting(other.to_owned())),
        }
    }
}

/// What `add` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    pub stored_in: Source,
    /// Older values it removed from the other store, so none lingers unused.
    pub removed_from: Vec<Source>,
    /// A source that still wins over the new value (the environment, or a keychain entry that
    /// could not be removed), and why.
    pub shadowed_by: Option<(Source, String)>,
}

/// What `remove` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub removed_from: Vec<Source>,
    /// The name is still set in the environment given to the store.
    pub still_in_env: bool,
}

/// A cheap fingerprint of the key files (inode, size, mtime of each): when it changes, list
/// again. Files are replaced by rename, so every write changes the inode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stamp(Vec<Option<(u64, u64, i64, i64)>>);

/// The keys: environment, keychain and file, and their allowlists.
#[derive(Debug, Clone)]
pub struct KeyStore {
    root: PathBuf,
    env: Arc<EnvSource>,
    keychain: Arc<dyn Keychain>,
}

impl KeyStore {
    /// The store of `home`, this process's environment and the OS keychain.
    pub fn open(home: &Home) -> KeyStore {
        KeyStore::with_parts(home, EnvSource::from_process(), Arc::new(OsKeychain))
    }

    /// A store with the environment and keychain given (tests, a server's own environment).
    pub fn with_parts(home: &Home, env: EnvSource, keychain: Arc<dyn Keychain>) -> KeyStore {
        KeyStore {
            root: home.root().to_path_buf(),
            env: Arc::new(env),
            keychain,
        }
    }

    /// `$AUTOTOOL_HOME/credentials`: the opt-in file.
    pub fn credentials_path(&self) -> PathBuf {
        self.root.join("credentials")
    }

    /// `$AUTOTOOL_HOME/keychain.json`: the names (only) stored in the keychain.
    pub fn keychain_index_path(&self) -> PathBuf {
        self.root.join("keychain.json")
    }

    /// `$AUTOTOOL_HOME/allowlists.json`.
    pub fn allowlists_path(&self) -> PathBuf {
        self.root.join("allowlists.json")
    }

    fn lock_path(&self) -> PathBuf {
        self.root.join("keys.lock")
    }

    /// Whether the keychain can be reached, before asking the user for a value to put there.
    pub fn probe_keychain(&self) -> Result<(), CredError> {
        Ok(self.keychain.probe()?)
    }

    /// The environment this store reads.
    pub fn env(&self) -> &EnvSource {
        &self.env
    }

    /// Changes whenever a key or an allowlist is added, removed or changed on disk.
    pub fn stamp(&self) -> Stamp {
        Stamp(
            [
                self.credentials_path(),
                self.keychain_index_path(),
                self.allowlists_path(),
            ]
            .iter()
            .map(|p| {
                fs::metadata(p)
                    .ok()
                    .map(|m| (m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
            })
            .collect(),
        )
    }

    /// Every key, sorted by name: where it comes from and its allowlist. Reads three small
    /// files; never the keychain, never a value.
    pub fn list(&self) -> Result<Vec<KeyInfo>, CredError> {
        let keychain = self.read_index()?;
        let file_names: BTreeSet<String> = self.read_file()?.into_keys().collect();
        let allowlists = self.allowlists()?;
        let known: BTreeSet<String> = keychain
            .iter()
            .chain(&file_names)
            .chain(allowlists.keys())
            .cloned()
            .collect();
        let env_names = self
            .env
            .vars
            .keys()
            .filter(|n| self.env.offers(n, |n| known.contains(n)));
        let all: BTreeSet<&String> = known.iter().chain(env_names).collect();
        Ok(all
            .into_iter()
            .map(|name| {
                let mut sources = Vec::new();
                if self.env.offers(name, |n| known.contains(n)) {
                    sources.push(Source::Env);
                }
                if keychain.contains(name) {
                    sources.push(Source::Keychain);
                }
                if file_names.contains(name) {
                    sources.push(Source::File);
                }
                let mut sources = sources.into_iter();
                KeyInfo {
                    name: name.clone(),
                    source: sources.next(),
                    shadowed: sources.collect(),
                    allowed_hosts: allowlists.get(name).cloned(),
                }
            })
            .collect())
    }

    /// The value of `name` and where it came from: the environment, else the keychain (when
    /// the name is listed there), else the file.
    pub fn get(&self, name: &str) -> Result<Option<(Secret, Source)>, CredError> {
        check_name(name)?;
        let keychain = self.read_index()?;
        let file = self.read_file()?;
        let known = |n: &str| {
            keychain.contains(n)
                || file.contains_key(n)
                || self.allowlists().is_ok_and(|a| a.contains_key(n))
        };
        if self.env.offers(name, known)
            && let Some(v) = self.env.vars.get(name)
        {
            return Ok(Some((Secret(v.clone()), Source::Env)));
        }
        if keychain.contains(name)
            && let Some(v) = self.keychain.get(name)?
        {
            return Ok(Some((v, Source::Keychain)));
        }
        Ok(file.get(name).map(|v| (Secret(v.clone()), Source::File)))
    }

    /// Every value held for every listed key, shadowed ones included: what the redactor must
    /// know. A keychain that cannot be read gives an error for its keys and the rest still
    /// come back.
    pub fn known_values(&self) -> (Vec<(String, Secret)>, Vec<CredError>) {
        let mut values = Vec::new();
        let mut errors = Vec::new();
        let (keys, file) = match self.list().and_then(|k| Ok((k, self.read_file()?))) {
            Ok(x) => x,
            Err(e) => return (values, vec![e]),
        };
        for key in keys {
            let name = &key.name;
            let sources = key.source.into_iter().chain(key.shadowed.iter().copied());
            for source in sources {
                match source {
                    Source::Env => {
                        if let Some(v) = self.env.vars.get(name) {
                            values.push((name.clone(), Secret(v.clone())));
                        }
                    }
                    Source::Keychain => match self.keychain.get(name) {
                        Ok(Some(v)) => values.push((name.clone(), v)),
                        Ok(None) => {}
                        Err(e) => errors.push(e.into()),
                    },
                    Source::File => {
                        if let Some(v) = file.get(name) {
                            values.push((name.clone(), Secret(v.clone())));
                        }
                    }
                }
            }
        }
        (values, errors)
    }

    /// Store `value` for `name` in `target`, and remove any older value from the other store
    /// so none lingers unused.
    pub fn add(&self, name: &str, value: &[u8], target: Target) -> Result<Added, CredError> {
        check_name(name)?;
        check_value(name, value)?;
        let _lock = self.lock()?;
        let mut removed_from = Vec::new();
        let mut shadowed_by = None;
        let mut index = self.read_index()?;
        let mut file = self.read_file()?;
        let stored_in = match target {
            Target::Keychain => {
                self.keychain.set(name, value)?;
                if index.insert(name.to_owned()) {
                    self.write_index(&index)?;
                }
                if file.remove(name).is_some() {
                    self.write_file(&file)?;
                    removed_from.push(Source::File);
                }
                Source::Keychain
            }
            Target::File { .. } => {
                file.insert(name.to_owned(), value.to_vec());
                self.write_file(&file)?;
                if index.contains(name) {
                    match self.keychain.delete(name) {
                        Ok(_) => {
                            index.remove(name);
                            self.write_index(&index)?;
                            removed_from.push(Source::Keychain);
                        }
                        Err(e) => {
                            shadowed_by = Some((
                                Source::Keychain,
                                format!(
                                    "the older value in the keychain could not be removed ({e}) \
                                     and still wins; run `autotool keys remove {name}` where the \
                                     keychain is reachable"
                                ),
                            ))
                        }
                    }
                }
                Source::File
            }
        };
        if self.env.is_set(name) {
            shadowed_by = Some((
                Source::Env,
                format!(
                    "{name} is also set in the environment, and a value from the environment \
                     wins: `autotool serve` started with it there (the host config's `env` \
                     block) uses that one"
                ),
            ));
        }
        Ok(Added {
            stored_in,
            removed_from,
            shadowed_by,
        })
    }

    /// Remove `name` from the keychain and the file. Its allowlist stays, for when it is added
    /// again. Fails without changing anything when the keychain holds it but cannot be reached.
    pub fn remove(&self, name: &str) -> Result<Removed, CredError> {
        check_name(name)?;
        let _lock = self.lock()?;
        let mut removed_from = Vec::new();
        let mut index = self.read_index()?;
        if index.contains(name) {
            self.keychain.delete(name)?;
            index.remove(name);
            self.write_index(&index)?;
            removed_from.push(Source::Keychain);
        }
        let mut file = self.read_file()?;
        if file.remove(name).is_some() {
            self.write_file(&file)?;
            removed_from.push(Source::File);
        }
        Ok(Removed {
            removed_from,
            still_in_env: self.env.is_set(name),
        })
    }

    /// Limit where `name` may be sent to `hosts`; no hosts removes the limit. Each entry must
    /// parse as the egress proxy reads it ([`AllowRule::parse`]) and is stored in its canonical
    /// form (`API.Example.COM.` as `api.example.com`), duplicates dropped; one that does not
    /// parse refuses the whole list and nothing is stored. Returns the list as stored.
    ///
    /// [`AllowRule::parse`]: autotool_policy::hosts::AllowRule::parse
    pub fn allow(&self, name: &str, hosts: &[String]) -> Result<Vec<String>, CredError> {
        check_name(name)?;
        let mut list: Vec<String> = Vec::new();
        for host in hosts {
            let rule =
                autotool_policy::hosts::AllowRule::parse(host).map_err(CredError::BadHost)?;
            let canonical = rule.to_string();
            if !list.contains(&canonical) {
                list.push(canonical);
            }
        }
        let _lock = self.lock()?;
        let mut all = self.allowlists()?;
        if list.is_empty() {
            if all.remove(name).is_none() {
                return Ok(list);
            }
        } else {
            all.insert(name.to_owned(), list.clone());
        }
        let json = serde_json::to_vec_pretty(&all).map_err(|source| CredError::BadJson {
            path: self.allowlists_path(),
            source,
        })?;
        write_private(&self.allowlists_path(), &json)?;
        Ok(list)
    }

    /// Where `name` may be sent; `None` = no limit.
    pub fn allowlist(&self, name: &str) -> Result<Option<Vec<String>>, CredError> {
        check_name(name)?;
        Ok(self.allowlists()?.remove(name))
    }

    /// Every allowlist, by key name.
    pub fn allowlists(&self) -> Result<BTreeMap<String, Vec<String>>, CredError> {
        let path = self.allowlists_path();
        match read_optional(&path)? {
            None => Ok(BTreeMap::new()),
            Some(bytes) => {
                serde_json::from_slice(&bytes).map_err(|source| CredError::BadJson { path, source })
            }
        }
    }

    // -- files --------------------------------------------------------------------------------

    fn ensure_home(&self) -> Result<(), CredError> {
        Ok(Home::at(&self.root).ensure()?)
    }

    /// Take `keys.lock` (creating the home if need be) until the returned file is dropped.
    fn lock(&self) -> Result<fs::File, CredError> {
        self.ensure_home()?;
        let path = self.lock_path();
        let io_err = |action, source| CredError::Io {
            action,
            path: path.clone(),
            source,
        };
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(FILE_MODE)
            .open(&path)
            .map_err(|e| io_err("open", e))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io_err("lock", e.into()))?;
        Ok(file)
    }

    fn read_index(&self) -> Result<BTreeSet<String>, CredError> {
        #[derive(Deserialize)]
        struct Index {
            names: BTreeSet<String>,
        }
        let path = self.keychain_index_path();
        match read_optional(&path)? {
            None => Ok(BTreeSet::new()),
            Some(bytes) => serde_json::from_slice::<Index>(&bytes)
                .map(|i| i.names.into_iter().filter(|n| is_valid_name(n)).collect())
                .map_err(|source| CredError::BadJson { path, source }),
        }
    }

    fn write_index(&self, names: &BTreeSet<String>) -> Result<(), CredError> {
        let json = serde_json::to_vec_pretty(&serde_json::json!({
            "about": "the keys autotool keeps in the OS keychain (service `autotool`): names only",
            "names": names,
        }))
        .map_err(|source| CredError::BadJson {
            path: self.keychain_index_path(),
            source,
        })?;
        write_private(&self.keychain_index_path(), &json)
    }

    /// The credentials file: `NAME=base64(value)` lines; `#` comments and blank lines skipped.
    fn read_file(&self) -> Result<BTreeMap<String, Vec<u8>>, CredError> {
        let path = self.credentials_path();
        let Some(bytes) = read_optional(&path)? else {
            return Ok(BTreeMap::new());
        };
        let text = String::from_utf8(bytes).map_err(|_| CredError::Corrupt {
            path: path.clone(),
            line: 0,
            why: "it is not text".to_owned(),
        })?;
        let mut out = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let corrupt = |why: &str| CredError::Corrupt {
                path: path.clone(),
                line: i + 1,
                why: why.to_owned(),
            };
            let (name, b64) = line
                .split_once('=')
                .ok_or_else(|| corrupt("expected NAME=base64-value"))?;
            if !is_valid_name(name) {
                return Err(corrupt("the name is not a key name"));
            }
            let value = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| corrupt("the value is not base64"))?;
            out.insert(name.to_owned(), value);
        }
        Ok(out)
    }

    fn write_file(&self, keys: &BTreeMap<String, Vec<u8>>) -> Result<(), CredError> {
        let mut text = String::from(
            "# autotool keys, kept in this file instead of the OS keychain because you opted in\n\
             # (`autotool keys add NAME --file` or AUTOTOOL_CREDENTIALS=file). Mode 0600: only\n\
             # you (and root) can read it. One key a line: NAME=value in base64.\n",
        );
        for (name, value) in keys {
            text.push_str(name);
            text.push('=');
            text.push_str(&base64::engine::general_purpose::STANDARD.encode(value));
            text.push('\n');
        }
        write_private(&self.credentials_path(), text.as_bytes())
    }
}

pub(crate) fn check_name(name: &str) -> Result<(), CredError> {
    if is_valid_name(name) {
        Ok(())
    } else {
        Err(CredError::InvalidName(name.to_owned()))
    }
}

fn check_value(name: &str, value: &[u8]) -> Result<(), CredError> {
    let name = name.to_owned();
    match value.len() {
        0 => Err(CredError::EmptyValue { name }),
        len if len < crate::redact::MIN_SECRET_LEN => Err(CredError::ValueTooShort { name, len }),
        len if len > MAX_VALUE_LEN => Err(CredError::ValueTooLong { name, len }),
        _ => Ok(()),
    }
}

/// A host as the user may give it: printable, no spaces, no URL parts. Canonicalisation is the
/// egress proxy's.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CredError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CredError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replace `path` with `bytes` atomically, mode 0600 from the first byte on.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CredError> {
    let io_err = |action, source| CredError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    // `tempfile` creates the file 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".keys-")
        .tempfile_in(dir)
        .map_err(|e| io_err("create a file beside", e))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| io_err("set the mode of a file beside", e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| io_err("write", e))?;
    tmp.persist(path).map_err(|e| io_err("replace", e.error))?;
    Ok(())
}
