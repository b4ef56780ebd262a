//! The environment `autotool serve` runs in, as far as keys go: which variables count as keys.

use super::{KEYS_VAR, is_valid_name, looks_like_key};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// The environment `autotool serve` runs in, as far as keys go: every variable with a valid
/// key name and a non-empty value, plus the names `AUTOTOOL_KEYS` adds. Which of them count as
/// keys is decided with the stored names in view ([`KeyStore::list`]).
#[derive(Clone, Default)]
pub struct EnvSource {
    pub(super) vars: BTreeMap<String, Vec<u8>>,
    pub(super) extra_names: BTreeSet<String>,
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
    pub(super) fn offers(&self, name: &str, known: impl Fn(&str) -> bool) -> bool {
        self.vars.contains_key(name)
            && (looks_like_key(name) || self.extra_names.contains(name) || known(name))
    }

    /// Whether `name` is set here at all (a key stored elsewhere is shadowed by it).
    pub fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }
}
