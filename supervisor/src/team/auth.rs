//! Registry credentials where `docker`, `oras` and `crane` keep them: `$DOCKER_CONFIG/config.json`
//! (default `~/.docker/config.json`), its `auths` entries (`auth`: base64 `user:password`) and its
//! credential helpers (`credHelpers` per registry, `credsStore` for all): `docker-credential-NAME
//! get` with the registry on stdin, `{"Username", "Secret"}` on stdout. No entry means anonymous.
//! Credentials are held in memory only while a command runs, and never logged.

use super::TeamError;
use base64::Engine as _;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A user name and password (or token) for a registry.
#[derive(Clone, Default)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// The `Authorization: Basic …` value.
    pub fn basic(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

#[derive(Debug, Default, Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// `config.json`'s path: `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`.
pub fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG") {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker").join("config.json"))
}

/// `https://ghcr.io/v1/` → `ghcr.io`: how `auths` keys are compared with a registry.
fn normalise(key: &str) -> String {
    let k = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    k.split('/').next().unwrap_or(k).to_ascii_lowercase()
}

/// The credentials for `registry` (`host[:port]`), or `None` for anonymous access.
pub fn credentials_for(registry: &str) -> Result<Option<Credentials>, TeamError> {
    let Some(path) = docker_config_path() else {
        return Ok(None);
    };
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(TeamError::Auth(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let config: DockerConfig = serde_json::from_slice(&text).map_err(|e| {
        TeamError::Auth(format!(
            "{} is not a Docker config file ({e}); fix it or set DOCKER_CONFIG to another \
             directory",
            path.display()
        ))
    })?;
    lookup(&config, registry)
}

fn lookup(config: &DockerConfig, registry: &str) -> Result<Option<Credentials>, TeamError> {
    let registry = registry.to_ascii_lowercase();
    if let Some((_, helper)) = config
        .cred_helpers
        .iter()
        .find(|(k, _)| normalise(k) == registry)
    {
        return helper_get(helper, &registry);
    }
    if let Some((_, entry)) = config.auths.iter().find(|(k, _)| normalise(k) == registry) {
        if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| {
                    TeamError::Auth(format!(
                        "the `auths` entry for {registry} in the Docker config is not base64 of \
                         user:password; log in again (`docker login {registry}`)"
                    ))
                })?;
            let (username, password) = decoded.split_once(':').ok_or_else(|| {
                TeamError::Auth(format!(
                    "the `auths` entry for {registry} holds no `:` between user and password"
                ))
            })?;
            return Ok(Some(Credentials {
                username: username.into(),
                password: password.into(),
            }));
        }
        if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
            return Ok(Some(Credentials {
                username: u.clone(),
                password: p.clone(),
            }));
        }
    }
    if let Some(store) = &config.creds_store {
        return helper_get(store, &registry);
    }
    Ok(None)
}

/// How long a credential helper may take.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// Ask `docker-credential-NAME get` for `registry`.
fn helper_get(name: &str, registry: &str) -> Result<Option<Credentials>, TeamError> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        return Err(TeamError::Auth(format!(
            "the Docker config names the credential helper {name:?}, which is not a helper name"
        )));
    }
    let program = format!("docker-credential-{name}");
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            TeamError::Auth(format!(
                "the Docker config says to ask {program} for {registry}'s credentials, and it \
                 cannot be started: {e}"
            ))
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(registry.as_bytes());
    }
    let deadline = std::time::Instant::now() + HELPER_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(TeamError::Auth(format!(
                    "{program} get did not answer within {}s",
                    HELPER_TIMEOUT.as_secs()
                )));
            }
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| TeamError::Auth(format!("{program} get: {e}")))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stdout);
        // The helpers' protocol: "credentials not found in native keychain" means anonymous.
        if said.contains("credentials not found") {
            return Ok(None);
        }
        return Err(TeamError::Auth(format!(
            "{program} get failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "Username")]
        username: String,
        #[serde(rename = "Secret")]
        secret: String,
    }
    let answer: Answer = serde_json::from_slice(&out.stdout).map_err(|_| {
        TeamError::Auth(format!(
            "{program} get answered something that is not {{\"Username\", \"Secret\"}}"
        ))
    })?;
    Ok(Some(Credentials {
        username: answer.username,
        password: answer.secret,
    }))
}

/// One `WWW-Authenticate` challenge: its scheme and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// `bearer` or `basic`, lowercase.
    pub scheme: String,
    pub params: BTreeMap<String, String>,
}

/// Parse `Bearer realm="https://…",service="…",scope="…"`.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let mut params = BTreeMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        params.insert(key, value.to_string());
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge {
        scheme: scheme.to_ascii_lowercase(),
        params,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn auths_entries_and_helpers_are_read_as_docker_reads_them() {
        let config: DockerConfig = serde_json::from_str(
            r#"{"auths": {"https://reg.example:5000/v1/": {"auth": "YWxpY2U6czNjcmV0"}},
                "credHelpers": {"helper.example": "no-such-helper-here"}}"#,
        )
        .unwrap();
        let c = lookup(&config, "reg.example:5000").unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("alice", "s3cret")
        );
        assert!(lookup(&config, "other.example").unwrap().is_none());
        let e = lookup(&config, "helper.example").unwrap_err().to_string();
        assert!(e.contains("docker-credential-no-such-helper-here"), "{e}");
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn challenges_parse() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://auth.example/token");
        assert_eq!(c.params["scope"], "repository:a/b:pull,push");
        let b = parse_challenge(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(b.scheme, "basic");
    }
}
