//! `autotool tools pull oci://…[:TAG|@sha256:…]`: fetch by digest, check the signature against
//! the publishers this machine trusts, check the artifact as hostile input
//! ([`super::artifact`]), then hand the code to this machine's own gate
//! ([`crate::library::Library::create`]: lint, confined launch, smoke test, probes, declared
//! examples, with the baseline the artifact carries owed on top of this machine's own). Nothing is
//! written to the home before the gate commits (it stages, then renames). The tool arrives on
//! probation with no key granted: the keys it declares are asked here, as for a tool written
//! here.
//!
//! Provenance (where from, the digest, the signer and its key) is an audit event and a line in
//! `$AUTOTOOL_HOME/team/pulled.json`, kept for every version pulled; a tool pulled by digest is
//! *pinned* there: a later pull of another digest (by tag, or by a followed library) does not
//! replace it. A version from another publisher than the current version's is refused unless
//! the user says `--new-publisher` ([`super::publisher`]).

use super::TeamError;
use super::artifact::{self, Artifact};
use super::client::Client;
use super::publisher::{self, Found, Provenance, Publisher, Signer};
use super::push::{SIG_ANNOTATION, SIG_ARTIFACT, SIG_LAYER, SIGNER_KEY_ANNOTATION, signature_tag};
use super::reference::{Reference, digest_ok};
use super::retry::Cure;
use super::trust::{Trust, write_atomic};
use crate::home::Home;
use crate::ledger::Event;
use crate::library::{CreateError, CreateRequest, Created, Library};
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
    /// Take an artifact that carries no signature at all (never one whose signature fails or
    /// is by a key not trusted here), as a new tool; over an existing one only with
    /// `new_publisher` as well.
    pub allow_unsigned: bool,
    /// Replace a tool pinned to another digest.
    pub unpin: bool,
    /// Take a version whose publisher is not the current version's.
    pub new_publisher: bool,
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
    /// The fingerprint of the signer's key (absent in records from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer_key: Option<String>,
    /// Every version of the tool pulled here, oldest first: who published each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Provenance>,
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

/// Record `origin` as `tool`'s latest pull, and `provenance` as its version's publisher (the
/// history of earlier versions is kept).
fn record_origin(
    home: &Home,
    tool: &str,
    mut origin: Origin,
    provenance: Provenance,
) -> Result<(), TeamError> {
    let _lock = super::follow::lock(home, "pulled.lock")?;
    let mut all = origins(home);
    let mut history = all.remove(tool).map(|o| o.history).unwrap_or_default();
    history.retain(|p| p.version != provenance.version);
    history.push(provenance);
    origin.history = history;
    all.insert(tool.to_string(), origin);
    let bytes = serde_json::to_vec_pretty(&all)
        .map_err(|e| TeamError::Io(format!("writing team/pulled.json: {e}")))?;
    write_atomic(&origins_path(home), &bytes, 0o644)
}

/// An artifact fetched and checked, with who signed it.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub artifact: Artifact,
    /// The trusted publisher whose signature verified; `None`: it carries no signature and
    /// `--allow-unsigned` was given.
    pub signer: Option<Signer>,
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
    let signer = match check_signature(home, &client, reference, &digest).await? {
        Some(signer) => Some(signer),
        None if options.allow_unsigned => {
            tracing::warn!(
                "--allow-unsigned: taking {} with no signature; nobody vouches for where this \
                 code comes from, only this machine's verification stands",
                reference.pinned(&digest)
            );
            None
        }
        None => {
            return Err(TeamError::Unsigned(format!(
                "refused: {} is not signed (no signature in the referrers list nor at the tag \
                 {}); ask its publisher to push it with autotool, or `--allow-unsigned` takes \
                 it as a new tool (nobody then vouches for the code)",
                reference.pinned(&digest),
                signature_tag(&digest)
            )));
        }
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

/// The trusted publisher whose signature of `digest` counts here ([`publisher::judge`]);
/// `None` when the artifact carries no signature at all.
async fn check_signature(
    home: &Home,
    client: &Client,
    reference: &Reference,
    digest: &str,
) -> Result<Option<Signer>, TeamError> {
    let publishers = Trust::of(home).publishers()?;
    let manifests = signature_manifests(client, digest).await?;
    let mut found = Vec::new();
    for manifest in manifests.iter().take(MAX_SIGNATURES) {
        for layer in manifest.layers().iter().take(MAX_SIGNATURES) {
            if layer.media_type().to_string() != SIG_LAYER {
                continue;
            }
            let annotations = layer.annotations().as_ref();
            let Some(sig) = annotations.and_then(|a| a.get(SIG_ANNOTATION)) else {
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
            found.push(Found {
                payload,
                signature: sig.clone(),
                claimed_key: annotations
                    .and_then(|a| a.get(SIGNER_KEY_ANNOTATION))
                    .filter(|k| k.len() <= 4096)
                    .cloned(),
            });
        }
    }
    publisher::judge(&publishers, reference, digest, &found)
}

/// What a pull did.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub digest: String,
    pub signer: Option<String>,
    /// The fingerprint of the signer's key.
    pub signer_key: Option<String>,
    /// The publisher this version replaced, when `--new-publisher` took a new one.
    pub replaced: Option<String>,
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
    let current = library
        .registry
        .get(&tool)
        .map_err(|e| TeamError::Tool(e.to_string()))?;
    let incoming = Publisher::incoming(signer.as_ref(), &artifact.digest);
    // A tool's publisher is part of what it is: the current version's publisher must be this
    // one, or the user takes a new one.
    let replaced = match &current {
        Some(v) => {
            let was = publisher::of_version(&home, &tool, v.version, &v.code_hash);
            let trusted = Trust::of(&home).publishers()?;
            let retry = format!(
                "autotool tools pull {}{}",
                reference.pinned(&artifact.digest),
                if signer.is_none() {
                    " --allow-unsigned"
                } else {
                    ""
                }
            );
            publisher::check_change(
                &tool,
                &was,
                &incoming,
                &trusted,
                options.new_publisher,
                &retry,
            )
            .map_err(refuse)?;
            (!publisher::same(&was, &incoming, &trusted)).then(|| was.to_string())
        }
        None => None,
    };
    let key_hosts = artifact
        .record
        .key_hosts
        .iter()
        .map(|(k, h)| (k.to_string(), h.clone()))
        .collect();
    let signer_name = signer.as_ref().map(|s| s.name.clone());
    let signer_key = signer.as_ref().map(|s| s.key.clone());
    let pulled_at = crate::ledger::format_ms(crate::ledger::now_ms());
    let origin = Origin {
        reference: shown.clone(),
        digest: artifact.digest.clone(),
        signer: signer_name.clone(),
        pinned: pin,
        version: 0,
        pulled_at: pulled_at.clone(),
        signer_key: signer_key.clone(),
        history: Vec::new(),
    };
    let provenance = |version: u32| Provenance {
        version,
        code_hash: artifact.record.code_hash.clone(),
        publisher: signer_name.clone(),
        key: signer_key.clone(),
        digest: artifact.digest.clone(),
        reference: shown.clone(),
        pulled_at: pulled_at.clone(),
        replaced: replaced.clone(),
    };
    let signed_by = match &signer {
        Some(s) => format!("signed by {} ({})", s.name, s.key),
        None => "unsigned (--allow-unsigned)".to_string(),
    };
    let change = replaced
        .as_ref()
        .map(|was| format!("; publisher changed from {was} (--new-publisher)"))
        .unwrap_or_default();
    if let Some(v) = current.filter(|v| v.code_hash == artifact.record.code_hash) {
        if replaced.is_some() {
            let _ = library.registry.event(
                Some(&tool),
                Event::Pulled,
                &format!(
                    "version {} is the code of {} {signed_by}{change}",
                    v.version,
                    reference.pinned(&artifact.digest)
                ),
            );
        }
        record_origin(
            &home,
            &tool,
            Origin {
                version: v.version,
                ..origin
            },
            provenance(v.version),
        )?;
        return Ok(Pulled {
            digest: artifact.digest,
            signer: signer_name,
            signer_key,
            replaced,
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
    let not_created = |e: CreateError| {
        let message = library.secrets().redact(&not_created(&e, &tool));
        match &e {
            CreateError::PackagesConsent { digest, .. } => TeamError::Waiting {
                message,
                cure: Cure::Packages {
                    tool: tool.clone(),
                    digest: digest.clone(),
                },
            },
            CreateError::ReachConsent { .. } => TeamError::Waiting {
                message,
                cure: Cure::Reach {
                    tool: tool.clone(),
                    granted: super::retry::reach_stamp(library, &tool),
                },
            },
            CreateError::PinHeld(_) => TeamError::Waiting {
                message,
                cure: Cure::Unpin { tool: tool.clone() },
            },
            // What this machine lacks for now (a runtime building, a store busy).
            CreateError::Runtime(_)
            | CreateError::Stage(_)
            | CreateError::Store(_)
            | CreateError::Baseline(_) => TeamError::Io(message),
            CreateError::Verify(_) => TeamError::Tool(message),
        }
    };
    let mut prepared = library
        .prepare(request)
        .map_err(|e| refuse(not_created(e)))?;
    prepared.carried_baseline = artifact.record.baseline.clone();
    let created = library
        .create(prepared)
        .await
        .map_err(|e| refuse(not_created(e)))?;
    let _ = library.registry.event(
        Some(&tool),
        Event::Pulled,
        &format!(
            "version {} from {} {signed_by} (the publisher's version {}){change}",
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
        provenance(created.version),
    )?;
    Ok(Pulled {
        digest: artifact.digest,
        signer: signer_name,
        signer_key,
        replaced,
        created: Some(created),
        key_hosts,
        unchanged: None,
    })
}

/// Why a pulled tool was not created, in words for whoever pulled it (on a terminal, or in
/// the event a followed library leaves). [`CreateError`]'s own text is for an agent, which
/// repairs its code and calls `create_tool` again; whoever pulls cannot repair a publisher's
/// code, so it is told what happened here and what to run.
fn not_created(e: &CreateError, tool: &str) -> String {
    match e {
        CreateError::Runtime(why) => format!(
            "the Python runtime tools run on is not available here ({why}); `autotool runtime \
             install` builds it and `autotool doctor` says what this machine lacks; then pull \
             again"
        ),
        CreateError::Verify(f) if matches!(f.stage, crate::verify::Stage::Launch) => format!(
            "this machine could not launch {tool} in the sandbox: {}. `autotool doctor` says \
             what is missing; then pull again",
            f.message
        ),
        CreateError::Verify(f) => {
            let raised = crate::verify::traceback_summary(&f.log, crate::version::TOOL_FILE)
                .map(|r| format!(" (it raised {r})"))
                .unwrap_or_default();
            format!(
                "{tool} did not pass verification on this machine, at {}: {}{raised}. Nothing \
                 was installed. Tell its publisher; `autotool tools show {tool}` shows the \
                 version you have, and `autotool doctor` what this machine offers tools",
                f.stage, f.message
            )
        }
        CreateError::PinHeld(p) => format!(
            "{tool} is {} at version {}, which nothing replaces until `autotool tools unpin \
             {tool}`; then pull again (a followed library takes it by itself)",
            p.pin, p.version
        ),
        CreateError::PackagesConsent { phrase, .. } => format!(
            "{tool} asks to {phrase}, which you have not approved. Nothing was installed: run \
             `autotool tools approve {tool} --packages`, then pull again (a followed library \
             takes it by itself)"
        ),
        CreateError::ReachConsent { phrase, .. } => format!(
            "{tool} declares that it may {phrase}, which you have not granted. Nothing ran: run \
             `autotool tools approve {tool} --reach`, then pull again (a followed library \
             takes it by itself)"
        ),
        CreateError::Stage(why) | CreateError::Store(why) => {
            format!("{tool} could not be stored in this home: {why}")
        }
        CreateError::Baseline(why) => {
            format!("{tool}'s baseline could not be read in this home: {why}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_that_creates_nothing_says_what_to_run_not_what_an_agent_would_do() {
        let verify = crate::verify::VerifyFailure {
            stage: crate::verify::Stage::Initialize,
            message: "the tool did not start as an MCP server".into(),
            log: "Traceback (most recent call last):\n  File \"/tool/tool.py\", line 2, in \
                  <module>\nModuleNotFoundError: No module named 'requests'\n"
                .into(),
        };
        let errors = [
            CreateError::Runtime(crate::library::RuntimeUnavailable("still building".into())),
            CreateError::Verify(verify),
            CreateError::PackagesConsent {
                tool: "weather".into(),
                phrase: "install feedparser 6.0.11".into(),
                digest: "sha256:0".into(),
            },
            CreateError::ReachConsent {
                tool: "weather".into(),
                phrase: "reach api.example".into(),
            },
            CreateError::Baseline("gone".into()),
        ];
        for e in &errors {
            let agent = e.to_string();
            let user = not_created(e, "weather");
            for agentish in [
                "create_tool",
                "create it again",
                "create the tool again",
                "Ask the user",
                "Repair",
            ] {
                assert!(!user.contains(agentish), "{user}");
            }
            assert!(
                user.contains("autotool ") || user.contains("this home"),
                "{user}"
            );
            assert_ne!(user, agent);
        }
        let verify = not_created(&errors[1], "weather");
        assert!(
            verify.contains("it raised ModuleNotFoundError: No module named 'requests'"),
            "{verify}"
        );
        // Control: the agent's text is what the terminal used to get.
        assert!(errors[1].to_string().contains("create the tool again"));
    }
}
