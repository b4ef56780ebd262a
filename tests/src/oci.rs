//! A real OCI registry for tests: Debian's `docker-registry` (CNCF distribution 2.8) on
//! 127.0.0.1 with a port picked here, a config file and storage directory written here, and
//! optional basic auth (an htpasswd file made by `htpasswd -B`). Killed on drop. Plus the
//! registry API spoken by hand over a plain socket ([`Registry::request`]), for artifacts a
//! test crafts: the code under test is not used to make what it is tested against.

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha256};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The registry binary.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// Why a registry cannot run here (`docker-registry` or `htpasswd` not installed), or `None`.
pub fn unavailable() -> Option<String> {
    for bin in [REGISTRY_BIN, "/usr/bin/htpasswd"] {
        if !Path::new(bin).is_file() {
            return Some(format!(
                "{bin} is not installed (apt-get install docker-registry apache2-utils)"
            ));
        }
    }
    None
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let h = Sha256::digest(bytes);
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A running registry.
#[derive(Debug)]
pub struct Registry {
    child: Child,
    pub port: u16,
    dir: TempDir,
    /// `user:password` when it asks for basic auth.
    pub basic: Option<(String, String)>,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: status, headers (lowercase names), body.
pub type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// One HTTP/1.1 request to 127.0.0.1:`port`, by hand, with `basic` credentials if given.
pub fn http(
    port: u16,
    basic: Option<&(String, String)>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Answer> {
    use base64::Engine as _;
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(crate::TIMEOUT))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
        port,
        body.len()
    );
    if let Some((u, p)) = basic {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        head.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of the answer's head")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .context("no status")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok((status, headers, raw[split + 4..].to_vec()))
}

impl Registry {
    /// Start one; with `basic`, it asks for that user and password.
    pub fn start(basic: Option<(&str, &str)>) -> Result<Registry> {
        let dir = tempfile::Builder::new()
            .prefix("autotool-registry-")
            .tempdir()?;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        // Deleting a manifest is allowed (a test takes a signature away and puts it back).
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: false\nstorage:\n  \
             delete:\n    enabled: true\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: \
             127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        if let Some((user, password)) = basic {
            let htpasswd = dir.path().join("htpasswd");
            let status = Command::new("htpasswd")
                .args(["-Bbc"])
                .arg(&htpasswd)
                .args([user, password])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .context("running htpasswd")?;
            if !status.success() {
                bail!("htpasswd failed: {status}");
            }
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: autotool-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config)?;
        // The access log (one line a request, in the order they were answered) on stdout.
        let log = std::fs::File::create(dir.path().join("access.log"))?;
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting docker-registry")?;
        let registry = Registry {
            child,
            port,
            dir,
            basic: basic.map(|(u, p)| (u.to_string(), p.to_string())),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok((status, _, _)) = registry.request("GET", "/v2/", &[], &[])
                && (status == 200 || status == 401)
            {
                return Ok(registry);
            }
            if Instant::now() > deadline {
                bail!("docker-registry did not answer on 127.0.0.1:{port} within 15 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `oci://127.0.0.1:PORT/<rest>`.
    pub fn reference(&self, rest: &str) -> String {
        format!("oci://127.0.0.1:{}/{rest}", self.port)
    }

    /// The requests answered so far, oldest first, each as `METHOD PATH` (from the access log).
    pub fn requests(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        log.lines()
            .filter(|l| l.starts_with("127.0.0.1 "))
            .filter_map(|l| {
                let quoted = l.split('"').nth(1)?;
                let mut parts = quoted.split_whitespace();
                Some(format!("{} {}", parts.next()?, parts.next()?))
            })
            .collect()
    }

    /// Delete the manifest `digest` of `repo` (and the tags naming it).
    pub fn delete_manifest(&self, repo: &str, digest: &str) -> Result<()> {
        let (status, _, body) = self.request(
            "DELETE",
            &format!("/v2/{repo}/manifests/{digest}"),
            &[],
            &[],
        )?;
        if status != 202 {
            bail!(
                "deleting a manifest: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }

    /// The storage directory.
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// Every blob the registry stores, read from its storage directory.
    pub fn blobs(&self) -> Vec<Vec<u8>> {
        fn walk(dir: &Path, out: &mut Vec<Vec<u8>>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.file_name().is_some_and(|n| n == "data")
                    && let Ok(b) = std::fs::read(&p)
                {
                    out.push(b);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.storage().join("docker/registry/v2/blobs"), &mut out);
        out
    }

    /// One HTTP/1.1 request, by hand (with the basic credentials when it asks for them).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Answer> {
        http(self.port, self.basic.as_ref(), method, path, headers, body)
    }

    /// Upload `data` as a blob of `repo`; its digest.
    pub fn push_blob(&self, repo: &str, data: &[u8]) -> Result<String> {
        let d = digest(data);
        let (status, headers, _) =
            self.request("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], &[])?;
        if status != 202 {
            bail!("starting an upload: {status}");
        }
        let location = headers
            .iter()
            .find(|(k, _)| k == "location")
            .map(|(_, v)| v.clone())
            .context("no Location")?;
        let path = location
            .strip_prefix(&format!("http://127.0.0.1:{}", self.port))
            .unwrap_or(&location)
            .to_string();
        let sep = if path.contains('?') { '&' } else { '?' };
        let (status, _, body) = self.request(
            "PUT",
            &format!("{path}{sep}digest={d}"),
            &[("Content-Type", "application/octet-stream")],
            data,
        )?;
        if status != 201 {
            bail!(
                "uploading a blob: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(d)
    }

    /// Store `bytes` as an OCI manifest at `repo:reference`; its digest.
    pub fn put_manifest(&self, repo: &str, reference: &str, bytes: &[u8]) -> Result<String> {
        let (status, _, body) = self.request(
            "PUT",
            &format!("/v2/{repo}/manifests/{reference}"),
            &[("Content-Type", "application/vnd.oci.image.manifest.v1+json")],
            bytes,
        )?;
        if status != 201 {
            bail!(
                "storing a manifest: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(digest(bytes))
    }

    /// The manifest at `repo:reference`.
    pub fn get_manifest(&self, repo: &str, reference: &str) -> Result<Vec<u8>> {
        let (status, _, body) = self.request(
            "GET",
            &format!("/v2/{repo}/manifests/{reference}"),
            &[("Accept", "application/vnd.oci.image.manifest.v1+json")],
            &[],
        )?;
        if status != 200 {
            bail!("reading a manifest: {status}");
        }
        Ok(body)
    }
}

/// One request a [`fake`] server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Header names lowercase.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// The value of header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The requests a fake server saw.
pub type Log = std::sync::Arc<std::sync::Mutex<Vec<Seen>>>;

/// A fake HTTP server on 127.0.0.1 answering each request with `answer` (one request per
/// connection, at most 64 connections); its port and what it saw.
pub fn fake(answer: impl Fn(&Seen) -> Answer + Send + 'static) -> Result<(u16, Log)> {
    use std::io::BufRead as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a fake server")?;
    let port = listener.local_addr()?.port();
    let log: Log = Default::default();
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            let mut reader = std::io::BufReader::new(clone);
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or_default().to_string();
            let path = parts.next().unwrap_or_default().to_string();
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            let length: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length.min(1 << 20)];
            let _ = std::io::Read::read_exact(&mut reader, &mut body);
            let request = Seen {
                method,
                path,
                headers,
            };
            let (status, headers, body) = answer(&request);
            if let Ok(mut l) = seen.lock() {
                l.push(request);
            }
            let mut head = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                if k != "content-length" && k != "connection" && k != "transfer-encoding" {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
            let _ = stream.flush();
        }
    });
    Ok((port, log))
}
