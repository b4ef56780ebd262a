//! The OS keychain behind the [`Keychain`] trait: the real one through `keyring` and an
//! in-memory twin for tests, and how a `keyring` failure reads to the user.

use super::{CredError, SERVICE, Secret};
use std::collections::BTreeMap;
use std::sync::Mutex;

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
    /// Whether a key can really be stored, read back and removed (`doctor`): a reachable
    /// Secret Service whose default collection is locked answers [`Keychain::probe`] but
    /// refuses `keys add`. Uses an entry of its own, with a name no key can have, and removes
    /// it again.
    fn probe_store(&self) -> Result<(), KeychainError> {
        self.probe()?;
        let name = format!(
            "autotool-doctor-probe-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let value = b"autotool doctor: safe to delete";
        self.set(&name, value)?;
        let read = self.get(&name);
        let removed = self.delete(&name);
        match read? {
            Some(s) if s.expose() == value => {}
            _ => {
                return Err(KeychainError::Failed(
                    "a key stored there could not be read back".into(),
                ));
            }
        }
        match removed? {
            true => Ok(()),
            false => Err(KeychainError::Failed(
                "a key stored there was gone before it was removed".into(),
            )),
        }
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
    locked: bool,
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

    /// One that answers but refuses to store, as a Secret Service whose default collection is
    /// locked does.
    pub fn locked() -> MemoryKeychain {
        MemoryKeychain {
            locked: true,
            ..MemoryKeychain::default()
        }
    }

    /// The items there now.
    pub fn len(&self) -> usize {
        self.items.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        if self.locked {
            return Err(KeychainError::Locked(
                "the default collection is locked (test keychain)".to_owned(),
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storing_is_probed_not_only_reaching_and_nothing_is_left_behind() {
        let open = MemoryKeychain::new();
        assert!(open.probe_store().is_ok());
        assert!(open.is_empty(), "the probe entry was left behind");
        // A locked collection answers the plain probe but refuses to store.
        let locked = MemoryKeychain::locked();
        assert!(locked.probe().is_ok());
        assert!(matches!(
            locked.probe_store(),
            Err(KeychainError::Locked(_))
        ));
        assert!(matches!(
            MemoryKeychain::unavailable().probe_store(),
            Err(KeychainError::Unavailable(_))
        ));
    }
}
