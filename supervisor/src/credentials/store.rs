//! The key store: every key's sources in order of precedence, listing without the keychain,
//! reading a value, adding and removing one.

use super::{CredError, EnvSource, Keychain, OsKeychain, Secret, Source, check_name, check_value};
use crate::home::Home;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

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
    pub(super) root: PathBuf,
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

    pub(super) fn lock_path(&self) -> PathBuf {
        self.root.join("keys.lock")
    }

    /// Whether the keychain can be reached, before asking the user for a value to put there.
    pub fn probe_keychain(&self) -> Result<(), CredError> {
        Ok(self.keychain.probe()?)
    }

    /// Whether a key can really be stored in the OS keychain and removed again (`doctor`):
    /// see [`super::Keychain::probe_store`].
    pub fn probe_keychain_store(&self) -> Result<(), CredError> {
        Ok(self.keychain.probe_store()?)
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
}
