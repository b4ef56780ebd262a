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
//!
//! Layout: `store` (sources, listing, get, add, remove), `keychain` (the OS keychain and its
//! test twin), `env` (which variables count as keys), `allowlists` (where a key may be
//! sent), `files` (the lock, the index, the credentials file, atomic writes); names, values,
//! [`Source`], [`Secret`] and [`CredError`] here.

mod allowlists;
mod env;
mod files;
mod keychain;
mod store;

pub use env::EnvSource;
pub use keychain::{Keychain, KeychainError, MemoryKeychain, OsKeychain};
pub use store::{Added, KeyInfo, KeyStore, Removed, Stamp, Target};

use crate::home::HomeError;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;

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
// Names and values

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
