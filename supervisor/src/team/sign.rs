//! Signatures in cosign's key-based format, so `cosign verify --key` checks them too:
//! an ECDSA P-256 / SHA-256 signature (ASN.1 DER, base64) over cosign's "simple signing"
//! payload, a JSON document naming the signed manifest's digest and repository:
//!
//! ```text
//! {"critical":{"identity":{"docker-reference":"HOST/REPO"},
//!              "image":{"docker-manifest-digest":"sha256:…"},
//!              "type":"cosign container image signature"},"optional":null}
//! ```
//!
//! Public keys travel as PEM `PUBLIC KEY` blocks (SubjectPublicKeyInfo), as cosign writes them.

use super::TeamError;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde::Deserialize;

/// cosign's `critical.type`.
pub const COSIGN_TYPE: &str = "cosign container image signature";

/// The DER prefix of a P-256 SubjectPublicKeyInfo: SEQUENCE, AlgorithmIdentifier
/// (id-ecPublicKey, prime256v1), BIT STRING header; the 65-byte uncompressed point follows.
const SPKI_P256_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// This machine's signing key.
pub struct SigningKey {
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("public", &self.public().fingerprint())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A new key, as PKCS#8 bytes (to be stored) and the key.
    pub fn generate() -> Result<(Vec<u8>, SigningKey), TeamError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| TeamError::Signature("could not draw a new signing key".into()))?;
        let bytes = pkcs8.as_ref().to_vec();
        let key = SigningKey::from_pkcs8(&bytes)?;
        Ok((bytes, key))
    }

    /// The key stored as PKCS#8.
    pub fn from_pkcs8(bytes: &[u8]) -> Result<SigningKey, TeamError> {
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            bytes,
            &SystemRandom::new(),
        )
        .map_err(|_| {
            TeamError::Signature(
                "the stored signing key is not an ECDSA P-256 key; make a new one with \
                 `autotool trust init --force`"
                    .into(),
            )
        })?;
        Ok(SigningKey { pair })
    }

    /// Its public half.
    pub fn public(&self) -> PublicKey {
        PublicKey {
            point: self.pair.public_key().as_ref().to_vec(),
        }
    }

    /// The base64 DER signature of `payload`.
    pub fn sign(&self, payload: &[u8]) -> Result<String, TeamError> {
        let sig = self
            .pair
            .sign(&SystemRandom::new(), payload)
            .map_err(|_| TeamError::Signature("signing failed".into()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(sig.as_ref()))
    }
}

/// A P-256 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point (65 bytes).
    point: Vec<u8>,
}

impl PublicKey {
    /// Parse a PEM `PUBLIC KEY` block holding a P-256 key.
    pub fn from_pem(text: &str) -> Result<PublicKey, TeamError> {
        let bad = |why: &str| {
            TeamError::Trust(format!(
                "not a publisher's key ({why}); it is the PEM block `autotool trust show` (or \
                 `cosign generate-key-pair`) prints, an ECDSA P-256 public key"
            ))
        };
        let body = text
            .split("-----BEGIN PUBLIC KEY-----")
            .nth(1)
            .and_then(|rest| rest.split("-----END PUBLIC KEY-----").next())
            .ok_or_else(|| bad("no BEGIN/END PUBLIC KEY block"))?;
        let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| bad("the block is not base64"))?;
        let point = der
            .strip_prefix(&SPKI_P256_PREFIX[..])
            .filter(|p| p.len() == 65 && p[0] == 4)
            .ok_or_else(|| bad("it is not a P-256 key"))?;
        Ok(PublicKey {
            point: point.to_vec(),
        })
    }

    fn spki(&self) -> Vec<u8> {
        let mut der = SPKI_P256_PREFIX.to_vec();
        der.extend_from_slice(&self.point);
        der
    }

    /// The PEM block.
    pub fn to_pem(&self) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(self.spki());
        let mut out = String::from("-----BEGIN PUBLIC KEY-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END PUBLIC KEY-----\n");
        out
    }

    /// `sha256:` of its DER form, shortened: how a key is named in messages.
    pub fn fingerprint(&self) -> String {
        let full = super::client::sha256_digest(&self.spki());
        full[..23].to_string()
    }

    /// Whether `signature` (base64 DER) is this key's signature of `payload`.
    pub fn verifies(&self, payload: &[u8], signature_b64: &str) -> bool {
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(signature_b64.trim()) else {
            return false;
        };
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, &sig)
            .is_ok()
    }
}

/// cosign's simple signing payload for `digest` in `docker_reference` (`host/repo`).
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": COSIGN_TYPE,
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// The digest a payload signs, if it is a cosign payload.
pub fn signed_digest(payload: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Payload {
        critical: Critical,
    }
    #[derive(Deserialize)]
    struct Critical {
        image: Image,
        #[serde(rename = "type")]
        kind: String,
    }
    #[derive(Deserialize)]
    struct Image {
        #[serde(rename = "docker-manifest-digest")]
        digest: String,
    }
    let p: Payload = serde_json::from_slice(payload).ok()?;
    (p.critical.kind == COSIGN_TYPE).then_some(p.critical.image.digest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_signature_verifies_under_its_key_only_and_only_for_its_payload() {
        let (pkcs8, key) = SigningKey::generate().unwrap();
        let again = SigningKey::from_pkcs8(&pkcs8).unwrap();
        assert_eq!(key.public(), again.public());
        let pem = key.public().to_pem();
        let public = PublicKey::from_pem(&pem).unwrap();
        assert_eq!(public, key.public());
        let digest = format!("sha256:{}", "b".repeat(64));
        let p = payload("127.0.0.1:5000/team/tools", &digest);
        assert_eq!(signed_digest(&p).as_deref(), Some(digest.as_str()));
        let sig = key.sign(&p).unwrap();
        assert!(public.verifies(&p, &sig));
        let other = payload(
            "127.0.0.1:5000/team/tools",
            &format!("sha256:{}", "c".repeat(64)),
        );
        assert!(!public.verifies(&other, &sig), "control: another payload");
        let (_, stranger) = SigningKey::generate().unwrap();
        assert!(
            !stranger.public().verifies(&p, &sig),
            "control: another key"
        );
        assert!(
            PublicKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
                .is_err()
        );
    }

    /// A key and signature openssl made (`openssl ecparam -name prime256v1 -genkey`, `openssl
    /// ec -pubout`, `openssl dgst -sha256 -sign` over the payload [`payload`] writes), as cosign's
    /// `cosign.pub` and `cosign sign --key` are: the same SubjectPublicKeyInfo and DER layout.
    #[test]
    fn keys_and_signatures_made_by_openssl_verify() {
        let pem = "-----BEGIN PUBLIC KEY-----\n\
            MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAOF9lhI5TbbbyfVyHWhWn27NhapI\n\
            2FYdHpCBZXHncCtuFEDRp7tO7Pj/6pXFQfUJBz4EGzJB5pksU2JEi4m64A==\n\
            -----END PUBLIC KEY-----\n";
        let sig = "MEYCIQDWsCnBMOxpD5N2hHJo1EV+hqfTYzhEdyi5IkE4JP0igAIhAMdvJ7Y0r6CzSou+ow2CwdhVTGLjSBlnq9b5pYqfS7qq";
        let key = PublicKey::from_pem(pem).unwrap();
        let p = payload(
            "127.0.0.1:5000/team/tools",
            &format!("sha256:{}", "b".repeat(64)),
        );
        assert!(key.verifies(&p, sig));
        let mut tampered = p.clone();
        tampered[20] ^= 1;
        assert!(!key.verifies(&tampered, sig), "control: a changed payload");
    }
}
