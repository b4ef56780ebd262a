//! The artifact a tool is published as: an OCI image manifest (image-spec 1.1) with its own
//! `artifactType`, a config blob holding what verification recorded ([`ToolRecord`]), and the
//! tool's code as its one layer. [`Artifact::check`] reads one back as hostile input: sizes
//! bounded, media types exact, the tool's name through the tool-name rule, the hosts it says its
//! publisher allowed through the allowlist's rule, the layer against the code hash the config
//! names. A registry's words quoted in a refusal are escaped ([`quoted`]).

use super::TeamError;
use crate::verify::{Obligation, Verdict};
use crate::version::{FunctionSpec, PackageSet};
use autotool_policy::names::{KeyName, ToolName};
use oci_spec::image::{Descriptor, ImageManifest, MediaType};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The manifest's `artifactType`.
pub const ARTIFACT_TYPE: &str = "application/vnd.autotool.tool.v1";
/// The config blob's media type.
pub const CONFIG_TYPE: &str = "application/vnd.autotool.tool.config.v1+json";
/// The code layer's media type.
pub const CODE_TYPE: &str = "application/vnd.autotool.tool.code.v1.python";
/// The annotation naming the tool (also in the config, which is what counts).
pub const NAME_ANNOTATION: &str = "dev.autotool.tool.name";
/// The most bytes of a config blob read.
pub const CONFIG_LIMIT: u64 = 1 << 20;
/// The longest description a pulled tool may carry, in bytes (it reaches every host's list).
pub const DESCRIPTION_LIMIT: usize = 8 << 10;

/// What verification recorded of a version: the config blob. Names only, never values; no
/// approvals, grants, allowlists or health (those are earned on each machine).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The format's version: 1.
    pub schema: u32,
    pub name: String,
    /// The version number on the publisher's machine (informative).
    pub version: u32,
    /// sha256 of the code layer, lowercase hex: what the layer must be.
    pub code_hash: String,
    /// The pin over code hash, description and schemas ([`crate::pin`]).
    pub pin: String,
    pub description: String,
    pub functions: Vec<FunctionSpec>,
    /// The keys it declares (`REQUIRED_ENV`).
    pub required_env: Vec<KeyName>,
    /// For each declared key, the hosts the publisher allowed it to be sent to: shown to the
    /// user who pulls it, never applied there.
    #[serde(default)]
    pub key_hosts: BTreeMap<KeyName, Vec<String>>,
    /// The packages it declares, resolved and locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<PackageSet>,
    /// What its trusted versions met, owed by every version pulled after it.
    #[serde(default)]
    pub baseline: Vec<Obligation>,
    /// What verification found of each function.
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
    /// The tool SDK it was verified on (`mcp==2.3.0`).
    pub runtime_mcp: String,
}

/// A manifest read back and checked, with its parts.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub digest: String,
    pub record: ToolRecord,
    pub name: ToolName,
    pub code: String,
}

fn refused(why: String) -> TeamError {
    TeamError::Refused(why)
}

/// Build the manifest for a config blob and a code layer (both already uploaded).
pub fn manifest(
    config: &[u8],
    code: &[u8],
    record: &ToolRecord,
    source: &str,
    created: &str,
) -> Result<Vec<u8>, TeamError> {
    let digest = |b: &[u8]| {
        super::client::sha256_digest(b)
            .parse::<oci_spec::image::Digest>()
            .map_err(|e| TeamError::Io(format!("a digest: {e}")))
    };
    let config = Descriptor::new(
        MediaType::Other(CONFIG_TYPE.into()),
        config.len() as u64,
        digest(config)?,
    );
    let mut layer = Descriptor::new(
        MediaType::Other(CODE_TYPE.into()),
        code.len() as u64,
        digest(code)?,
    );
    layer.set_annotations(Some(HashMap::from([(
        "org.opencontainers.image.title".to_string(),
        "tool.py".to_string(),
    )])));
    let annotations = HashMap::from([
        (
            "org.opencontainers.image.created".to_string(),
            created.to_string(),
        ),
        (
            "org.opencontainers.image.source".to_string(),
            source.to_string(),
        ),
        (
            "org.opencontainers.image.description".to_string(),
            record.description.chars().take(1000).collect(),
        ),
        (NAME_ANNOTATION.to_string(), record.name.clone()),
    ]);
    let manifest = oci_spec::image::ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .artifact_type(MediaType::Other(ARTIFACT_TYPE.into()))
        .config(config)
        .layers(vec![layer])
        .annotations(annotations)
        .build()
        .map_err(|e| TeamError::Io(format!("building the manifest: {e}")))?;
    canonical_json(&manifest)
}

/// `value` as JSON with every object's keys in order: the same value is the same bytes, so the
/// same digest (annotations are a `HashMap`, written in an order that changes every run).
pub fn canonical_json(value: &impl Serialize) -> Result<Vec<u8>, TeamError> {
    // `serde_json::Value` keeps objects in a `BTreeMap` (no `preserve_order`): sorted.
    serde_json::to_value(value)
        .and_then(|v| serde_json::to_vec(&v))
        .map_err(|e| TeamError::Io(format!("writing the manifest: {e}")))
}

/// The manifest's parts, checked: (config descriptor, code descriptor).
pub fn parse_manifest(
    bytes: &[u8],
    code_limit: u64,
) -> Result<(Descriptor, Descriptor, ImageManifest), TeamError> {
    let manifest: ImageManifest = serde_json::from_slice(bytes).map_err(|e| {
        refused(format!(
            "the registry's answer is not an OCI image manifest ({e}); is this an autotool tool?"
        ))
    })?;
    if manifest.schema_version() != 2 {
        return Err(refused("the manifest's schemaVersion is not 2".into()));
    }
    if let Some(m) = manifest.media_type()
        && m.to_string() != super::client::OCI_MANIFEST
    {
        return Err(refused(format!(
            "the manifest's mediaType is {}, not an OCI image manifest",
            quoted(m.as_ref())
        )));
    }
    let artifact_type = manifest.artifact_type().as_ref().map(|m| m.to_string());
    if artifact_type.as_deref() != Some(ARTIFACT_TYPE) {
        return Err(refused(format!(
            "the artifact's type is {}, not {ARTIFACT_TYPE}: it is not an autotool tool",
            artifact_type.as_deref().map_or("(none)".into(), quoted)
        )));
    }
    let config = manifest.config().clone();
    if config.media_type().to_string() != CONFIG_TYPE {
        return Err(refused(format!(
            "the artifact's config is of type {}, not {CONFIG_TYPE}",
            quoted(config.media_type().as_ref())
        )));
    }
    if config.size() > CONFIG_LIMIT {
        return Err(refused(format!(
            "the artifact's config is {} bytes, more than the {CONFIG_LIMIT} bytes autotool \
             accepts",
            config.size()
        )));
    }
    let [layer] = manifest.layers().as_slice() else {
        return Err(refused(format!(
            "the artifact has {} layers; an autotool tool has exactly one, its code",
            manifest.layers().len()
        )));
    };
    if layer.media_type().to_string() != CODE_TYPE {
        return Err(refused(format!(
            "the artifact's layer is of type {}, not {CODE_TYPE}",
            quoted(layer.media_type().as_ref())
        )));
    }
    if layer.size() > code_limit {
        return Err(refused(format!(
            "the tool's code is {} bytes, more than the {code_limit} bytes autotool accepts (the \
             `max_code_bytes` setting)",
            layer.size()
        )));
    }
    Ok((config, layer.clone(), manifest))
}

/// The config blob read back: its name through the tool-name rule.
pub fn parse_record(bytes: &[u8]) -> Result<(ToolRecord, ToolName), TeamError> {
    let mut record: ToolRecord = serde_json::from_slice(bytes)
        .map_err(|e| refused(format!("the artifact's config does not parse ({e})")))?;
    if record.schema != 1 {
        return Err(refused(format!(
            "the artifact's config is format {}, which this autotool does not read (update it)",
            record.schema
        )));
    }
    if record.description.len() > DESCRIPTION_LIMIT {
        return Err(refused(format!(
            "the tool's description is {} bytes, more than the {DESCRIPTION_LIMIT} bytes autotool \
             accepts",
            record.description.len()
        )));
    }
    record.key_hosts = canonical_hosts(&record.key_hosts)?;
    let name = ToolName::parse(&record.name).map_err(|e| {
        refused(format!(
            "the artifact names its tool {}, which is not a tool name: {e}",
            quoted(&record.name)
        ))
    })?;
    Ok((record, name))
}

/// The most hosts a carried allowlist may name, per key.
pub const MAX_KEY_HOSTS: usize = 64;

/// A registry's text quoted in a message: on one line, escaped ([`crate::terminal`]), cut.
pub fn quoted(s: &str) -> String {
    let cut: String = s.chars().take(120).collect();
    let more = if cut.len() < s.len() { "…" } else { "" };
    format!("\"{}{more}\"", crate::terminal::escape_line(&cut))
}

/// The hosts a record says its publisher allowed each key, read by the allowlist's own rule
/// ([`autotool_policy::hosts::AllowRule`]) and spelt canonically: they are shown to the user and
/// suggested as `autotool keys allow` arguments, so an entry that is not a host (a shell tail,
/// an escape sequence, a URL) refuses the artifact.
fn canonical_hosts(
    carried: &BTreeMap<KeyName, Vec<String>>,
) -> Result<BTreeMap<KeyName, Vec<String>>, TeamError> {
    use autotool_policy::hosts::AllowRule;
    let mut out = BTreeMap::new();
    for (key, hosts) in carried {
        if hosts.len() > MAX_KEY_HOSTS {
            return Err(refused(format!(
                "the artifact's record allows {key} {} hosts, more than the {MAX_KEY_HOSTS} \
                 autotool reads",
                hosts.len()
            )));
        }
        let mut canonical = Vec::with_capacity(hosts.len());
        for entry in hosts {
            let rule = AllowRule::parse(entry).map_err(|e| {
                let why = e.to_string();
                let why = why
                    .strip_prefix(&format!("{entry:?}: "))
                    .unwrap_or(why.as_str());
                refused(format!(
                    "the artifact's record allows {key} to reach {}, which is not a host \
                     `autotool keys allow` takes ({}): refused",
                    quoted(entry),
                    crate::terminal::escape_line(why)
                ))
            })?;
            canonical.push(rule.to_string());
        }
        out.insert(key.clone(), canonical);
    }
    Ok(out)
}

/// The code layer against the config: its sha256 must be the config's code hash.
pub fn check_code(record: &ToolRecord, code: Vec<u8>) -> Result<String, TeamError> {
    let hash = crate::version::code_hash(&code);
    if hash != record.code_hash {
        return Err(refused(format!(
            "the artifact's code (sha256 {hash}) is not the code its config describes (sha256 \
             {}): refused",
            record.code_hash
        )));
    }
    String::from_utf8(code).map_err(|_| refused("the tool's code is not UTF-8 text".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record() -> serde_json::Value {
        serde_json::json!({
            "schema": 1, "name": "weather", "version": 1, "code_hash": "ab", "pin": "",
            "description": "d", "functions": [], "required_env": [], "runtime_mcp": "mcp==2.3.0",
        })
    }

    #[test]
    fn the_same_version_is_the_same_manifest_bytes() {
        let (r, _) = parse_record(&serde_json::to_vec(&record()).unwrap()).unwrap();
        let build = || {
            manifest(
                b"{}",
                b"print(1)\n",
                &r,
                "oci://h/r:t",
                "2026-12-01T00:00:00Z",
            )
        };
        let first = build().unwrap();
        // Each map of annotations has its own random order: twenty builds, one set of bytes.
        for _ in 0..20 {
            assert_eq!(build().unwrap(), first);
        }
        let text = String::from_utf8(first).unwrap();
        let keys: Vec<usize> = [
            "dev.autotool.tool.name",
            "org.opencontainers.image.created",
            "org.opencontainers.image.description",
            "org.opencontainers.image.source",
        ]
        .iter()
        .map(|k| text.find(k).unwrap())
        .collect();
        assert!(keys.is_sorted(), "{text}");
        // Control: another time is another manifest.
        let later = manifest(
            b"{}",
            b"print(1)\n",
            &r,
            "oci://h/r:t",
            "2026-12-02T00:00:00Z",
        );
        assert_ne!(later.unwrap(), text.into_bytes());
    }

    #[test]
    fn records_are_read_as_hostile_input() {
        let ok = serde_json::to_vec(&record()).unwrap();
        assert_eq!(parse_record(&ok).unwrap().1.as_str(), "weather");
        for (field, value, says) in [
            ("name", serde_json::json!("../x"), "is not a tool name"),
            ("name", serde_json::json!("a/b"), "is not a tool name"),
            ("schema", serde_json::json!(2), "format 2"),
            (
                "description",
                serde_json::json!("x".repeat(DESCRIPTION_LIMIT + 1)),
                "description is",
            ),
        ] {
            let mut r = record();
            r[field] = value;
            let e = parse_record(&serde_json::to_vec(&r).unwrap())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{field}: {e}");
        }
        assert!(parse_record(b"not json").is_err());
        let code = b"print(1)\n".to_vec();
        let (mut r, _) = parse_record(&ok).unwrap();
        assert!(
            check_code(&r, code.clone()).is_err(),
            "control: another hash"
        );
        r.code_hash = crate::version::code_hash(&code);
        assert_eq!(check_code(&r, code).unwrap(), "print(1)\n");
    }

    #[test]
    fn carried_hosts_are_read_by_the_allowlist_rule() {
        let with_hosts = |hosts: serde_json::Value| {
            let mut r = record();
            r["required_env"] = serde_json::json!(["API_KEY"]);
            r["key_hosts"] = serde_json::json!({ "API_KEY": hosts });
            parse_record(&serde_json::to_vec(&r).unwrap())
        };
        let (r, _) = with_hosts(serde_json::json!([
            "API.X.com.",
            "*.x.com",
            "api.x.com:8443"
        ]))
        .unwrap();
        assert_eq!(
            r.key_hosts.values().next().unwrap(),
            &["api.x.com", "*.x.com", "api.x.com:8443"]
        );
        for entry in [
            "evil.example; touch /tmp/x",
            "api.x.com\u{1b}[8m evil.example",
            "https://api.x.com/",
            "$(id)",
            "*.com",
            "",
        ] {
            let e = with_hosts(serde_json::json!(["api.x.com", entry]))
                .unwrap_err()
                .to_string();
            assert!(e.contains("which is not a host"), "{entry:?}: {e}");
            assert!(!e.contains('\u{1b}'), "{e}");
            assert!(
                e.contains(&format!("\"{}\"", crate::terminal::escape_line(entry))),
                "names the entry: {e}"
            );
        }
    }

    #[test]
    fn a_registrys_words_in_a_refusal_drive_no_terminal() {
        let (r, _) = parse_record(&serde_json::to_vec(&record()).unwrap()).unwrap();
        let built = manifest(b"{}", b"code", &r, "oci://h/r:t", "2026-12-02T00:00:00Z").unwrap();
        let hostile = "application/x\u{1b}]0;pwned\u{7}\u{1b}[2K\u{202e}";
        for field in ["artifactType", "mediaType"] {
            let mut v: serde_json::Value = serde_json::from_slice(&built).unwrap();
            v[field] = serde_json::json!(hostile);
            let e = parse_manifest(&serde_json::to_vec(&v).unwrap(), 1 << 20)
                .unwrap_err()
                .to_string();
            assert!(e.contains(r"application/x\u001b]0;pwned"), "{field}: {e}");
            assert!(!e.chars().any(crate::terminal::is_unsafe), "{field}: {e}");
        }
        let mut v: serde_json::Value = serde_json::from_slice(&built).unwrap();
        v["layers"][0]["mediaType"] = serde_json::json!(hostile);
        let e = parse_manifest(&serde_json::to_vec(&v).unwrap(), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(!e.chars().any(crate::terminal::is_unsafe), "{e}");
        // Control: the field itself carries the sequences that were escaped.
        assert!(hostile.chars().any(crate::terminal::is_unsafe));
    }

    #[test]
    fn manifests_are_checked_before_anything_they_name_is_fetched() {
        let (r, _) = parse_record(&serde_json::to_vec(&record()).unwrap()).unwrap();
        let built = manifest(b"{}", b"code", &r, "oci://h/r:t", "2026-12-02T00:00:00Z").unwrap();
        let (config, layer, _) = parse_manifest(&built, 1 << 20).unwrap();
        assert_eq!(config.size(), 2);
        assert_eq!(layer.size(), 4);
        let too_small = parse_manifest(&built, 3).unwrap_err().to_string();
        assert!(too_small.contains("more than the 3 bytes"), "{too_small}");
        let mut v: serde_json::Value = serde_json::from_slice(&built).unwrap();
        v["artifactType"] = serde_json::json!("application/x-other");
        let e = parse_manifest(&serde_json::to_vec(&v).unwrap(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not an autotool tool"), "{e}");
        let mut v: serde_json::Value = serde_json::from_slice(&built).unwrap();
        let layer = v["layers"][0].clone();
        v["layers"] = serde_json::json!([layer.clone(), layer]);
        let e = parse_manifest(&serde_json::to_vec(&v).unwrap(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("2 layers"), "{e}");
        assert!(parse_manifest(b"<html>", 1 << 20).is_err());
    }
}
