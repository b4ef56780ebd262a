//! Followed libraries: `autotool library follow oci://HOST/REPO[:TAG]` keeps a repository's tag
//! in `$AUTOTOOL_HOME/team/following.json`; `autotool serve` looks at each on an interval (the
//! `follow_interval` setting) with a conditional `HEAD` of the tag (`If-None-Match` the digest
//! seen last), and when its digest moved pulls it
//! through [`super::pull`] (signature, hostile-input checks, this machine's gate); hosts hear of
//! the new version as of any other (`list_changed`). Each round runs in its own task, every
//! request bounded in time, so a registry that is down or slow never holds up serve or a call.
//! A refused digest is tried again on a bounded backoff, or as soon as the user does what it
//! waits for ([`super::retry`]): no release is lost for good. `library status` says when each
//! was last reached, what it serves, what was refused and why, and when it is tried again. Reads
//! and writes of the file hold `team/following.lock`, so the CLI and every serve sharing the home
//! never lose each other's changes; a serve looking at a library holds
//! `team/follow-<hash>.lock`, so of the serves sharing a home one pulls a new digest and the
//! others find it pulled.

use super::TeamError;
use super::pull::PullOptions;
use super::reference::{DEFAULT_TAG, Reference};
use super::retry::Retry;
use super::trust::write_atomic;
use crate::home::Home;
use crate::library::Library;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// How long one look at one followed library may take, pull and verification included.
pub const ROUND_BOUND: Duration = Duration::from_secs(300);

/// One followed library and what the last looks found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Followed {
    /// `oci://host/repo:tag`.
    pub reference: String,
    #[serde(default)]
    pub plain_http: bool,
    pub added_at: String,
    /// When it was last looked at, and last answered.
    #[serde(default)]
    pub checked_at: Option<String>,
    #[serde(default)]
    pub reached_at: Option<String>,
    /// The digest its tag named when last reached.
    #[serde(default)]
    pub digest: Option<String>,
    /// The digest last pulled (or found already here).
    #[serde(default)]
    pub pulled: Option<String>,
    /// What the last look could not do, and why.
    #[serde(default)]
    pub problem: Option<String>,
    /// The refused digest's next try and what would cure it ([`super::retry`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

fn dir(home: &Home) -> PathBuf {
    home.root().join("team")
}

/// `$AUTOTOOL_HOME/team/NAME`, opened (made if missing) to be locked.
fn lock_file(home: &Home, name: &str) -> Result<(std::fs::File, PathBuf), TeamError> {
    let dir = dir(home);
    std::fs::create_dir_all(&dir)
        .map_err(|e| TeamError::Io(format!("creating {}: {e}", dir.display())))?;
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| TeamError::Io(format!("opening {}: {e}", path.display())))?;
    Ok((file, path))
}

/// Hold `$AUTOTOOL_HOME/team/NAME` locked (`flock`) until the returned file is dropped.
pub(super) fn lock(home: &Home, name: &str) -> Result<std::fs::File, TeamError> {
    let (file, path) = lock_file(home, name)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| TeamError::Io(format!("locking {}: {e}", path.display())))?;
    Ok(file)
}

/// [`lock`] if no one holds it now; `None` when someone does.
pub(super) fn try_lock(home: &Home, name: &str) -> Result<Option<std::fs::File>, TeamError> {
    let (file, path) = lock_file(home, name)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(TeamError::Io(format!("locking {}: {e}", path.display()))),
    }
}

/// Run `f` on the followed list under the lock; the list is written back when `f` says so.
fn with_list<T>(
    home: &Home,
    f: impl FnOnce(&mut Vec<Followed>) -> Result<(T, bool), TeamError>,
) -> Result<T, TeamError> {
    let _lock = lock(home, "following.lock")?;
    let dir = dir(home);
    let path = dir.join("following.json");
    let mut list: Vec<Followed> = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            TeamError::Io(format!(
                "{} does not parse ({e}); fix or remove it",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(TeamError::Io(format!("reading {}: {e}", path.display()))),
    };
    let (out, write) = f(&mut list)?;
    if write {
        let bytes = serde_json::to_vec_pretty(&list)
            .map_err(|e| TeamError::Io(format!("writing {}: {e}", path.display())))?;
        write_atomic(&path, &bytes, 0o644)?;
    }
    Ok(out)
}

/// `oci://host/repo:tag`, the tag `latest` when none is given; a digest is refused (a digest
/// never moves: pull it instead).
pub fn canonical(reference: &Reference) -> Result<String, TeamError> {
    if reference.digest.is_some() {
        return Err(TeamError::Reference(
            "a digest never changes, so there is nothing to follow; `autotool tools pull` it, \
             or follow a tag"
                .into(),
        ));
    }
    let tag = reference.tag.as_deref().unwrap_or(DEFAULT_TAG);
    Ok(format!(
        "oci://{}/{}:{tag}",
        reference.registry, reference.repository
    ))
}

/// Follow `reference`; whether it was new. Following it again clears what was refused, so
/// the next round tries it again.
pub fn follow(home: &Home, reference: &Reference, plain_http: bool) -> Result<bool, TeamError> {
    let canonical = canonical(reference)?;
    with_list(home, |list| {
        if let Some(f) = list.iter_mut().find(|f| f.reference == canonical) {
            f.problem = None;
            f.digest = None;
            f.retry = None;
            f.plain_http = plain_http;
            return Ok((false, true));
        }
        list.push(Followed {
            reference: canonical.clone(),
            plain_http,
            added_at: crate::ledger::format_ms(crate::ledger::now_ms()),
            checked_at: None,
            reached_at: None,
            digest: None,
            pulled: None,
            problem: None,
            retry: None,
        });
        Ok((true, true))
    })
}

/// Stop following `reference`; whether it was followed.
pub fn unfollow(home: &Home, reference: &Reference) -> Result<bool, TeamError> {
    let canonical = canonical(reference)?;
    with_list(home, |list| {
        let before = list.len();
        list.retain(|f| f.reference != canonical);
        let removed = list.len() != before;
        Ok((removed, removed))
    })
}

/// The followed libraries and what the last looks found.
pub fn status(home: &Home) -> Result<Vec<Followed>, TeamError> {
    with_list(home, |list| Ok((list.clone(), false)))
}

/// What `library follow` found when it was run: the registry reached with the credentials
/// found for it, the digest the tag names, and the serves on this home that follow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checked {
    /// `oci://host/repo:tag`.
    pub reference: String,
    /// It was followed already.
    pub already: bool,
    /// The registry answered (and accepted the credentials, when it asked for them).
    pub reached: bool,
    /// The user name of the credentials found for the registry; `None`: anonymous.
    pub credentials: Option<String>,
    /// The digest the tag names now.
    pub digest: Option<String>,
    /// What is wrong: no such tag, the registry not reached, the credentials refused.
    pub problem: Option<String>,
    /// The serves running on this home that follow libraries.
    pub serves: Vec<Serving>,
}

/// A serve running on this home, and how often it looks at the followed libraries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Serving {
    pub pid: u32,
    pub every_ms: u64,
}

/// Follow `reference` ([`follow`]), then check it: resolve its tag with the credentials found
/// for its registry, and read which serves on this home will look at it. A problem found is
/// reported, not refused: the library stays followed (a tag pushed later is pulled then).
pub async fn follow_checked(
    home: &Home,
    reference: &Reference,
    plain_http: bool,
) -> Result<Checked, TeamError> {
    let canonical = canonical(reference)?;
    let new = follow(home, reference, plain_http)?;
    let tag = reference.tag.clone().unwrap_or_else(|| DEFAULT_TAG.into());
    let mut checked = Checked {
        reference: canonical.clone(),
        already: !new,
        reached: false,
        credentials: None,
        digest: None,
        problem: None,
        serves: crate::serving::running(home)
            .into_iter()
            .filter_map(|r| {
                r.follow_every_ms.map(|every_ms| Serving {
                    pid: r.pid,
                    every_ms,
                })
            })
            .collect(),
    };
    let credentials = super::auth::credentials_for(&reference.registry);
    if let Ok(Some(c)) = &credentials {
        checked.credentials = Some(c.username.clone());
    }
    let head = async {
        let client = super::client::Client::new(reference, plain_http, credentials?, false)?;
        client.head_manifest(&tag, None).await
    };
    let answer = tokio::time::timeout(CHECK_BOUND, head).await;
    match answer {
        Ok(Ok(Some(digest))) => {
            checked.reached = true;
            checked.digest = Some(digest);
        }
        Ok(Ok(None)) => {
            checked.reached = true;
            checked.problem = Some(format!(
                "the registry has no tag {tag} in oci://{}/{} (yet): nothing is pulled until one \
                 is pushed",
                reference.registry, reference.repository
            ));
        }
        Ok(Err(e)) => checked.problem = Some(e.to_string()),
        Err(_) => {
            checked.problem = Some(format!(
                "the registry did not answer within {}s",
                CHECK_BOUND.as_secs()
            ));
        }
    }
    Ok(checked)
}

/// How long `library follow` waits for the registry.
pub const CHECK_BOUND: Duration = Duration::from_secs(30);

/// What one look found.
#[derive(Debug, Clone, Default)]
struct Look {
    reached: bool,
    digest: Option<String>,
    pulled: Option<String>,
    problem: Option<String>,
    retry: Option<Retry>,
}

/// Look at one followed library: the tag's digest, and a pull when it moved, or when the digest
/// refused last is due again ([`super::retry`]).
async fn look(library: &Library, f: &Followed) -> Look {
    let reference = match Reference::parse(&f.reference) {
        Ok(r) => r,
        Err(e) => {
            return Look {
                problem: Some(e.to_string()),
                retry: f.retry.clone(),
                ..Look::default()
            };
        }
    };
    let tag = reference.tag.clone().unwrap_or_else(|| DEFAULT_TAG.into());
    let head = async {
        let credentials = super::auth::credentials_for(&reference.registry)?;
        let client = super::client::Client::new(&reference, f.plain_http, credentials, false)?;
        client.head_manifest(&tag, f.digest.as_deref()).await
    };
    let digest = match head.await {
        Ok(Some(d)) => d,
        Ok(None) => {
            return Look {
                reached: true,
                problem: Some(format!("the registry has no tag {tag} in this repository")),
                ..Look::default()
            };
        }
        Err(e) => {
            return Look {
                problem: Some(e.to_string()),
                retry: f.retry.clone(),
                ..Look::default()
            };
        }
    };
    // The digest refused last waits for its retry (or the user's cure), unless the user has
    // pulled that digest by hand since (`--new-publisher`, `--unpin`).
    let taken_since = || {
        super::pull::origins(&library.home)
            .values()
            .any(|o| o.digest == digest)
    };
    let refused_before = f.digest.as_deref() == Some(digest.as_str()) && f.problem.is_some();
    let previous = f.retry.as_ref().filter(|_| refused_before);
    if let Some(retry) = previous
        && !retry.due(library, crate::ledger::now_ms())
        && !taken_since()
    {
        return Look {
            reached: true,
            digest: Some(digest),
            pulled: f.pulled.clone(),
            problem: f.problem.clone(),
            retry: Some(retry.clone()),
        };
    }
    if f.pulled.as_deref() == Some(digest.as_str()) {
        return Look {
            reached: true,
            digest: Some(digest.clone()),
            pulled: Some(digest),
            ..Look::default()
        };
    }
    let pinned = Reference {
        digest: Some(digest.clone()),
        tag: None,
        ..reference
    };
    // Never a new publisher by itself: the refusal names the `tools pull` that takes one.
    let options = PullOptions {
        plain_http: f.plain_http,
        allow_unsigned: false,
        unpin: false,
        new_publisher: false,
    };
    // Pulled by the digest just seen, so a tag moved meanwhile is not taken unseen; recorded
    // as not pinned (following moves with the tag).
    match super::pull::pull_followed(library, &pinned, &f.reference, options).await {
        Ok(_) => Look {
            reached: true,
            digest: Some(digest.clone()),
            pulled: Some(digest),
            ..Look::default()
        },
        Err(e) => {
            let (lasting, cure) = super::retry::classify(library, &e);
            let retry = Retry::after(
                previous,
                lasting,
                cure,
                library.settings.follow_interval,
                crate::ledger::now_ms(),
            );
            Look {
                reached: true,
                digest: Some(digest),
                pulled: f.pulled.clone(),
                problem: Some(library.secrets().redact(&e.to_string())),
                retry: Some(retry),
            }
        }
    }
}

/// The lock one serve holds while it looks at `reference`, so that of the serves sharing a
/// home one pulls a new digest and the others find it pulled.
fn looking_lock(reference: &str) -> String {
    let hash = super::client::sha256_digest(reference.as_bytes());
    format!("follow-{}.lock", &hash["sha256:".len()..][..16])
}

/// One round over every followed library (each bounded by [`ROUND_BOUND`]). Returns how many
/// were looked at. A library another serve on this home is looking at is left to it: that
/// serve's result is what this one reads next round.
pub async fn round(library: &Library) -> usize {
    let list = match status(&library.home) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("reading the followed libraries: {e}");
            return 0;
        }
    };
    let mut looked = 0;
    for listed in &list {
        let _looking = match try_lock(&library.home, &looking_lock(&listed.reference)) {
            Ok(Some(held)) => held,
            Ok(None) => {
                tracing::debug!(library = %listed.reference, "another serve is looking at it");
                continue;
            }
            Err(e) => {
                tracing::warn!("following {}: {e}", listed.reference);
                continue;
            }
        };
        // Read again under the lock: another serve may have pulled it a moment ago.
        let f = match status(&library.home) {
            Ok(now) => match now.into_iter().find(|e| e.reference == listed.reference) {
                Some(f) => f,
                None => continue,
            },
            Err(e) => {
                tracing::warn!("reading the followed libraries: {e}");
                continue;
            }
        };
        looked += 1;
        let found = match tokio::time::timeout(ROUND_BOUND, look(library, &f)).await {
            Ok(l) => l,
            Err(_) => Look {
                problem: Some(format!(
                    "no answer within {}s; tried again next round",
                    ROUND_BOUND.as_secs()
                )),
                retry: f.retry.clone(),
                ..Look::default()
            },
        };
        if let Some(p) = &found.problem {
            tracing::warn!(library = %f.reference, "following: {p}");
        }
        let now = crate::ledger::format_ms(crate::ledger::now_ms());
        let saved = with_list(&library.home, |list| {
            let Some(entry) = list.iter_mut().find(|e| e.reference == f.reference) else {
                return Ok(((), false));
            };
            entry.checked_at = Some(now.clone());
            if found.reached {
                entry.reached_at = Some(now.clone());
                entry.digest = found.digest.clone();
            }
            if found.pulled.is_some() {
                entry.pulled = found.pulled.clone();
            }
            entry.problem = found.problem.clone();
            entry.retry = found.retry.clone();
            Ok(((), true))
        });
        if let Err(e) = saved {
            tracing::warn!("recording what following found: {e}");
        }
    }
    looked
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_looker_per_home_and_library() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let one = looking_lock("oci://h/team/tools:latest");
        let other = looking_lock("oci://h/team/tools:v2");
        assert_ne!(one, other);
        let held = try_lock(&home, &one).unwrap();
        assert!(held.is_some());
        // A second serve (another open of the same file) finds it held; another library not.
        assert!(try_lock(&home, &one).unwrap().is_none());
        assert!(try_lock(&home, &other).unwrap().is_some());
        drop(held);
        assert!(try_lock(&home, &one).unwrap().is_some(), "released on drop");
    }
}
