//! What this machine signs with and whom it believes: `$AUTOTOOL_HOME/trust/`.
//!
//! ```text
//! trust/signing-key.pub          this machine's public key (PEM), 0644
//! trust/signing-key              its private half (PKCS#8), 0600: only where no OS keychain
//!                                is reachable; otherwise it is in the keychain
//! trust/publishers/NAME.pem      a publisher this machine accepts signatures of, 0644
//! trust/publishers/NAME.json     where NAME is believed (scopes) and NAME's retired keys, 0644;
//!                                absent: everywhere, none retired
//! ```
//!
//! A name holds one key. Adding another key under a name that has one is refused: replacing a
//! publisher's key is its own step ([`Trust::replace`]), which shows both fingerprints and
//! keeps the old key *retired*: it still verifies the digests this machine had already pulled
//! signed by it, and nothing else. One key is never trusted under two names, so the name a
//! signature verifies under is who published it.
//!
//! The private half goes in the OS keychain under an entry of its own (not a key name a tool
//! could declare), named for this home so two homes on one machine keep two keys.

use super::TeamError;
use super::reference::Reference;
use super::sign::{PublicKey, SigningKey};
use crate::credentials::{Keychain, OsKeychain};
use crate::home::Home;
use serde::{Deserialize, Serialize};
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

/// Where a publisher is believed: a whole registry (`oci://HOST[:PORT]`), or a repository and
/// the repositories under it (`oci://HOST[:PORT]/team` covers `team` and `team/tools`, not
/// `team-b`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    registry: String,
    repository: Option<String>,
}

impl Scope {
    /// Parse `oci://HOST[:PORT]` or `oci://HOST[:PORT]/REPO` (no tag, no digest).
    pub fn parse(given: &str) -> Result<Scope, TeamError> {
        let bad = |why: String| {
            TeamError::Trust(format!(
                "{given:?} is not a scope ({why}); write oci://HOST[:PORT] for a registry or \
                 oci://HOST[:PORT]/REPO for a repository and those under it"
            ))
        };
        let rest = given
            .strip_prefix("oci://")
            .ok_or_else(|| bad("it must start with oci://".into()))?
            .trim_end_matches('/');
        let reference = if rest.contains('/') {
            Reference::parse(&format!("oci://{rest}"))
        } else {
            Reference::parse(&format!("oci://{rest}/x"))
        }
        .map_err(|e| bad(e.to_string()))?;
        if reference.tag.is_some() || reference.digest.is_some() {
            return Err(bad("a scope names no tag or digest".into()));
        }
        Ok(Scope {
            registry: reference.registry,
            repository: rest.contains('/').then_some(reference.repository),
        })
    }

    /// Whether `reference` is inside this scope.
    pub fn covers(&self, reference: &Reference) -> bool {
        reference.registry == self.registry
            && self.repository.as_ref().is_none_or(|r| {
                reference.repository == *r
                    || reference
                        .repository
                        .strip_prefix(r.as_str())
                        .is_some_and(|below| below.starts_with('/'))
            })
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.repository {
            Some(r) => write!(f, "oci://{}/{r}", self.registry),
            None => write!(f, "oci://{}", self.registry),
        }
    }
}

/// A key a publisher used before [`Trust::replace`]: it verifies only `digests`, the versions
/// this machine had pulled signed by it when it was replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredKey {
    pub pem: String,
    pub fingerprint: String,
    pub retired_at: String,
    #[serde(default)]
    pub digests: Vec<String>,
}

/// `publishers/NAME.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Extra {
    /// Where the publisher is believed; empty: every registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    retired: Vec<RetiredKey>,
}

/// A publisher this machine accepts signatures of.
#[derive(Debug, Clone)]
pub struct TrustedPublisher {
    pub name: String,
    pub key: PublicKey,
    /// Where it is believed; empty: every registry.
    pub scopes: Vec<Scope>,
    /// Its replaced keys, each with what it still verifies.
    pub retired: Vec<(PublicKey, RetiredKey)>,
}

impl TrustedPublisher {
    /// Whether its signature counts for an artifact pulled from `reference`.
    pub fn believed_at(&self, reference: &Reference) -> bool {
        self.scopes.is_empty() || self.scopes.iter().any(|s| s.covers(reference))
    }

    /// Its scopes in words: `every registry`, or the list.
    pub fn scope_text(&self) -> String {
        scope_text(&self.scopes)
    }

    /// Whether `fingerprint` is its key now or one it used before.
    pub fn holds(&self, fingerprint: &str) -> bool {
        self.key.fingerprint() == fingerprint
            || self
                .retired
                .iter()
                .any(|(_, r)| r.fingerprint == fingerprint)
    }
}

/// Scopes in words.
pub fn scope_text(scopes: &[Scope]) -> String {
    if scopes.is_empty() {
        return "every registry".into();
    }
    scopes
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What [`Trust::add`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// A publisher new here.
    New(PublicKey),
    /// The same key again, its scopes set to the ones given (these were the ones before).
    Rescoped { key: PublicKey, before: Vec<Scope> },
    /// The same key again and no scope given: nothing changed.
    Unchanged(PublicKey),
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

    fn pem_path(&self, name: &str) -> PathBuf {
        self.publishers_dir().join(format!("{name}.pem"))
    }

    fn extra_path(&self, name: &str) -> PathBuf {
        self.publishers_dir().join(format!("{name}.json"))
    }

    fn read_extra(&self, name: &str) -> Result<Extra, TeamError> {
        let path = self.extra_path(name);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                TeamError::Trust(format!(
                    "{} does not parse ({e}); fix it, or `autotool trust remove {name}` and add \
                     the publisher again",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Extra::default()),
            Err(e) => Err(io("reading", &path, e)),
        }
    }

    fn write_extra(&self, name: &str, extra: &Extra) -> Result<(), TeamError> {
        let path = self.extra_path(name);
        if extra.scopes.is_empty() && extra.retired.is_empty() {
            return match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io("removing", &path, e)),
            };
        }
        let bytes = serde_json::to_vec_pretty(extra)
            .map_err(|e| TeamError::Io(format!("writing {}: {e}", path.display())))?;
        write_atomic(&path, &bytes, 0o644)
    }

    fn check_name(name: &str) -> Result<(), TeamError> {
        if publisher_name_ok(name) {
            return Ok(());
        }
        Err(TeamError::Trust(format!(
            "{name:?} is not a publisher name: lowercase letters, digits, . _ -, at most 63"
        )))
    }

    /// The publisher other than `name` that already holds `key` (now or retired), if any.
    fn holder_of(&self, key: &PublicKey, name: &str) -> Result<Option<String>, TeamError> {
        let fingerprint = key.fingerprint();
        Ok(self
            .publishers()?
            .into_iter()
            .find(|p| p.name != name && p.holds(&fingerprint))
            .map(|p| p.name))
    }

    /// Accept signatures by the key in `pem` as `name`'s, in `scopes` (none: every registry).
    ///
    /// Refused when `name` already holds another key (replacing it is [`Trust::replace`]) or
    /// when another name holds this one. The same key again with scopes sets its scopes to
    /// those; without, it changes nothing.
    pub fn add(&self, name: &str, pem: &str, scopes: &[Scope]) -> Result<Added, TeamError> {
        Self::check_name(name)?;
        let key = PublicKey::from_pem(pem)?;
        if let Some(current) = self.publishers()?.into_iter().find(|p| p.name == name) {
            if current.key != key {
                return Err(TeamError::Trust(format!(
                    "refused: {name} is already trusted here with the key {old}; this file holds \
                     another key, {new}. Nothing was changed. If {name} really has a new key \
                     (check {new} with them, not with whoever sent the file), replace it with \
                     `autotool trust replace {name} FILE`; the old key then still verifies only \
                     what was pulled signed by it. If this is someone else, add them under \
                     another name",
                    old = current.key.fingerprint(),
                    new = key.fingerprint(),
                )));
            }
            if scopes.is_empty() || scopes == current.scopes.as_slice() {
                return Ok(Added::Unchanged(key));
            }
            let mut extra = self.read_extra(name)?;
            extra.scopes = scopes.iter().map(|s| s.to_string()).collect();
            self.write_extra(name, &extra)?;
            return Ok(Added::Rescoped {
                key,
                before: current.scopes,
            });
        }
        if let Some(other) = self.holder_of(&key, name)? {
            return Err(TeamError::Trust(format!(
                "refused: the key {} is already trusted here as {other}; one key is one \
                 publisher (`autotool trust remove {other}` first if the name was wrong)",
                key.fingerprint()
            )));
        }
        let extra = Extra {
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            retired: Vec::new(),
        };
        self.write_extra(name, &extra)?;
        write_atomic(&self.pem_path(name), key.to_pem().as_bytes(), 0o644)?;
        Ok(Added::New(key))
    }

    /// Replace `name`'s key by the one in `pem`: (old, new). The old key is kept retired: it
    /// verifies `signed_before` (the digests this machine pulled signed by it) and nothing
    /// else. Scopes stay as they were.
    pub fn replace(
        &self,
        name: &str,
        pem: &str,
        signed_before: Vec<String>,
    ) -> Result<(PublicKey, PublicKey), TeamError> {
        Self::check_name(name)?;
        let key = PublicKey::from_pem(pem)?;
        let Some(current) = self.publishers()?.into_iter().find(|p| p.name == name) else {
            return Err(TeamError::Trust(format!(
                "{name} is not a trusted publisher here, so there is no key to replace; \
                 `autotool trust add {name} FILE` adds them"
            )));
        };
        if current.key == key {
            return Err(TeamError::Trust(format!(
                "{name}'s key is already {}; nothing to replace",
                key.fingerprint()
            )));
        }
        if let Some(other) = self.holder_of(&key, name)? {
            return Err(TeamError::Trust(format!(
                "refused: the key {} is already trusted here as {other}; one key is one \
                 publisher",
                key.fingerprint()
            )));
        }
        let mut extra = self.read_extra(name)?;
        extra.retired.push(RetiredKey {
            pem: current.key.to_pem(),
            fingerprint: current.key.fingerprint(),
            retired_at: crate::ledger::format_ms(crate::ledger::now_ms()),
            digests: signed_before,
        });
        self.write_extra(name, &extra)?;
        write_atomic(&self.pem_path(name), key.to_pem().as_bytes(), 0o644)?;
        Ok((current.key, key))
    }

    /// Stop accepting `name`'s signatures (its retired keys too); whether it was there.
    pub fn remove(&self, name: &str) -> Result<bool, TeamError> {
        if !publisher_name_ok(name) {
            return Ok(false);
        }
        let _ = std::fs::remove_file(self.extra_path(name));
        let path = self.pem_path(name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io("removing", &path, e)),
        }
    }

    /// The publishers accepted here, by name. A publisher whose files do not parse is skipped
    /// with a warning (so it is not believed).
    pub fn publishers(&self) -> Result<Vec<TrustedPublisher>, TeamError> {
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
            let read = || -> Result<TrustedPublisher, TeamError> {
                let text = std::fs::read_to_string(&path).map_err(|e| io("reading", &path, e))?;
                let key = PublicKey::from_pem(&text)?;
                let extra = self.read_extra(name)?;
                let scopes = extra
                    .scopes
                    .iter()
                    .map(|s| Scope::parse(s))
                    .collect::<Result<Vec<_>, _>>()?;
                let retired = extra
                    .retired
                    .into_iter()
                    .map(|r| -> Result<_, TeamError> { Ok((PublicKey::from_pem(&r.pem)?, r)) })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(TrustedPublisher {
                    name: name.to_string(),
                    key,
                    scopes,
                    retired,
                })
            };
            match read() {
                Ok(p) => out.push(p),
                Err(e) => tracing::warn!("skipping the publisher {name}: {e}"),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key() -> PublicKey {
        SigningKey::generate().unwrap().1.public()
    }

    fn home() -> (tempfile::TempDir, Trust) {
        let dir = tempfile::tempdir().unwrap();
        let trust = Trust::of(&Home::at(dir.path()));
        (dir, trust)
    }

    #[test]
    fn a_changed_key_under_a_trusted_name_is_refused_naming_both_and_replaced_only_explicitly() {
        let (_dir, trust) = home();
        let (old, new) = (key(), key());
        assert_eq!(
            trust.add("alice", &old.to_pem(), &[]).unwrap(),
            Added::New(old.clone())
        );
        // Control: a new name is added; the same key again changes nothing.
        let bob = key();
        assert_eq!(
            trust.add("bob", &bob.to_pem(), &[]).unwrap(),
            Added::New(bob.clone())
        );
        assert_eq!(
            trust.add("alice", &old.to_pem(), &[]).unwrap(),
            Added::Unchanged(old.clone())
        );
        let e = trust
            .add("alice", &new.to_pem(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&old.fingerprint())
                && e.contains(&new.fingerprint())
                && e.contains("autotool trust replace alice"),
            "{e}"
        );
        let alice = |t: &Trust| {
            t.publishers()
                .unwrap()
                .into_iter()
                .find(|p| p.name == "alice")
                .unwrap()
        };
        assert_eq!(alice(&trust).key, old, "the refusal changed nothing");
        // One key is one publisher.
        let e = trust
            .add("carol", &bob.to_pem(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("already trusted here as bob"), "{e}");

        let before = vec![format!("sha256:{}", "a".repeat(64))];
        let (was, now) = trust
            .replace("alice", &new.to_pem(), before.clone())
            .unwrap();
        assert_eq!((was, now), (old.clone(), new.clone()));
        let a = alice(&trust);
        assert_eq!(a.key, new);
        assert_eq!(a.retired.len(), 1);
        assert_eq!(a.retired[0].0, old);
        assert_eq!(a.retired[0].1.digests, before);
        assert!(a.holds(&old.fingerprint()) && a.holds(&new.fingerprint()));
        // The retired key is alice's still: it is not added under another name.
        let e = trust
            .add("mallory", &old.to_pem(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("already trusted here as alice"), "{e}");
        let e = trust
            .replace("nobody", &key().to_pem(), Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("trust add nobody"), "{e}");
        assert!(trust.remove("alice").unwrap());
        assert!(
            trust
                .publishers()
                .unwrap()
                .iter()
                .all(|p| p.name != "alice")
        );
        assert!(!trust.extra_path("alice").exists(), "retired keys go too");
    }

    #[test]
    fn scopes_cover_their_registry_or_repository_and_nothing_beside() {
        let r = |s: &str| Reference::parse(s).unwrap();
        let registry = Scope::parse("oci://Registry.example.com:5000").unwrap();
        assert_eq!(registry.to_string(), "oci://registry.example.com:5000");
        assert!(registry.covers(&r("oci://registry.example.com:5000/any/repo:t")));
        assert!(!registry.covers(&r("oci://registry.example.com/any/repo")));
        let repo = Scope::parse("oci://registry.example.com/team/").unwrap();
        assert_eq!(repo.to_string(), "oci://registry.example.com/team");
        assert!(repo.covers(&r("oci://registry.example.com/team:v1")));
        assert!(repo.covers(&r(
            &"oci://registry.example.com/team/tools@sha256:{}".replace("{}", &"b".repeat(64))
        )));
        assert!(!repo.covers(&r("oci://registry.example.com/team-b/tools")));
        assert!(!repo.covers(&r("oci://registry.example.com/other")));
        assert!(!repo.covers(&r("oci://evil.example.com/team/tools")));
        for bad in [
            "registry.example.com",
            "oci://registry.example.com/team:v1",
            "oci://",
            "oci://a b/c",
        ] {
            assert!(Scope::parse(bad).is_err(), "{bad}");
        }

        let (_dir, trust) = home();
        let k = key();
        trust
            .add("alice", &k.to_pem(), std::slice::from_ref(&repo))
            .unwrap();
        let a = trust.publishers().unwrap().remove(0);
        assert_eq!(a.scopes, vec![repo.clone()]);
        assert!(a.believed_at(&r("oci://registry.example.com/team/tools")));
        assert!(!a.believed_at(&r("oci://elsewhere.example.com/team/tools")));
        // The same key with other scopes sets them; without, nothing changes.
        assert_eq!(
            trust
                .add("alice", &k.to_pem(), std::slice::from_ref(&registry))
                .unwrap(),
            Added::Rescoped {
                key: k.clone(),
                before: vec![repo]
            }
        );
        assert_eq!(
            trust.add("alice", &k.to_pem(), &[]).unwrap(),
            Added::Unchanged(k)
        );
        assert_eq!(trust.publishers().unwrap()[0].scopes, vec![registry]);
    }
}
