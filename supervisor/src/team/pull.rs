//! `autotool tools pull oci://…[:TAG|@sha256:…]`: fetch by digest, check the signature against
//! the publishers this machine trusts, check the artifact as hostile input
//! ([`super::artifact`]), then hand the code to this machine's own gate
//! ([`crate::library::Library::create`]: lint, confined launch, smoke test, probes, declared
//! examples, with the baseline the artifact carries owed on top of this machine's own). Nothing is
//! written to the home before the gate commits (it stages, then renames). The tool arrives on
//! probation with no key granted: the keys it declares are asked here, as for a tool written
//! here.
//!
//! Provenance (where from, the digest, the signer) is an audit event and a line in
//! `$AUTOTOOL_HOME/team/pulled.json`; a tool pulled by digest is *pinned* there: a later pull of
//! another digest (by tag, or by a followed library) does not replace it.

use super::TeamError;
use super::artifact::{self, Artifact};
use super::client::Client;
use super::push::{SIG_ANNOTATION, SIG_ARTIFACT, SIG_LAYER, signature_tag};
use super::reference::{Reference, digest_ok};
use super::sign;
use super::trust::{Trust, write_atomic};
use crate::home::Home;
use crate::ledger::Event;
use crate::library::{CreateRequest, Created, Library};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most signature manifests, and layers in each, looked at.
const MAX_SIGNATURES: usize = 16;
/// The most bytes of a signature payload read.
const PAYLOAD_LIMIT: u64 = 64 << 10;
/// The most obligations or verdicts a carried record may hold.
const MAX_CARRIED: usize = 512;

/// How to pull.
#[derive(Debug, Clone, Copy, Default)]
pub struct PullOptions {
    pub plain_http: bool,
    /// Take an unsigned artifact, or one signed by no publisher trusted here.
    pub allow_unsigned: bool,
    /// Replace a tool pinned to another digest.
    pub unpin: bool,
}

/// Where a pulled tool came from: `team/pulled.json`, by tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// `oci://host/repo[:tag]` as given.
    pub reference: String,
    pub digest: String,
    /// The publisher whose signature was checked; `None` when pulled with `--allow-unsigned`.
    pub signer: Option<String>,
    /// Pulled by digest: not replaced by another digest without `--unpin`.
    pub pinned: bool,
    pub version: u32,
    pub pulled_at: String,
}

fn origins_path(home: &Home) -> std::path::PathBuf {
    home.root().join("team").join("pulled.json")
}

/// Every pulled tool's origin.
pub fn origins(home: &Home) -> BTreeMap<String, Origin> {
    std::fs::read(origins_path(home))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn record_origin(home: &Home, tool: &str, origin: Origin) -> Result<(), TeamError> {
    let _lock = super::follow::lock(home, "pulled.lock")?;
    let mut all = origins(home);
    all.insert(tool.to_string(), origin);
    let bytes = serde_json::to_vec_pretty(&all)
        .map_err(|e| TeamError::Io(format!("writing team/pulled.json: {e}")))?;
    write_atomic(&origins_path(home), &bytes, 0o644)
}

/// An artifact fetched and checked, with who signed it.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub artifact: Artifact,
    /// The trusted publisher whose signature verified; `None` with `--allow-unsigned`.
    pub signer: Option<String>,
}

/// Fetch `reference`'s artifact, check its signature and its content. Writes nothing.
pub async fn fetch(
    home: &Home,
    reference: &Reference,
    options: PullOptions,
    code_limit: u64,
) -> Result<Fetched, TeamError> {
    let credentials = super::auth::credentials_for(&reference.registry)?;
    let client = Client::new(reference, options.plain_http, credentials, false)?;
    let (bytes, digest, _) = client.manifest(reference.manifest_ref()).await?;
    let (config, layer, _) = artifact::parse_manifest(&bytes, code_limit)?;
    let signer = match check_signature(home, &client, reference, &digest).await {
        Ok(signer) => Some(signer),
        Err(e) if options.allow_unsigned => {
            tracing::warn!(
                "--allow-unsigned: taking {} without a trusted signature ({e}); nobody vouches \
                 for where this code comes from, only this machine's verification stands",
                reference.pinned(&digest)
            );
            None
        }
        Err(e) => return Err(e),
    };
    let config_bytes = client
        .blob(
            config.digest().as_ref(),
            config.size(),
            artifact::CONFIG_LIMIT,
            "the tool's record",
        )
        .await?;
    let (record, name) = artifact::parse_record(&config_bytes)?;
    if record.baseline.len() > MAX_CARRIED || record.verdicts.len() > MAX_CARRIED {
        return Err(TeamError::Refused(format!(
            "the tool's record carries more than {MAX_CARRIED} obligations or verdicts"
        )));
    }
    let code = client
        .blob(
            layer.digest().as_ref(),
            layer.size(),
            code_limit,
            "the tool's code",
        )
        .await?;
    let code = artifact::check_code(&record, code)?;
    Ok(Fetched {
        artifact: Artifact {
            digest,
            record,
            name,
            code,
        },
        signer,
    })
}

/// The signature manifests stored for `digest`: through the referrers API, else cosign's tag.
async fn signature_manifests(
    client: &Client,
    digest: &str,
) -> Result<Vec<oci_spec::image::ImageManifest>, TeamError> {
    let mut digests = Vec::new();
    if let Some(index) = client.referrers(digest, SIG_ARTIFACT).await? {
        #[derive(Deserialize)]
        struct Index {
            #[serde(default)]
            manifests: Vec<Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            digest: String,
            #[serde(default, rename = "artifactType")]
            artifact_type: Option<String>,
        }
        let index: Index = serde_json::from_slice(&index).map_err(|_| {
            TeamError::Refused("the registry's referrers list is not an OCI index".into())
        })?;
        digests = index
            .manifests
            .into_iter()
            .filter(|e| e.artifact_type.as_deref().is_none_or(|t| t == SIG_ARTIFACT))
            .map(|e| e.digest)
            .filter(|d| digest_ok(d))
            .take(MAX_SIGNATURES)
            .collect();
    }
    let mut manifests = Vec::new();
    for d in &digests {
        let (bytes, _, _) = client.manifest(d).await?;
        if let Ok(m) = serde_json::from_slice(&bytes) {
            manifests.push(m);
        }
    }
    if manifests.is_empty() {
        match client.manifest(&signature_tag(digest)).await {
            Ok((bytes, _, _)) => {
                let m = serde_json::from_slice(&bytes).map_err(|_| {
                    TeamError::Refused(format!(
                        "the signature stored at {} is not an OCI manifest",
                        signature_tag(digest)
                    ))
                })?;
                manifests.push(m);
            }
            Err(TeamError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(manifests)
}

/// The name of the trusted publisher whose signature of `digest` verifies.
async fn check_signature(
    home: &Home,
    client: &Client,
    reference: &Reference,
    digest: &str,
) -> Result<String, TeamError> {
    let publishers = Trust::of(home).publishers()?;
    let manifests = signature_manifests(client, digest).await?;
    let allow_hint = "`--allow-unsigned` skips this check (and nobody then vouches for the code)";
    if manifests.is_empty() {
        return Err(TeamError::Signature(format!(
            "refused: {} is not signed (no signature in the referrers list nor at the tag {}); \
             ask its publisher to push it with autotool, or {allow_hint}",
            reference.pinned(digest),
            signature_tag(digest)
        )));
    }
    let mut other_digests = Vec::new();
    let mut signatures = 0;
    for manifest in manifests.iter().take(MAX_SIGNATURES) {
        for layer in manifest.layers().iter().take(MAX_SIGNATURES) {
            if layer.media_type().to_string() != SIG_LAYER {
                continue;
            }
            let Some(sig) = layer
                .annotations()
                .as_ref()
                .and_then(|a| a.get(SIG_ANNOTATION))
            else {
                continue;
            };
            let payload = client
                .blob(
                    layer.digest().as_ref(),
                    layer.size(),
                    PAYLOAD_LIMIT,
                    "a signature",
                )
                .await?;
            signatures += 1;
            let Some((name, _)) = publishers
                .iter()
                .find(|(_, key)| key.verifies(&payload, sig))
            else {
                continue;
            };
            match sign::signed_digest(&payload) {
                Some(signed) if signed == digest => return Ok(name.clone()),
                Some(signed) => other_digests.push((name.clone(), signed)),
                None => {}
            }
        }
    }
    if let Some((name, signed)) = other_digests.first() {
        return Err(TeamError::Signature(format!(
            "refused: the manifest no longer matches its signature: {name} signed {signed}, \
             and the registry now serves {digest} (its content changed after it was signed)"
        )));
    }
    if publishers.is_empty() {
        return Err(TeamError::Signature(format!(
            "refused: {} is signed, but this machine trusts no publisher yet; add the \
             publisher's key with `autotool trust add NAME FILE` (they print it with `autotool \
             trust show`), or {allow_hint}",
            reference.pinned(digest)
        )));
    }
    Err(TeamError::Signature(format!(
        "refused: {} carries {signatures} signature(s), none by a publisher this machine trusts \
         ({}); add the publisher's key with `autotool trust add NAME FILE`, or {allow_hint}",
        reference.pinned(digest),
        publishers
            .iter()
            .map(|(n, k)| format!("{n} {}", k.fingerprint()))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// What a pull did.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub digest: String,
    pub signer: Option<String>,
    pub created: Option<Created>,
    /// For each declared key, the hosts its publisher allowed (shown, never applied).
    pub key_hosts: BTreeMap<String, Vec<String>>,
    /// Set when this machine already had the version.
    pub unchanged: Option<String>,
}

/// Refuse replacing a tool pinned to another digest.
pub fn check_pin(home: &Home, tool: &str, digest: &str, unpin: bool) -> Result<(), TeamError> {
    if let Some(o) = origins(home).get(tool)
        && o.pinned
        && o.digest != digest
        && !unpin
    {
        return Err(TeamError::Tool(format!(
            "refused: {tool} is pinned to {} (pulled by digest); it is not replaced by {digest}. \
             Pull with `--unpin` to replace it",
            o.digest
        )));
    }
    Ok(())
}

/// Pull `reference` into `library`: fetch and check, then this machine's gate. Pulled by
/// digest, the tool is pinned to it.
pub async fn pull(
    library: &Library,
    reference: &Reference,
    options: PullOptions,
) -> Result<Pulled, TeamError> {
    pull_as(
        library,
        reference,
        reference.to_string(),
        reference.digest.is_some(),
        options,
    )
    .await
}

/// A followed library's new digest (`reference`, by digest), recorded as coming from the
/// followed tag `followed` and not pinned.
pub async fn pull_followed(
    library: &Library,
    reference: &Reference,
    followed: &str,
    options: PullOptions,
) -> Result<Pulled, TeamError> {
    pull_as(library, reference, followed.to_string(), false, options).await
}

async fn pull_as(
    library: &Library,
    reference: &Reference,
    shown: String,
    pin: bool,
    options: PullOptions,
) -> Result<Pulled, TeamError> {
    let home = library.home.clone();
    let limit = library.registry.code_limit() as u64;
    let fetched = match fetch(&home, reference, options, limit).await {
        Ok(f) => f,
        Err(e) => {
            let _ = library
                .registry
                .event(None, Event::PullRefused, &format!("{reference}: {e}"));
            return Err(e);
        }
    };
    let Fetched { artifact, signer } = fetched;
    let tool = artifact.name.as_str().to_string();
    let refuse = |e: TeamError| {
        let _ = library.registry.event(
            Some(&tool),
            Event::PullRefused,
            &format!("{reference}: {e}"),
        );
        e
    };
    check_pin(&home, &tool, &artifact.digest, options.unpin).map_err(refuse)?;
    let key_hosts = artifact
        .record
        .key_hosts
        .iter()
        .map(|(k, h)| (k.to_string(), h.clone()))
        .collect();
    let origin = Origin {
        reference: shown,
        digest: artifact.digest.clone(),
        signer: signer.clone(),
        pinned: pin,
        version: 0,
        pulled_at: crate::ledger::format_ms(crate::ledger::now_ms()),
    };
    let current = library
        .registry
        .get(&tool)
        .map_err(|e| TeamError::Tool(e.to_string()))?;
    if let Some(v) = current.filter(|v| v.code_hash == artifact.record.code_hash) {
        record_origin(
            &home,
            &tool,
            Origin {
                version: v.version,
                ..origin
            },
        )?;
        return Ok(Pulled {
            digest: artifact.digest,
            signer,
            created: None,
            key_hosts,
            unchanged: Some(format!("{tool} version {} is already this code", v.version)),
        });
    }
    let request = CreateRequest {
        name: artifact.name.clone(),
        code: artifact.code.clone(),
        description: artifact.record.description.clone(),
        smoke_test: None,
        thoroughness: crate::verify::Thoroughness::default(),
    };
    let mut prepared = library
        .prepare(request)
        .map_err(|e| refuse(TeamError::Tool(e.to_string())))?;
    prepared.carried_baseline = artifact.record.baseline.clone();
    let created = library
        .create(prepared)
        .await
        .map_err(|e| refuse(TeamError::Tool(library.secrets().redact(&e.to_string()))))?;
    let signed_by = signer.as_deref().unwrap_or("nobody (--allow-unsigned)");
    let _ = library.registry.event(
        Some(&tool),
        Event::Pulled,
        &format!(
            "version {} from {} signed by {signed_by} (the publisher's version {})",
            created.version,
            reference.pinned(&artifact.digest),
            artifact.record.version
        ),
    );
    record_origin(
        &home,
        &tool,
        Origin {
            version: created.version,
            ..origin
        },
    )?;
    Ok(Pulled {
        digest: artifact.digest,
        signer,
        created: Some(created),
        key_hosts,
        unchanged: None,
    })
}
