//! What this machine signs with and whom it believes: `$AUTOTOOL_HOME/trust/`.
//!
//! ```text
//! trust/signing-key.pub          this machine's public key (PEM), 0644
//! trust/signing-key              its private half (PKCS#8), 0600: only where no OS keychain
//!                                is reachable; otherwise it is in the keychain
//! trust/publishers/NAME.pem      a publisher this machine accepts signatures of, 0644
//! ```
//!
//! The private half goes in the OS keychain under an entry of its own (not a key name a tool
//! could declare), named for this home so two homes on one machine keep two keys.

use super::TeamError;
use super::sign::{PublicKey, SigningKey};
use crate::credentials::{Keychain, OsKeychain};
use crate::home::Home;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the private half was put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlace {
    Keychain,
    File,
}

/// The trust directory of one home.
#[derive(Debug, Clone)]
pub struct Trust {
    dir: PathBuf,
    home_root: PathBuf,
    /// Whether the OS keychain may be used (off in tests, so they never touch a real one).
    use_keychain: bool,
}

/// Whether `name` is a publisher name: `[a-z0-9][a-z0-9._-]{0,62}`.
pub fn publisher_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

fn io(what: &str, path: &Path, e: std::io::Error) -> TeamError {
    TeamError::Io(format!("{what} {}: {e}", path.display()))
}

/// Write `bytes` to `path` with `mode`, through a temporary file renamed into place.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TeamError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| io("writing", &tmp, e))?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .and_then(|()| f.write_all(bytes))
        .and_then(|()| f.sync_all())
        .map_err(|e| io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io("renaming into", path, e))
}

impl Trust {
    /// The trust directory of `home`. The OS keychain is used unless
    /// `AUTOTOOL_TRUST_KEY_FILE=1` asks for the file.
    pub fn of(home: &Home) -> Trust {
        let file_only = std::env::var("AUTOTOOL_TRUST_KEY_FILE").is_ok_and(|v| v == "1");
        Trust {
            dir: home.root().join("trust"),
            home_root: home.root().to_path_buf(),
            use_keychain: !file_only,
        }
    }

    fn keychain_entry(&self) -> String {
        let h = super::client::sha256_digest(self.home_root.to_string_lossy().as_bytes());
        format!("signing-key:{}", &h[7..23])
    }

    fn private_path(&self) -> PathBuf {
        self.dir.join("signing-key")
    }

    fn public_path(&self) -> PathBuf {
        self.dir.join("signing-key.pub")
    }

    fn publishers_dir(&self) -> PathBuf {
        self.dir.join("publishers")
    }

    /// Make this machine's signing key. Refused when one exists, unless `force`.
    pub fn init(&self, force: bool) -> Result<(PublicKey, KeyPlace), TeamError> {
        if !force && self.public_path().exists() {
            return Err(TeamError::Trust(format!(
                "this machine already has a signing key ({}); `autotool trust show` prints it, \
                 `autotool trust init --force` replaces it (publishers' signatures made with the \
                 old one are no longer yours)",
                self.public_path().display()
            )));
        }
        let (pkcs8, key) = SigningKey::generate()?;
        let keychain = OsKeychain;
        let place = if self.use_keychain
            && keychain.probe().is_ok()
            && keychain.set(&self.keychain_entry(), &pkcs8).is_ok()
        {
            let _ = std::fs::remove_file(self.private_path());
            KeyPlace::Keychain
        } else {
            write_atomic(&self.private_path(), &pkcs8, 0o600)?;
            KeyPlace::File
        };
        write_atomic(&self.public_path(), key.public().to_pem().as_bytes(), 0o644)?;
        Ok((key.public(), place))
    }

    /// This machine's public key, or the hint to make one.
    pub fn public(&self) -> Result<PublicKey, TeamError> {
        match std::fs::read_to_string(self.public_path()) {
            Ok(text) => PublicKey::from_pem(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(TeamError::Trust(
                "this machine has no signing key yet; make one with `autotool trust init`".into(),
            )),
            Err(e) => Err(io("reading", &self.public_path(), e)),
        }
    }

    /// This machine's signing key.
    pub fn signing_key(&self) -> Result<SigningKey, TeamError> {
        let public = self.public()?;
        let stored = match std::fs::read(self.private_path()) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let from_keychain = if self.use_keychain {
                    OsKeychain.get(&self.keychain_entry()).ok().flatten()
                } else {
                    None
                };
                match from_keychain {
                    Some(secret) => secret.expose().to_vec(),
                    None => {
                        return Err(TeamError::Trust(
                            "this machine's signing key is not in the keychain nor in the trust \
                             directory (was the keychain reset?); make a new one with `autotool \
                             trust init --force`"
                                .into(),
                        ));
                    }
                }
            }
            Err(e) => return Err(io("reading", &self.private_path(), e)),
        };
        let key = SigningKey::from_pkcs8(&stored)?;
        if key.public() != public {
            return Err(TeamError::Trust(
                "the stored signing key does not match trust/signing-key.pub; run `autotool \
                 trust init --force`"
                    .into(),
            ));
        }
        Ok(key)
    }

    /// Accept signatures by the key in `pem` as `name`'s.
    pub fn add(&self, name: &str, pem: &str) -> Result<PublicKey, TeamError> {
        if !publisher_name_ok(name) {
            return Err(TeamError::Trust(format!(
                "{name:?} is not a publisher name: lowercase letters, digits, . _ -, at most 63"
            )));
        }
        let key = PublicKey::from_pem(pem)?;
        write_atomic(
            &self.publishers_dir().join(format!("{name}.pem")),
            key.to_pem().as_bytes(),
            0o644,
        )?;
        Ok(key)
    }

    /// Stop accepting `name`'s signatures; whether it was there.
    pub fn remove(&self, name: &str) -> Result<bool, TeamError> {
        if !publisher_name_ok(name) {
            return Ok(false);
        }
        let path = self.publishers_dir().join(format!("{name}.pem"));
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io("removing", &path, e)),
        }
    }

    /// The publishers accepted here, by name. A file that does not parse is skipped with a
    /// warning.
    pub fn publishers(&self) -> Result<Vec<(String, PublicKey)>, TeamError> {
        let dir = self.publishers_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("listing", &dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".pem"))
                .filter(|n| publisher_name_ok(n))
            else {
                continue;
            };
            match std::fs::read_to_string(&path)
                .map_err(|e| io("reading", &path, e))
                .and_then(|t| PublicKey::from_pem(&t))
            {
                Ok(key) => out.push((name.to_string(), key)),
                Err(e) => tracing::warn!("skipping the publisher {name}: {e}"),
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}
