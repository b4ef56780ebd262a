//! `oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]`: where a tool is published, parsed once with the
//! distribution spec's rules for repository names, tags and digests.

use super::TeamError;

/// A parsed artifact reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host` or `host:port`, lowercase.
    pub registry: String,
    /// `team/tools`.
    pub repository: String,
    /// The tag, when one was given.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`, when one was given.
    pub digest: Option<String>,
}

/// The tag a push uses when none is given.
pub const DEFAULT_TAG: &str = "latest";

fn bad(given: &str, why: &str) -> TeamError {
    TeamError::Reference(format!(
        "{given:?} is not a registry reference ({why}); write oci://HOST[:PORT]/REPO[:TAG] or \
         oci://HOST[:PORT]/REPO@sha256:DIGEST"
    ))
}

/// Whether `s` is a repository path component: `[a-z0-9]+([._-][a-z0-9]+)*`.
fn component_ok(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return false;
    }
    let mut prev_sep = false;
    for &c in b {
        let sep = matches!(c, b'.' | b'_' | b'-');
        if !(sep || c.is_ascii_lowercase() || c.is_ascii_digit()) {
            return false;
        }
        // `__` is allowed by the spec; other doubled separators are not.
        if sep && prev_sep && c != b'_' {
            return false;
        }
        prev_sep = sep;
    }
    true
}

/// Whether `s` is a tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn tag_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// Whether `s` is `sha256:` and 64 lowercase hex digits.
pub fn digest_ok(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    })
}

impl Reference {
    /// Parse `oci://…`.
    pub fn parse(given: &str) -> Result<Reference, TeamError> {
        let rest = given
            .strip_prefix("oci://")
            .ok_or_else(|| bad(given, "it must start with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad(given, "there is no repository after the host"))?;
        let registry = registry.to_ascii_lowercase();
        let host_ok = !registry.is_empty()
            && registry.bytes().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !host_ok {
            return Err(bad(
                given,
                "the host is not a host name with an optional port",
            ));
        }
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => {
                if !digest_ok(d) {
                    return Err(bad(
                        given,
                        "the digest is not sha256: and 64 lowercase hex digits",
                    ));
                }
                (p, Some(d.to_string()))
            }
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => {
                if !tag_ok(t) {
                    return Err(bad(
                        given,
                        "the tag may hold only letters, digits, . _ and -",
                    ));
                }
                (r, Some(t.to_string()))
            }
            _ => (path, None),
        };
        if repository.len() > 255 || !repository.split('/').all(component_ok) {
            return Err(bad(
                given,
                "the repository is lowercase letters, digits and . _ - between slashes",
            ));
        }
        Ok(Reference {
            registry,
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The host name without the port (and without IPv6 brackets).
    pub fn host(&self) -> &str {
        let r = self.registry.as_str();
        if let Some(inner) = r.strip_prefix('[') {
            return inner.split(']').next().unwrap_or(inner);
        }
        r.rsplit_once(':').map(|(h, _)| h).unwrap_or(r)
    }

    /// Whether the registry is this machine's loopback (plain HTTP is used there by default).
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|a| a.is_loopback())
    }

    /// What a manifest is fetched by: the digest when given, else the tag, else `latest`.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or(DEFAULT_TAG)
    }

    /// `host/repo`, as a signature names what it signs (cosign's `docker-reference`).
    pub fn docker_reference(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `oci://host/repo@digest`.
    pub fn pinned(&self, digest: &str) -> String {
        format!("oci://{}/{}@{digest}", self.registry, self.repository)
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn references_parse_with_the_spec_rules() {
        let r = Reference::parse("oci://127.0.0.1:5000/team/tools:v2").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/tools");
        assert_eq!(r.tag.as_deref(), Some("v2"));
        assert_eq!(r.host(), "127.0.0.1");
        assert!(r.is_loopback());
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://ghcr.io/acme/weather@{d}")).unwrap();
        assert_eq!(r.manifest_ref(), d);
        assert!(!r.is_loopback());
        assert_eq!(
            Reference::parse("oci://[::1]:5000/x").unwrap().host(),
            "::1"
        );
        for bad in [
            "ghcr.io/acme/x",
            "oci://ghcr.io",
            "oci://ghcr.io/Acme/x",
            "oci://ghcr.io/acme/../x",
            "oci://ghcr.io/acme/x:../y",
            "oci://ghcr.io/acme/x@sha256:abc",
            "oci://gh cr.io/acme/x",
            "oci://ghcr.io//x",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad} parsed");
        }
    }
}
