//! The distribution API, the few requests the team library needs: manifests and blobs read
//! (bounded, every blob checked against its digest) and written (monolithic uploads), the OCI
//! 1.1 referrers list, and the auth flows registries use: anonymous, `Basic`, and the bearer
//! token challenge (`WWW-Authenticate: Bearer realm=…,service=…,scope=…`, GHCR and Harbor).
//!
//! Redirects are followed by hand (at most [`MAX_REDIRECTS`]): one to another origin (a blob
//! store) is followed for reads only and never carries the `Authorization` header; one from
//! HTTPS to plain HTTP is refused.

use super::TeamError;
use super::auth::{Credentials, parse_challenge};
use super::reference::{Reference, digest_ok};
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, LOCATION, WWW_AUTHENTICATE,
};
use reqwest::{Method, StatusCode, Url};
use sha2::{Digest as _, Sha256};
use std::sync::Mutex;
use std::time::Duration;

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;
/// The most bytes of a manifest read.
pub const MANIFEST_LIMIT: u64 = 4 << 20;
/// The most bytes of a token answer or an error body read.
const SMALL_LIMIT: u64 = 64 << 10;
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI image index media type (what the referrers API answers).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A client of one registry, for one repository.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    repository: String,
    credentials: Option<Credentials>,
    /// Whether the token asked for covers pushing.
    push: bool,
    /// The `Authorization` value the registry's challenge led to.
    authorization: Mutex<Option<String>>,
    /// Whether plain HTTP is allowed (loopback, or `--plain-http`).
    plain_http: bool,
}

fn registry_err(what: &str, e: &reqwest::Error) -> TeamError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    TeamError::Registry(format!("{what}: {text}"))
}

/// Printable, bounded: what a registry said, for an error message (never trusted further).
fn excerpt(bytes: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<One>,
    }
    #[derive(serde::Deserialize)]
    struct One {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let text = match serde_json::from_slice::<Errors>(bytes) {
        Ok(e) => e
            .errors
            .iter()
            .map(|e| format!("{} {}", e.code, e.message))
            .collect::<Vec<_>>()
            .join("; "),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    };
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    clean.trim().to_string()
}

/// Read at most `limit` bytes of `resp`'s body; more is an error naming `what`.
pub async fn read_bounded(
    mut resp: reqwest::Response,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, TeamError> {
    if let Some(len) = resp.content_length()
        && len > limit
    {
        return Err(TeamError::Refused(format!(
            "{what} is {len} bytes, more than the {limit} bytes autotool accepts"
        )));
    }
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| registry_err(what, &e))? {
        if out.len() as u64 + chunk.len() as u64 > limit {
            return Err(TeamError::Refused(format!(
                "{what} is more than the {limit} bytes autotool accepts"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

impl Client {
    /// A client for `reference`'s registry and repository. Plain HTTP is used for a loopback
    /// registry or when `plain_http` is given; HTTPS otherwise.
    pub fn new(
        reference: &Reference,
        plain_http: bool,
        credentials: Option<Credentials>,
        push: bool,
    ) -> Result<Client, TeamError> {
        let plain_http = plain_http || reference.is_loopback();
        let scheme = if plain_http { "http" } else { "https" };
        let base = Url::parse(&format!("{scheme}://{}/", reference.registry))
            .map_err(|e| TeamError::Reference(format!("{}: {e}", reference.registry)))?;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("autotool/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| registry_err("starting the HTTP client", &e))?;
        Ok(Client {
            http,
            base,
            repository: reference.repository.clone(),
            credentials,
            push,
            authorization: Mutex::new(None),
            plain_http,
        })
    }

    fn url(&self, tail: &str) -> Result<Url, TeamError> {
        self.base
            .join(&format!("v2/{}/{tail}", self.repository))
            .map_err(|e| TeamError::Reference(e.to_string()))
    }

    fn same_origin(&self, url: &Url) -> bool {
        url.origin() == self.base.origin()
    }

    fn current_authorization(&self) -> Option<String> {
        self.authorization
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Send one request, answering the registry's auth challenge once and following
    /// redirects as the module says.
    async fn send(
        &self,
        method: Method,
        url: Url,
        accept: Option<&str>,
        body: Option<(&str, Vec<u8>)>,
        what: &str,
    ) -> Result<reqwest::Response, TeamError> {
        self.send_if(method, url, accept, body, None, what).await
    }

    /// [`Client::send`] with `If-None-Match: "<etag>"` when `etag` is given.
    async fn send_if(
        &self,
        method: Method,
        url: Url,
        accept: Option<&str>,
        body: Option<(&str, Vec<u8>)>,
        etag: Option<&str>,
        what: &str,
    ) -> Result<reqwest::Response, TeamError> {
        let mut url = url;
        let mut challenged = false;
        let mut redirects = 0;
        loop {
            let mut request = self.http.request(method.clone(), url.clone());
            if let Some(a) = accept {
                request = request.header(ACCEPT, a);
            }
            if let Some(tag) = etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, format!("\"{tag}\""));
            }
            if let Some((content_type, bytes)) = &body {
                request = request
                    .header(CONTENT_TYPE, *content_type)
                    .body(bytes.clone());
            }
            if self.same_origin(&url)
                && let Some(auth) = self.current_authorization()
            {
                let mut value = HeaderValue::from_str(&auth).map_err(|_| {
                    TeamError::Auth(
                        "the registry credentials hold characters an HTTP header cannot carry"
                            .into(),
                    )
                })?;
                value.set_sensitive(true);
                request = request.header(AUTHORIZATION, value);
            }
            let resp = request.send().await.map_err(|e| registry_err(what, &e))?;
            let status = resp.status();
            if status == StatusCode::UNAUTHORIZED && self.same_origin(&url) && !challenged {
                challenged = true;
                let header = resp
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                self.answer_challenge(header.as_deref()).await?;
                continue;
            }
            // 304 answers a conditional request; it is no redirect.
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(TeamError::Refused(format!(
                        "{what}: the registry redirected more than {MAX_REDIRECTS} times"
                    )));
                }
                let location = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| {
                        TeamError::Refused(format!("{what}: a redirect without a Location"))
                    })?;
                let next = url.join(location).map_err(|_| {
                    TeamError::Refused(format!("{what}: a redirect to {location:?}, not a URL"))
                })?;
                if !matches!(next.scheme(), "http" | "https")
                    || (next.scheme() == "http" && url.scheme() == "https")
                {
                    return Err(TeamError::Refused(format!(
                        "{what}: the registry redirected to {}, a {} URL; refused (a redirect \
                         may not leave HTTPS)",
                        next.origin().ascii_serialization(),
                        next.scheme()
                    )));
                }
                if !(self.same_origin(&next) || method == Method::GET || method == Method::HEAD) {
                    return Err(TeamError::Refused(format!(
                        "{what}: the registry redirected a {method} to another host ({}); \
                         refused, the credentials are never sent to another host",
                        next.origin().ascii_serialization()
                    )));
                }
                // A read redirected to another origin (a blob store) goes without the
                // registry's Authorization: `send` adds it for the registry's origin only.
                url = next;
                continue;
            }
            return Ok(resp);
        }
    }

    /// Answer a 401: `Basic` with the configured credentials, or `Bearer` by asking the
    /// challenge's realm for a token (with the credentials, if any).
    async fn answer_challenge(&self, header: Option<&str>) -> Result<(), TeamError> {
        let host = self.base.authority().to_string();
        let login_hint = format!(
            "log in with `docker login {host}` (or add it to ~/.docker/config.json's `auths`)"
        );
        let challenge = header.and_then(parse_challenge).ok_or_else(|| {
            TeamError::Auth(format!(
                "the registry refused access (401) without a challenge autotool understands; \
                 {login_hint}"
            ))
        })?;
        let value = match challenge.scheme.as_str() {
            "basic" => match &self.credentials {
                Some(c) => c.basic(),
                None => {
                    return Err(TeamError::Auth(format!(
                        "the registry asks for a user name and password and none is kept for \
                         it; {login_hint}"
                    )));
                }
            },
            "bearer" => format!("Bearer {}", self.token(&challenge.params).await?),
            other => {
                return Err(TeamError::Auth(format!(
                    "the registry asks for {other:?} authentication, which autotool does not \
                     speak (Basic and Bearer tokens are supported)"
                )));
            }
        };
        *self.authorization.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        Ok(())
    }

    /// The distribution token flow: GET realm?service=…&scope=… → `{"token"}`.
    async fn token(
        &self,
        params: &std::collections::BTreeMap<String, String>,
    ) -> Result<String, TeamError> {
        let realm = params.get("realm").ok_or_else(|| {
            TeamError::Auth("the registry's Bearer challenge names no realm".into())
        })?;
        let mut url = Url::parse(realm).map_err(|_| {
            TeamError::Auth(format!("the registry's token realm {realm:?} is not a URL"))
        })?;
        let loopback = url.host_str().is_some_and(|h| {
            h == "localhost"
                || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
                || h == "[::1]"
        });
        if url.scheme() != "https" && !(url.scheme() == "http" && (loopback || self.plain_http)) {
            return Err(TeamError::Auth(format!(
                "the registry's token realm {realm:?} is not HTTPS; refused (credentials would \
                 travel in the clear)"
            )));
        }
        let actions = if self.push { "pull,push" } else { "pull" };
        let scope = format!("repository:{}:{actions}", self.repository);
        {
            let mut q = url.query_pairs_mut();
            if let Some(service) = params.get("service") {
                q.append_pair("service", service);
            }
            q.append_pair("scope", &scope);
        }
        let mut request = self.http.get(url);
        if let Some(c) = &self.credentials {
            let mut value = HeaderValue::from_str(&c.basic()).map_err(|_| {
                TeamError::Auth(
                    "the registry credentials hold characters an HTTP header cannot carry".into(),
                )
            })?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let resp = request
            .send()
            .await
            .map_err(|e| registry_err("asking the token realm", &e))?;
        let status = resp.status();
        let body = read_bounded(resp, SMALL_LIMIT, "the token answer").await?;
        if !status.is_success() {
            return Err(TeamError::Auth(format!(
                "the token realm refused ({status}): {}",
                excerpt(&body)
            )));
        }
        #[derive(serde::Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let t: Token = serde_json::from_slice(&body).map_err(|_| {
            TeamError::Refused("the token realm answered something that is not a token".into())
        })?;
        t.token
            .or(t.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| TeamError::Refused("the token realm answered no token".into()))
    }

    async fn fail(resp: reqwest::Response, what: &str) -> TeamError {
        let status = resp.status();
        let body = read_bounded(resp, SMALL_LIMIT, what)
            .await
            .unwrap_or_default();
        let said = excerpt(&body);
        let hint = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                " (check the credentials kept for this registry: `docker login`)"
            }
            StatusCode::NOT_FOUND => " (is the repository and tag right?)",
            _ => "",
        };
        // A `HEAD` is answered with no body: nothing quoted then.
        let said = if said.trim().is_empty() {
            String::new()
        } else {
            format!(": {said}")
        };
        let text = format!("{what}: the registry answered {status}{hint}{said}");
        if status == StatusCode::NOT_FOUND {
            TeamError::NotFound(text)
        } else {
            TeamError::Registry(text)
        }
    }

    /// The manifest at `reference` (a tag or digest): its bytes, digest and media type. A
    /// digest asked for is checked against the bytes.
    pub async fn manifest(&self, reference: &str) -> Result<(Vec<u8>, String, String), TeamError> {
        let what = format!("reading the manifest {reference}");
        let resp = self
            .send(
                Method::GET,
                self.url(&format!("manifests/{reference}"))?,
                Some(OCI_MANIFEST),
                None,
                &what,
            )
            .await?;
        if !resp.status().is_success() {
            return Err(Self::fail(resp, &what).await);
        }
        let media = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = read_bounded(resp, MANIFEST_LIMIT, "the manifest").await?;
        let digest = sha256_digest(&bytes);
        if digest_ok(reference) && digest != reference {
            return Err(TeamError::Refused(format!(
                "the registry answered a manifest whose digest is {digest}, not the {reference} \
                 asked for"
            )));
        }
        Ok((bytes, digest, media))
    }

    /// The digest a tag points at now (a `HEAD`, conditional on `known`, the digest seen last:
    /// a `304 Not Modified` means it still is), or `None` when there is no such tag.
    pub async fn head_manifest(
        &self,
        tag: &str,
        known: Option<&str>,
    ) -> Result<Option<String>, TeamError> {
        let what = format!("looking up {tag}");
        let url = self.url(&format!("manifests/{tag}"))?;
        let resp = self
            .send_if(Method::HEAD, url, Some(OCI_MANIFEST), None, known, &what)
            .await?;
        if resp.status() == StatusCode::NOT_MODIFIED
            && let Some(known) = known
        {
            return Ok(Some(known.to_string()));
        }
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(Self::fail(resp, &what).await);
        }
        Ok(resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| digest_ok(d))
            .map(str::to_string))
    }

    /// The blob `digest`, at most `limit` bytes and exactly `size`, checked against its digest.
    pub async fn blob(
        &self,
        digest: &str,
        size: u64,
        limit: u64,
        what: &str,
    ) -> Result<Vec<u8>, TeamError> {
        if !digest_ok(digest) {
            return Err(TeamError::Refused(format!(
                "{what} is named by {digest:?}, not a sha256 digest"
            )));
        }
        if size > limit {
            return Err(TeamError::Refused(format!(
                "{what} is {size} bytes, more than the {limit} bytes autotool accepts"
            )));
        }
        let resp = self
            .send(
                Method::GET,
                self.url(&format!("blobs/{digest}"))?,
                None,
                None,
                what,
            )
            .await?;
        if !resp.status().is_success() {
            return Err(Self::fail(resp, what).await);
        }
        let bytes = read_bounded(resp, size, what).await?;
        let got = sha256_digest(&bytes);
        if got != digest || bytes.len() as u64 != size {
            return Err(TeamError::Refused(format!(
                "{what}: the registry answered {} bytes with digest {got}, not the {size} bytes \
                 with digest {digest} the manifest names",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// Upload `bytes` as a blob (skipped when the registry has it); its digest.
    pub async fn push_blob(&self, bytes: &[u8], what: &str) -> Result<String, TeamError> {
        let digest = sha256_digest(bytes);
        let head = self
            .send(
                Method::HEAD,
                self.url(&format!("blobs/{digest}"))?,
                None,
                None,
                what,
            )
            .await?;
        if head.status().is_success() {
            return Ok(digest);
        }
        let start = self
            .send(
                Method::POST,
                self.url("blobs/uploads/")?,
                None,
                Some(("application/octet-stream", Vec::new())),
                what,
            )
            .await?;
        if start.status() != StatusCode::ACCEPTED {
            return Err(Self::fail(start, what).await);
        }
        let location = start
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| TeamError::Refused(format!("{what}: the upload has no Location")))?;
        let mut url = self
            .base
            .join(location)
            .map_err(|_| TeamError::Refused(format!("{what}: the upload Location is not a URL")))?;
        if !self.same_origin(&url) {
            return Err(TeamError::Refused(format!(
                "{what}: the registry sent the upload to another host ({}); refused, the \
                 credentials are never sent to another host",
                url.origin().ascii_serialization()
            )));
        }
        url.query_pairs_mut().append_pair("digest", &digest);
        let put = self
            .send(
                Method::PUT,
                url,
                None,
                Some(("application/octet-stream", bytes.to_vec())),
                what,
            )
            .await?;
        if put.status() != StatusCode::CREATED {
            return Err(Self::fail(put, what).await);
        }
        Ok(digest)
    }

    /// Store `bytes` as the manifest at `reference` (a tag); its digest.
    pub async fn put_manifest(&self, reference: &str, bytes: &[u8]) -> Result<String, TeamError> {
        let what = format!("storing the manifest {reference}");
        let resp = self
            .send(
                Method::PUT,
                self.url(&format!("manifests/{reference}"))?,
                None,
                Some((OCI_MANIFEST, bytes.to_vec())),
                &what,
            )
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(Self::fail(resp, &what).await);
        }
        let digest = sha256_digest(bytes);
        if let Some(said) = resp
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && said != digest
        {
            return Err(TeamError::Refused(format!(
                "the registry stored the manifest as {said}, not {digest}"
            )));
        }
        Ok(digest)
    }

    /// The referrers of `digest` of `artifact_type` (an OCI index), or `None` when the
    /// registry has no referrers API (it answers 404; the tag fallback is used then).
    pub async fn referrers(
        &self,
        digest: &str,
        artifact_type: &str,
    ) -> Result<Option<Vec<u8>>, TeamError> {
        let what = "listing the signatures (referrers API)";
        let mut url = self.url(&format!("referrers/{digest}"))?;
        url.query_pairs_mut()
            .append_pair("artifactType", artifact_type);
        let resp = self
            .send(Method::GET, url, Some(OCI_INDEX), None, what)
            .await?;
        match resp.status() {
            StatusCode::OK => Ok(Some(
                read_bounded(resp, MANIFEST_LIMIT, "the referrers list").await?,
            )),
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED | StatusCode::BAD_REQUEST => {
                Ok(None)
            }
            _ => Err(Self::fail(resp, what).await),
        }
    }
}
