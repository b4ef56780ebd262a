//! `autotool tools push NAME oci://…`: the tool's current version, as verification recorded
//! it, published as an artifact ([`super::artifact`]) and signed with this machine's key; the
//! signature stored beside it under cosign's tag (`sha256-<hex>.sig`) with the artifact as its
//! `subject`, so registries with the OCI 1.1 referrers API list it too. The order is the
//! manifest by digest, its signature, then the tag: the tag never names an unsigned digest. The
//! artifact is reproducible (its `created` is when the version was made, its JSON written with
//! keys in order), so pushing the same version again changes nothing. Before anything leaves,
//! everything pushed (record, code, manifest, signature) is searched for the values of this
//! home's keys ([`leak`]: every encoding the redactor knows, and hex and base64 at every
//! alignment): a tool whose artifact would carry one is not pushed.

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

/// Build the record of `name`'s current version, with its code and when the version was made
/// (unix ms: the artifact's `created`, so the same version pushed again is the same artifact).
pub fn record(
    home: &Home,
    registry: &Registry,
    name: &str,
) -> Result<(ToolRecord, Vec<u8>, i64), TeamError> {
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
    Ok((record, code, v.created_at))
}

/// Refuse `blobs` if any holds a value of this home's keys, in any reading [`leak`] searches.
pub fn check_no_secrets(home: &Home, blobs: &[(&str, &[u8])]) -> Result<(), TeamError> {
    let (values, _) = KeyStore::open(home).known_values();
    if values.is_empty() {
        return Ok(());
    }
    let pairs: Vec<(&str, &[u8])> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v.expose()))
        .collect();
    match leak(&pairs, blobs)? {
        None => Ok(()),
        Some((what, reading)) => Err(TeamError::Tool(format!(
            "the {what} would carry {reading}; nothing was pushed (a tool's code and record must \
             hold key names only: a description or constant computed from a key's value is the \
             value, readable by every teammate who pulls it)"
        ))),
    }
}

/// The fewest characters of a value's base64 searched for: fewer would turn up by chance in a
/// large file. Every alignment of a value of 7 bytes or more has at least this many.
pub const MIN_ENCODED_LEN: usize = 8;

/// The readings of each value searched for besides the value itself (which the redactor finds
/// raw, URL-encoded and JSON-escaped): its hex (lower case; [`leak`] searches text lowered for
/// it, so any case is found), and its base64, standard and URL-safe, at each of the three
/// alignments it can have inside a longer base64 string (only the characters the value alone
/// decides: the first and last may mix in its neighbours' bits; at least [`MIN_ENCODED_LEN`]).
/// Each as `(what, pattern)`, `what` naming the key and the reading.
pub fn encoded_readings(name: &str, value: &[u8]) -> Vec<(String, Vec<u8>)> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    let mut out = vec![(format!("the hex of {name}'s value"), hex.into_bytes())];
    for offset in 0..3usize {
        let mut shifted = vec![0u8; offset];
        shifted.extend_from_slice(value);
        // Character j of the encoding holds bits 6j..6j+6: the value's own characters are those
        // wholly inside its bits, 8*offset..8*(offset+len).
        let (start, end) = ((8 * offset).div_ceil(6), 8 * (offset + value.len()) / 6);
        for (alphabet, engine) in [
            ("base64", &STANDARD_NO_PAD),
            ("base64url", &URL_SAFE_NO_PAD),
        ] {
            let encoded = engine.encode(&shifted);
            if let Some(core) = encoded
                .as_bytes()
                .get(start..end)
                .filter(|c| c.len() >= MIN_ENCODED_LEN)
            {
                out.push((format!("the {alphabet} of {name}'s value"), core.to_vec()));
            }
        }
    }
    out.dedup_by(|a, b| a.1 == b.1);
    out
}

/// Which of `blobs` holds one of `values` (name, value), and in what reading: raw, URL-encoded
/// or JSON-escaped (the redactor's readings), hex in any case, base64 or base64url at any
/// alignment ([`encoded_readings`]); each searched in the blob as it is and with white space and
/// quotes taken out (base64 wrapped over lines, a string split in pieces); a blob that is JSON
/// (the record, the manifest) is searched in its strings too, escapes decoded.
pub fn leak<'b>(
    values: &[(&str, &[u8])],
    blobs: &[(&'b str, &[u8])],
) -> Result<Option<(&'b str, String)>, TeamError> {
    let mut exact: Vec<(String, Vec<u8>)> = Vec::new();
    let mut hex: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, value) in values {
        exact.push((format!("the value of {name}"), value.to_vec()));
        for (what, pattern) in encoded_readings(name, value) {
            if what.starts_with("the hex") {
                hex.push((what, pattern));
            } else {
                exact.push((what, pattern));
            }
        }
    }
    let build = |pairs: &[(String, Vec<u8>)]| {
        crate::redact::Redactor::new(pairs)
            .map_err(|e| TeamError::Io(format!("building the redactor: {e}")))
    };
    let (exact, hex) = (build(&exact)?, build(&hex)?);
    for (what, bytes) in blobs {
        let mut views = vec![bytes.to_vec()];
        if let Ok(json) = serde_json::from_slice::<serde_json::Value>(bytes) {
            let mut strings = Vec::new();
            json_strings(&json, &mut strings);
            views.push(strings.join("\n").into_bytes());
        }
        let stripped: Vec<Vec<u8>> = views
            .iter()
            .map(|v| {
                v.iter()
                    .copied()
                    .filter(|b| !b.is_ascii_whitespace() && *b != b'"' && *b != b'\'')
                    .collect()
            })
            .collect();
        views.extend(stripped);
        for view in &views {
            if let Some(found) = exact
                .found_in(view)
                .or_else(|| hex.found_in(&view.to_ascii_lowercase()))
            {
                return Ok(Some((*what, found.to_string())));
            }
        }
    }
    Ok(None)
}

/// Every string of `value`, object keys included.
fn json_strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                json_strings(v, out);
            }
        }
        _ => {}
    }
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
    let (record, code, made_at) = record(home, &registry, name)?;
    let key = Trust::of(home).signing_key()?;
    let config = serde_json::to_vec_pretty(&record)
        .map_err(|e| TeamError::Io(format!("writing the record: {e}")))?;
    // When the version was made, not when it is pushed: the same version pushed again is the
    // same digest, and followers see no new release.
    let created = crate::ledger::format_ms(made_at);
    // The repository, not the tag: the same version pushed under two tags is one digest.
    let source = format!("oci://{}/{}", reference.registry, reference.repository);
    let manifest = artifact::manifest(&config, &code, &record, &source, &created)?;
    // Everything that leaves, searched before the first byte does.
    let payload = sign::payload(&reference.docker_reference(), &sha256_digest(&manifest));
    check_no_secrets(
        home,
        &[
            ("tool's record", &config),
            ("tool's code", &code),
            ("artifact's manifest", &manifest),
            ("signature", &payload),
        ],
    )?;
    let credentials = super::auth::credentials_for(&reference.registry)?;
    let client = Client::new(reference, plain_http, credentials, true)?;
    let tag = reference.tag.clone().unwrap_or_else(|| DEFAULT_TAG.into());
    client
        .push_blob(&config, "uploading the tool's record")
        .await?;
    client.push_blob(&code, "uploading the tool's code").await?;
    // Stored by digest, signed, and only then named by the tag: a follower that finds the tag
    // moved always finds its signature beside it.
    let digest = client
        .put_manifest(&sha256_digest(&manifest), &manifest)
        .await?;
    sign_manifest(&client, reference, &key, &digest, manifest.len() as u64).await?;
    client.put_manifest(&tag, &manifest).await?;
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
    let bytes = artifact::canonical_json(&manifest)?;
    client.put_manifest(&signature_tag(digest), &bytes).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

    const KEY: &str = "sk_live_51HxYzAbCdEf0123456789?>~";
    const OTHER: &str = "pk_test_9zQ8yX7wV6uT5sR4qP3o?>~";

    fn found(blob: &[u8]) -> Option<String> {
        leak(&[("STRIPE_KEY", KEY.as_bytes())], &[("tool's code", blob)])
            .unwrap()
            .map(|(_, reading)| reading)
    }

    /// `value` inside a longer run of bytes, `offset` bytes in: its base64 is not the base64 of
    /// the value alone.
    fn embedded(value: &str, offset: usize) -> Vec<u8> {
        let mut bytes = b"\x00\xfb\xff"[..offset].to_vec();
        bytes.extend_from_slice(value.as_bytes());
        bytes.extend_from_slice(b"\xfe\xff tail");
        bytes
    }

    #[test]
    fn base64_of_a_key_at_every_alignment_is_not_pushed() {
        for offset in 0..3 {
            let std = STANDARD.encode(embedded(KEY, offset));
            let url = URL_SAFE_NO_PAD.encode(embedded(KEY, offset));
            assert!(
                !std.contains(&STANDARD.encode(KEY)[..8]) || offset == 0,
                "the encoding at {offset} is not the value's own"
            );
            let code = format!("TOKEN = \"{std}\"\n");
            // Control: the redactor's readings alone (the check before) let it go.
            let before = crate::redact::Redactor::new(&[("STRIPE_KEY", KEY)]).unwrap();
            assert_eq!(before.found_in(code.as_bytes()), None, "{offset}");
            let reading = found(code.as_bytes()).unwrap_or_default();
            assert!(
                reading.contains("base64 of STRIPE_KEY"),
                "{offset}: {reading}"
            );
            let code = format!("TOKEN = '{url}'\n");
            let reading = found(code.as_bytes()).unwrap_or_default();
            assert!(reading.contains("base64"), "{offset} url-safe: {reading}");
            // Control: another value in the same place goes.
            let other = format!("TOKEN = \"{}\"\n", STANDARD.encode(embedded(OTHER, offset)));
            assert_eq!(found(other.as_bytes()), None, "{offset}");
        }
        // Wrapped over lines as `base64.encodebytes` writes it, or split into pieces.
        let long = STANDARD.encode([b"x".repeat(70).as_slice(), KEY.as_bytes()].concat());
        let wrapped = format!("B = \"\"\"{}\n{}\"\"\"", &long[..76], &long[76..]);
        assert!(found(wrapped.as_bytes()).is_some(), "{wrapped}");
        let split = format!("B = (\"{}\"\n    \"{}\")", &long[..80], &long[80..]);
        assert!(found(split.as_bytes()).is_some(), "{split}");
    }

    #[test]
    fn hex_of_a_key_in_any_case_is_not_pushed() {
        let hex: String = KEY.bytes().map(|b| format!("{b:02x}")).collect();
        for shown in [
            hex.clone(),
            hex.to_ascii_uppercase(),
            format!("{}{}", &hex[..20], hex[20..].to_ascii_uppercase()),
        ] {
            let code = format!("SEED = bytes.fromhex(\"ab{shown}cd\")");
            let before = crate::redact::Redactor::new(&[("STRIPE_KEY", KEY)]).unwrap();
            assert_eq!(before.found_in(code.as_bytes()), None, "control: {shown}");
            let reading = found(code.as_bytes()).unwrap_or_default();
            assert!(reading.contains("hex of STRIPE_KEY"), "{shown}: {reading}");
        }
        let other: String = OTHER.bytes().map(|b| format!("{b:02X}")).collect();
        assert_eq!(found(format!("SEED = \"{other}\"").as_bytes()), None);
    }

    #[test]
    fn a_record_whose_description_encodes_a_key_is_not_pushed() {
        // A description computed at import: the base64 of the key, written into the record
        // (JSON, `/` possibly escaped); the raw, URL and JSON forms are found as before.
        let b64 = STANDARD.encode(KEY).replace('/', "\\/");
        for description in [
            format!("Weather. Build tag {b64}"),
            format!("Weather {KEY}"),
            format!("Weather {}", KEY.replace('?', "%3F").replace('~', "%7E")),
        ] {
            let record = format!("{{\"description\": \"{description}\", \"name\": \"w\"}}");
            let e = leak(
                &[("STRIPE_KEY", KEY.as_bytes())],
                &[
                    ("tool's code", b"print(1)"),
                    ("tool's record", record.as_bytes()),
                ],
            )
            .unwrap();
            assert_eq!(e.map(|(what, _)| what), Some("tool's record"), "{record}");
        }
        let record = format!(
            "{{\"description\": \"Weather. Build tag {}\"}}",
            STANDARD.encode(OTHER)
        );
        assert_eq!(
            leak(
                &[("STRIPE_KEY", KEY.as_bytes())],
                &[("tool's record", record.as_bytes())]
            )
            .unwrap(),
            None,
            "control: another value's base64 is pushed"
        );
    }

    #[test]
    fn every_alignment_has_a_long_enough_core() {
        for len in 7..40 {
            let value: Vec<u8> = (0..len).map(|i| b'a' + (i * 7 % 26) as u8).collect();
            let base64s = encoded_readings("K", &value)
                .into_iter()
                .filter(|(what, _)| what.contains("base64"))
                .count();
            // Three alignments; std and url-safe differ only when the core has + / - _.
            assert!(base64s >= 3, "{len}: {base64s}");
        }
    }
}
