//! Who published what. A tool's publisher is part of what it is: each version has one (this
//! machine, for a version grown here; the trusted publisher whose signature verified, for a
//! pulled one; nobody, for one pulled unsigned), recorded per version in
//! `$AUTOTOOL_HOME/team/pulled.json`. A pulled version whose publisher is not the current
//! version's is refused unless the user says `--new-publisher` ([`check_change`]).
//!
//! [`judge`] decides which signature of an artifact counts, and names the signer of every one
//! that does not: by publisher name and key fingerprint where this machine knows the key, by
//! the fingerprint of the key the signature names itself (autotool's annotation, checked
//! against the signature) where it does not.

use super::TeamError;
use super::reference::Reference;
use super::sign::{self, PublicKey};
use super::trust::TrustedPublisher;
use crate::home::Home;
use serde::{Deserialize, Serialize};

/// One signature stored for an artifact.
#[derive(Debug, Clone)]
pub struct Found {
    /// The signed payload (cosign's simple signing JSON).
    pub payload: Vec<u8>,
    /// Base64 DER.
    pub signature: String,
    /// The public key (PEM) the signature says it was made with, as autotool's push writes it
    /// ([`super::push::SIGNER_KEY_ANNOTATION`]); cosign's own signatures carry none.
    pub claimed_key: Option<String>,
}

/// The trusted publisher whose signature was accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signer {
    pub name: String,
    /// The fingerprint of the key that verified.
    pub key: String,
}

/// Why one signature did not count.
enum Refusal {
    /// A known key, but the payload names another digest.
    OtherDigest(String, String),
    /// A trusted publisher outside the scopes it is trusted for.
    OutOfScope(String),
    /// A publisher's retired key, on a digest it had not signed before it was replaced.
    Retired(String),
    /// No publisher here holds the key.
    Unknown(String),
}

/// `name (sha256:…)`.
fn named(name: &str, fingerprint: &str) -> String {
    format!("{name} ({fingerprint})")
}

/// Which of `found` counts for `digest` pulled from `reference`: `Ok(None)` when there is no
/// signature at all, the signer when one verifies under a publisher trusted for `reference`,
/// otherwise a refusal naming the signer of each signature refused.
pub fn judge(
    publishers: &[TrustedPublisher],
    reference: &Reference,
    digest: &str,
    found: &[Found],
) -> Result<Option<Signer>, TeamError> {
    if found.is_empty() {
        return Ok(None);
    }
    let mut refusals = Vec::new();
    for f in found {
        let current = publishers
            .iter()
            .find(|p| p.key.verifies(&f.payload, &f.signature))
            .map(|p| (p, p.key.fingerprint(), None));
        let retired = || {
            publishers.iter().find_map(|p| {
                p.retired
                    .iter()
                    .find(|(k, _)| k.verifies(&f.payload, &f.signature))
                    .map(|(_, r)| (p, r.fingerprint.clone(), Some(r)))
            })
        };
        let Some((publisher, fingerprint, retired)) = current.or_else(retired) else {
            let claimed = f
                .claimed_key
                .as_deref()
                .and_then(|pem| PublicKey::from_pem(pem).ok());
            refusals.push(Refusal::Unknown(match claimed {
                Some(k) if k.verifies(&f.payload, &f.signature) => {
                    format!("signed by an unknown key {}", k.fingerprint())
                }
                Some(k) => format!(
                    "a signature that names the key {} but does not verify under it (forged or \
                     damaged)",
                    k.fingerprint()
                ),
                None => "signed by an unknown key that the signature does not name (made \
                         without autotool; `cosign verify --key` with the publisher's key \
                         checks it)"
                    .to_string(),
            }));
            continue;
        };
        let who = named(&publisher.name, &fingerprint);
        match sign::signed_digest(&f.payload) {
            Some(signed) if signed == digest => {}
            Some(signed) => {
                // The payload is the registry's text: shown only when it is a digest.
                let signed = if super::reference::digest_ok(&signed) {
                    signed
                } else {
                    "something that is not a digest".to_string()
                };
                refusals.push(Refusal::OtherDigest(who, signed));
                continue;
            }
            None => {
                refusals.push(Refusal::Unknown(format!(
                    "signed by {who}, but its payload is not a cosign signature payload"
                )));
                continue;
            }
        }
        if let Some(r) = retired
            && !r.digests.iter().any(|d| d == digest)
        {
            refusals.push(Refusal::Retired(format!(
                "signed by {who}, a key {} replaced on {} by {}: it still verifies only what \
                 this machine had pulled signed by it",
                publisher.name,
                r.retired_at,
                publisher.key.fingerprint()
            )));
            continue;
        }
        if !publisher.believed_at(reference) {
            refusals.push(Refusal::OutOfScope(format!(
                "signed by {who}, who is trusted here only for {}, not for oci://{}/{} (`autotool \
                 trust add {} FILE --scope …` with every scope you mean)",
                publisher.scope_text(),
                reference.registry,
                reference.repository,
                publisher.name
            )));
            continue;
        }
        return Ok(Some(Signer {
            name: publisher.name.clone(),
            key: fingerprint,
        }));
    }
    let pinned = reference.pinned(digest);
    if let Some(Refusal::OtherDigest(who, signed)) = refusals
        .iter()
        .find(|r| matches!(r, Refusal::OtherDigest(..)))
    {
        return Err(TeamError::Signature(format!(
            "refused: the manifest no longer matches its signature: {who} signed {signed}, and \
             the registry now serves {digest} (its content changed after it was signed)"
        )));
    }
    let lines: Vec<String> = refusals
        .iter()
        .map(|r| match r {
            Refusal::OtherDigest(who, signed) => format!("signed by {who} for {signed}"),
            Refusal::OutOfScope(s) | Refusal::Retired(s) | Refusal::Unknown(s) => s.clone(),
        })
        .collect();
    let unknown = refusals.iter().any(|r| matches!(r, Refusal::Unknown(_)));
    let mut hint = String::new();
    if unknown {
        hint.push_str(if publishers.is_empty() {
            "; this machine trusts no publisher yet: add the publisher's key with `autotool \
             trust add NAME FILE` (they print it with `autotool trust show`; compare its \
             fingerprint with them)"
        } else {
            "; none by a publisher this machine trusts: if you know that key's owner, add it \
             with `autotool trust add NAME FILE` (compare the fingerprint with them)"
        });
    }
    Err(TeamError::Signature(format!(
        "refused: {pinned} carries {} signature(s), none accepted here: {}{hint}. \
         `--allow-unsigned` does not take a signed artifact whose signature is not accepted",
        found.len(),
        lines.join("; ")
    )))
}

/// One version pulled into a tool: who published it, from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// This machine's version number.
    pub version: u32,
    /// Its code's sha256: a record whose hash is not the version's is about another version
    /// (a tool removed and grown again here).
    pub code_hash: String,
    /// The trusted publisher whose signature verified; `None`: pulled unsigned.
    pub publisher: Option<String>,
    /// Their key's fingerprint.
    pub key: Option<String>,
    pub digest: String,
    pub reference: String,
    pub pulled_at: String,
    /// The publisher it replaced, when the user took a new publisher (`--new-publisher`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
}

/// Who published a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Publisher {
    /// Grown on this machine.
    Local,
    /// Pulled with `--allow-unsigned`: nobody vouches for it.
    Unsigned { digest: String },
    /// Pulled, signed by a trusted publisher.
    Signed {
        name: String,
        key: Option<String>,
        digest: String,
    },
}

impl std::fmt::Display for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Publisher::Local => write!(f, "this machine (grown here)"),
            Publisher::Unsigned { .. } => write!(f, "nobody (pulled unsigned)"),
            Publisher::Signed {
                name, key: Some(k), ..
            } => write!(f, "{}", named(name, k)),
            Publisher::Signed {
                name, key: None, ..
            } => write!(f, "{name}"),
        }
    }
}

impl Publisher {
    /// What an incoming signer (or none) is.
    pub fn incoming(signer: Option<&Signer>, digest: &str) -> Publisher {
        match signer {
            Some(s) => Publisher::Signed {
                name: s.name.clone(),
                key: Some(s.key.clone()),
                digest: digest.to_string(),
            },
            None => Publisher::Unsigned {
                digest: digest.to_string(),
            },
        }
    }
}

/// Where `tool`'s `version` (whose code hash is `code_hash`) came from, in one line: an added
/// server's package (`pypi:mcp-server-time 2026.10.19`), or a pulled version's reference,
/// digest and publisher (`oci://host/team/weather:latest @ sha256:1a2b3c4d5e6f, signed by
/// alice (key …), pinned by digest`); `None` for a version made on this machine.
pub fn origin(home: &Home, tool: &str, version: u32, code_hash: &str) -> Option<String> {
    if let Some(added) = crate::provenance::of(home, tool, code_hash) {
        return Some(added.origin());
    }
    let publisher = of_version(home, tool, version, code_hash);
    let (digest, by) = match &publisher {
        Publisher::Local => return None,
        Publisher::Unsigned { digest } => (digest.clone(), "unsigned".to_string()),
        Publisher::Signed { digest, .. } => (digest.clone(), format!("signed by {publisher}")),
    };
    let pulled = super::pull::origins(home).remove(tool);
    let reference = pulled
        .as_ref()
        .map_or("a team library", |o| o.reference.as_str());
    let short = digest.get(..19).unwrap_or(&digest);
    let held = if pulled.as_ref().is_some_and(|o| o.pinned) {
        ", pinned by digest"
    } else {
        ""
    };
    Some(format!("{reference} @ {short}, {by}{held}"))
}

/// Who published `tool`'s `version` (whose code hash is `code_hash`), from `pulled.json`.
pub fn of_version(home: &Home, tool: &str, version: u32, code_hash: &str) -> Publisher {
    let Some(origin) = super::pull::origins(home).remove(tool) else {
        return Publisher::Local;
    };
    if let Some(p) = origin
        .history
        .iter()
        .rev()
        .find(|p| p.version == version && p.code_hash == code_hash)
    {
        return match &p.publisher {
            Some(name) => Publisher::Signed {
                name: name.clone(),
                key: p.key.clone(),
                digest: p.digest.clone(),
            },
            None => Publisher::Unsigned {
                digest: p.digest.clone(),
            },
        };
    }
    // Recorded before versions kept their publisher: the latest pull only.
    if origin.history.is_empty() && origin.version == version {
        return match origin.signer {
            Some(name) => Publisher::Signed {
                name,
                key: origin.signer_key,
                digest: origin.digest,
            },
            None => Publisher::Unsigned {
                digest: origin.digest,
            },
        };
    }
    Publisher::Local
}

/// Whether `incoming` is the publisher of `current`: the same trusted name, with the same key
/// or a key that name held before (a replaced key). Nobody (unsigned) is never the same as
/// anyone, and this machine is never a pulled version's publisher.
pub fn same(current: &Publisher, incoming: &Publisher, trusted: &[TrustedPublisher]) -> bool {
    let (
        Publisher::Signed {
            name: was, key: k0, ..
        },
        Publisher::Signed {
            name: now, key: k1, ..
        },
    ) = (current, incoming)
    else {
        return false;
    };
    if was != now {
        return false;
    }
    match (k0, k1) {
        (Some(k0), Some(k1)) if k0 != k1 => trusted
            .iter()
            .find(|p| p.name == *now)
            .is_some_and(|p| p.holds(k0) && p.holds(k1)),
        // A record from before keys were kept: the name is all there is.
        _ => true,
    }
}

/// Refuse `incoming` as the next version of `tool`, whose current version is `current`'s,
/// unless it is the same publisher or the user took a new one (`new_publisher`); `retry` is
/// the command that takes it.
pub fn check_change(
    tool: &str,
    current: &Publisher,
    incoming: &Publisher,
    trusted: &[TrustedPublisher],
    new_publisher: bool,
    retry: &str,
) -> Result<(), TeamError> {
    if new_publisher || same(current, incoming, trusted) {
        return Ok(());
    }
    let arriving = match incoming {
        Publisher::Unsigned { .. } => "this version is unsigned (nobody vouches for it)".into(),
        other => format!("this version is signed by {other}"),
    };
    let was = match current {
        Publisher::Local => format!("{tool} was grown on this machine"),
        Publisher::Unsigned { .. } => {
            format!("{tool}'s current version was pulled unsigned (nobody vouches for it)")
        }
        other => format!("{tool} is published by {other}"),
    };
    Err(TeamError::Tool(format!(
        "refused: {was}; {arriving}. A tool's publisher is part of what it is, so another \
         publisher's version does not replace it by itself (nothing was changed). If you mean \
         to take it from this publisher from now on, run `{retry} --new-publisher`"
    )))
}

/// The digests this machine pulled signed by `name` with the key `fingerprint`: what that key
/// still verifies once replaced.
pub fn signed_by(home: &Home, name: &str, fingerprint: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for origin in super::pull::origins(home).into_values() {
        let mut add = |d: &String| {
            if !out.contains(d) {
                out.push(d.clone());
            }
        };
        for p in &origin.history {
            if p.publisher.as_deref() == Some(name) && p.key.as_deref() == Some(fingerprint) {
                add(&p.digest);
            }
        }
        if origin.signer.as_deref() == Some(name)
            && origin
                .signer_key
                .as_deref()
                .is_none_or(|k| k == fingerprint)
        {
            add(&origin.digest);
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::team::sign::SigningKey;
    use crate::team::trust::{RetiredKey, Scope};

    const REPO: &str = "oci://registry.example.com/team/tools";

    fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn reference(at: &str) -> Reference {
        Reference::parse(at).unwrap()
    }

    /// A signature by `key` of `signed`, naming `key` as autotool's push does.
    fn signature(key: &SigningKey, signed: &str) -> Found {
        let payload = sign::payload("registry.example.com/team/tools", signed);
        Found {
            signature: key.sign(&payload).unwrap(),
            payload,
            claimed_key: Some(key.public().to_pem()),
        }
    }

    fn trusted(name: &str, key: &SigningKey, scopes: &[&str]) -> TrustedPublisher {
        TrustedPublisher {
            name: name.into(),
            key: key.public(),
            scopes: scopes.iter().map(|s| Scope::parse(s).unwrap()).collect(),
            retired: Vec::new(),
        }
    }

    fn key() -> SigningKey {
        SigningKey::generate().unwrap().1
    }

    #[test]
    fn every_refused_signature_names_its_signer() {
        let (alice, stranger) = (key(), key());
        let d = digest('a');
        let publishers = vec![trusted("alice", &alice, &[])];
        let r = reference(&format!("{REPO}:v1"));
        // Control: alice's signature counts.
        let ok = judge(&publishers, &r, &d, &[signature(&alice, &d)]).unwrap();
        assert_eq!(
            ok,
            Some(Signer {
                name: "alice".into(),
                key: alice.public().fingerprint()
            })
        );
        assert_eq!(judge(&publishers, &r, &d, &[]).unwrap(), None, "unsigned");

        // An unknown key: named by its fingerprint, not taken as unsigned.
        let e = judge(&publishers, &r, &d, &[signature(&stranger, &d)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "signed by an unknown key {}",
                stranger.public().fingerprint()
            )) && e.contains("none by a publisher this machine trusts"),
            "{e}"
        );
        let e = judge(&[], &r, &d, &[signature(&stranger, &d)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&stranger.public().fingerprint()) && e.contains("trusts no publisher yet"),
            "{e}"
        );
        // A signature claiming alice's key that does not verify under it is not alice's.
        let mut forged = signature(&stranger, &d);
        forged.claimed_key = Some(alice.public().to_pem());
        let e = judge(&[], &r, &d, &[forged]).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "names the key {} but does not verify",
                alice.public().fingerprint()
            )),
            "{e}"
        );
        let mut bare = signature(&stranger, &d);
        bare.claimed_key = None;
        let e = judge(&publishers, &r, &d, &[bare]).unwrap_err().to_string();
        assert!(e.contains("does not name"), "{e}");
        // Signed for another digest: names the signer and its key.
        let e = judge(&publishers, &r, &d, &[signature(&alice, &digest('b'))])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no longer matches its signature")
                && e.contains(&format!("alice ({})", alice.public().fingerprint())),
            "{e}"
        );
    }

    #[test]
    fn a_scoped_publisher_signs_only_inside_its_scope() {
        let alice = key();
        let d = digest('a');
        let publishers = vec![trusted("alice", &alice, &[REPO])];
        let found = [signature(&alice, &d)];
        let inside = reference(&format!("{REPO}:v1"));
        assert!(judge(&publishers, &inside, &d, &found).unwrap().is_some());
        let below = reference(&format!("{REPO}/more:v1"));
        assert!(judge(&publishers, &below, &d, &found).unwrap().is_some());
        for outside in [
            "oci://elsewhere.example.com/team/tools:v1",
            "oci://registry.example.com/team/other:v1",
        ] {
            let e = judge(&publishers, &reference(outside), &d, &found)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("trusted here only for {REPO}"))
                    && e.contains(&alice.public().fingerprint()),
                "{outside}: {e}"
            );
        }
    }

    #[test]
    fn a_retired_key_verifies_only_what_was_pulled_before_it_was_replaced() {
        let (old, new) = (key(), key());
        let (before, after) = (digest('a'), digest('b'));
        let mut alice = trusted("alice", &new, &[]);
        alice.retired.push((
            old.public(),
            RetiredKey {
                pem: old.public().to_pem(),
                fingerprint: old.public().fingerprint(),
                retired_at: "2026-12-07 12:00:00".into(),
                digests: vec![before.clone()],
            },
        ));
        let publishers = vec![alice];
        let r = reference(&format!("{REPO}:v1"));
        let signer = judge(&publishers, &r, &before, &[signature(&old, &before)])
            .unwrap()
            .unwrap();
        assert_eq!(signer.key, old.public().fingerprint());
        let e = judge(&publishers, &r, &after, &[signature(&old, &after)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("replaced on") && e.contains(&new.public().fingerprint()),
            "{e}"
        );
        assert!(
            judge(&publishers, &r, &after, &[signature(&new, &after)])
                .unwrap()
                .is_some(),
            "control: the new key signs anything"
        );
    }

    #[test]
    fn each_version_keeps_its_publisher_and_a_regrown_tool_is_not_taken_for_a_pulled_one() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let alice = key().public().fingerprint();
        let provenance = |version: u32, hash: &str, d: char, by: Option<&str>| Provenance {
            version,
            code_hash: hash.into(),
            publisher: by.map(String::from),
            key: by.map(|_| alice.clone()),
            digest: digest(d),
            reference: format!("{REPO}:v{version}"),
            pulled_at: "2026-12-07 12:00:00".into(),
            replaced: None,
        };
        let origin = crate::team::pull::Origin {
            reference: format!("{REPO}:v2"),
            digest: digest('b'),
            signer: None,
            pinned: false,
            version: 2,
            pulled_at: "2026-12-07 12:00:00".into(),
            signer_key: None,
            history: vec![
                provenance(1, "h1", 'a', Some("alice")),
                provenance(2, "h2", 'b', None),
            ],
        };
        let all = std::collections::BTreeMap::from([("weather".to_string(), origin)]);
        let path = dir.path().join("team").join("pulled.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_vec(&all).unwrap()).unwrap();

        let v1 = of_version(&home, "weather", 1, "h1");
        assert_eq!(v1.to_string(), format!("alice ({alice})"));
        assert_eq!(
            of_version(&home, "weather", 2, "h2"),
            Publisher::Unsigned {
                digest: digest('b')
            }
        );
        // Version 1 again, but other code (removed and grown again here): grown here.
        assert_eq!(of_version(&home, "weather", 1, "other"), Publisher::Local);
        assert_eq!(of_version(&home, "weather", 3, "h3"), Publisher::Local);
        assert_eq!(of_version(&home, "other", 1, "h1"), Publisher::Local);
        // What a replaced key still verifies: what was pulled signed by it.
        assert_eq!(signed_by(&home, "alice", &alice), vec![digest('a')]);
        assert!(signed_by(&home, "alice", "sha256:0000").is_empty());
        assert!(signed_by(&home, "bob", &alice).is_empty());
    }

    #[test]
    fn another_publishers_version_is_refused_unless_the_user_takes_a_new_publisher() {
        let (alice, bob) = (key(), key());
        let trusted_here = vec![trusted("alice", &alice, &[]), trusted("bob", &bob, &[])];
        let signed = |name: &str, k: &SigningKey| Publisher::Signed {
            name: name.into(),
            key: Some(k.public().fingerprint()),
            digest: digest('a'),
        };
        let retry = "autotool tools pull oci://r/x@sha256:a";
        let check = |was: &Publisher, now: &Publisher, flag: bool| {
            check_change("weather", was, now, &trusted_here, flag, retry)
        };
        // Control: the same publisher's new version.
        check(&signed("alice", &alice), &signed("alice", &alice), false).unwrap();
        let e = check(&signed("alice", &alice), &signed("bob", &bob), false)
            .unwrap_err()
            .to_string();
        for part in [
            "weather is published by alice",
            "signed by bob",
            &alice.public().fingerprint(),
            &bob.public().fingerprint(),
            "autotool tools pull oci://r/x@sha256:a --new-publisher",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
        check(&signed("alice", &alice), &signed("bob", &bob), true).unwrap();
        // Grown here, or unsigned, is a publisher too.
        let e = check(&Publisher::Local, &signed("alice", &alice), false).unwrap_err();
        assert!(e.to_string().contains("grown on this machine"), "{e}");
        let unsigned = Publisher::Unsigned {
            digest: digest('b'),
        };
        let e = check(&signed("alice", &alice), &unsigned, false).unwrap_err();
        assert!(e.to_string().contains("unsigned"), "{e}");
        assert!(
            check(&unsigned, &unsigned, false).is_err(),
            "nobody is nobody else"
        );
        // The same name with a key it never held (removed and added again) is not the same.
        let stranger = key();
        let e = check(&signed("alice", &stranger), &signed("alice", &alice), false).unwrap_err();
        assert!(
            e.to_string().contains(&stranger.public().fingerprint()),
            "{e}"
        );
    }
}
