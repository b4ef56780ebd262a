//! `autotool tools push NAME oci://…`: the tool's current version, as verification recorded
//! it, published as an artifact ([`super::artifact`]) and signed with this machine's key; the
//! signature stored beside it under cosign's tag (`sha256-<hex>.sig`) with the artifact as its
//! `subject`, so registries with the OCI 1.1 referrers API list it too. Before anything leaves,
//! every blob is searched for the values of this home's keys (every encoding the redactor
//! knows): a tool whose record would carry one is not pushed.

use super::TeamError;
use super::artifact::{self, ToolRecord};
use super::client::{Client, sha256_digest};
use super::reference::{DEFAULT_TAG, Reference};
use super::sign;
use super::trust::Trust;
use crate::credentials::KeyStore;
use crate::home::Home;
use crate::ledger::{Event, State};
use crate::registry::Registry;
use oci_spec::image::{Descriptor, MediaType};
use std::collections::HashMap;

/// cosign's signature layer media type.
pub const SIG_LAYER: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding a signature.
pub const SIG_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The annotation naming the key a signature was made with (PEM), so a machine that does not
/// trust it can still say whose it is (checked against the signature before it is named).
pub const SIGNER_KEY_ANNOTATION: &str = "dev.autotool.signer.key";
/// The signature manifest's `artifactType` (what the referrers list is filtered by).
pub const SIG_ARTIFACT: &str = "application/vnd.dev.cosign.artifact.sig.v1+json";

/// What a push did.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub tool: String,
    pub version: u32,
    pub digest: String,
    /// `oci://host/repo@digest`.
    pub pinned: String,
    pub tag: String,
    /// The signing key's fingerprint.
    pub signer: String,
    /// Bytes of the config and code blobs.
    pub sizes: (usize, usize),
}

/// The tag cosign keeps a manifest's signatures under.
pub fn signature_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1) + ".sig"
}

/// Build the record of `name`'s current version.
pub fn record(
    home: &Home,
    registry: &Registry,
    name: &str,
) -> Result<(ToolRecord, Vec<u8>), TeamError> {
    let v = registry
        .get(name)
        .map_err(|e| TeamError::Tool(e.to_string()))?
        .ok_or_else(|| {
            TeamError::Tool(format!(
                "there is no tool named {name:?}; `autotool tools list` shows the tools there are"
            ))
        })?;
    if !matches!(v.state, State::Probation | State::Active) {
        return Err(TeamError::Tool(format!(
            "{name} version {} is {}; only a version on probation or trusted (active) is \
             published",
            v.version,
            v.state.as_str()
        )));
    }
    let path = registry.file_of(&v);
    let code = std::fs::read(&path)
        .map_err(|e| TeamError::Io(format!("reading {}: {e}", path.display())))?;
    if crate::version::code_hash(&code) != v.code_hash {
        return Err(TeamError::Tool(format!(
            "{} is no longer the code {name} version {} was verified with; serve verifies it \
             again, push after that",
            path.display(),
            v.version
        )));
    }
    let ledger = registry.ledger();
    let baseline = ledger
        .baseline(name, false)
        .map_err(|e| TeamError::Tool(e.to_string()))?
        .into_iter()
        .map(|row| crate::verify::Obligation {
            id: None,
            ..row.obligation
        })
        .collect();
    let verdicts = ledger
        .verdicts(name, v.version)
        .map_err(|e| TeamError::Tool(e.to_string()))?;
    let allowlists = KeyStore::open(home).allowlists().unwrap_or_default();
    let key_hosts = v
        .required_env
        .iter()
        .filter_map(|k| allowlists.get(k.as_str()).map(|h| (k.clone(), h.clone())))
        .collect();
    let record = ToolRecord {
        schema: 1,
        name: name.to_string(),
        version: v.version,
        code_hash: v.code_hash.clone(),
        pin: crate::pin::of(&v),
        description: v.description.clone(),
        functions: v.functions.specs(),
        required_env: v.required_env.clone(),
        key_hosts,
        packages: v.packages.as_deref().cloned(),
        baseline,
        verdicts,
        runtime_mcp: crate::tool::runtime::RUNTIME_REQUIREMENTS[0].to_string(),
    };
    Ok((record, code))
}

/// Refuse `blobs` if any holds a value of this home's keys, in any encoding the redactor knows.
pub fn check_no_secrets(home: &Home, blobs: &[(&str, &[u8])]) -> Result<(), TeamError> {
    let (values, _) = KeyStore::open(home).known_values();
    if values.is_empty() {
        return Ok(());
    }
    let pairs: Vec<(&str, &[u8])> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v.expose()))
        .collect();
    let redactor = crate::redact::Redactor::new(&pairs)
        .map_err(|e| TeamError::Io(format!("building the redactor: {e}")))?;
    for (what, bytes) in blobs {
        let text = String::from_utf8_lossy(bytes);
        if redactor.redact(&text) != text {
            return Err(TeamError::Tool(format!(
                "the {what} would carry the value of one of this machine's keys; nothing was \
                 pushed (a tool's code and record must hold key names only)"
            )));
        }
    }
    Ok(())
}

/// Push `name`'s current version to `reference`.
pub async fn push(
    home: &Home,
    name: &str,
    reference: &Reference,
    plain_http: bool,
) -> Result<Pushed, TeamError> {
    if reference.digest.is_some() {
        return Err(TeamError::Reference(
            "a push names a tag (oci://HOST/REPO:TAG), not a digest: the digest is what the \
             push prints"
                .into(),
        ));
    }
    let registry = Registry::open(home).map_err(|e| TeamError::Tool(e.to_string()))?;
    let (record, code) = record(home, &registry, name)?;
    let key = Trust::of(home).signing_key()?;
    let config = serde_json::to_vec_pretty(&record)
        .map_err(|e| TeamError::Io(format!("writing the record: {e}")))?;
    check_no_secrets(home, &[("tool's record", &config), ("tool's code", &code)])?;
    let credentials = super::auth::credentials_for(&reference.registry)?;
    let client = Client::new(reference, plain_http, credentials, true)?;
    let tag = reference.tag.clone().unwrap_or_else(|| DEFAULT_TAG.into());
    client
        .push_blob(&config, "uploading the tool's record")
        .await?;
    client.push_blob(&code, "uploading the tool's code").await?;
    let created = crate::ledger::format_ms(crate::ledger::now_ms());
    let manifest = artifact::manifest(&config, &code, &record, &reference.to_string(), &created)?;
    let digest = client.put_manifest(&tag, &manifest).await?;
    sign_manifest(&client, reference, &key, &digest, manifest.len() as u64).await?;
    let signer = key.public().fingerprint();
    let pinned = reference.pinned(&digest);
    let _ = registry.event(
        Some(name),
        Event::Published,
        &format!(
            "version {} as {pinned} (tag {tag}), signed by {signer}",
            record.version
        ),
    );
    Ok(Pushed {
        tool: name.to_string(),
        version: record.version,
        digest,
        pinned,
        tag,
        signer,
        sizes: (config.len(), code.len()),
    })
}

/// Sign the manifest `digest` and store the signature under cosign's tag, with the manifest
/// as its subject.
pub async fn sign_manifest(
    client: &Client,
    reference: &Reference,
    key: &sign::SigningKey,
    digest: &str,
    size: u64,
) -> Result<String, TeamError> {
    let payload = sign::payload(&reference.docker_reference(), digest);
    let signature = key.sign(&payload)?;
    let empty = b"{}".to_vec();
    client
        .push_blob(&empty, "uploading the signature's config")
        .await?;
    client
        .push_blob(&payload, "uploading the signature")
        .await?;
    let parse = |d: String| {
        d.parse::<oci_spec::image::Digest>()
            .map_err(|e| TeamError::Io(format!("a digest: {e}")))
    };
    let mut layer = Descriptor::new(
        MediaType::Other(SIG_LAYER.into()),
        payload.len() as u64,
        parse(sha256_digest(&payload))?,
    );
    layer.set_annotations(Some(HashMap::from([
        (SIG_ANNOTATION.to_string(), signature),
        (SIGNER_KEY_ANNOTATION.to_string(), key.public().to_pem()),
    ])));
    let subject = Descriptor::new(MediaType::ImageManifest, size, parse(digest.to_string())?);
    let manifest = oci_spec::image::ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .artifact_type(MediaType::Other(SIG_ARTIFACT.into()))
        .config(Descriptor::new(
            MediaType::EmptyJSON,
            2,
            parse(sha256_digest(&empty))?,
        ))
        .layers(vec![layer])
        .subject(subject)
        .build()
        .map_err(|e| TeamError::Io(format!("building the signature manifest: {e}")))?;
    let bytes = serde_json::to_vec(&manifest)
        .map_err(|e| TeamError::Io(format!("writing the signature manifest: {e}")))?;
    client.put_manifest(&signature_tag(digest), &bytes).await
}
