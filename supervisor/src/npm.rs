//! Servers from npm (`autotool add NAME npm:PACKAGE[@VERSION]`): resolved and installed by the
//! machine's npm (`/usr/bin/npm`) into a content-addressed, read-only layer, and run by
//! Debian's node (`/usr/bin/node`) with `--jitless` inside the sandbox.
//!
//! - npm reads no settings of its own accord: every run gets `--userconfig` and `--globalconfig`
//!   pointed at files autotool writes in `$AUTOTOOL_HOME/npm/` (0700), an environment cleared
//!   of everything (`NPM_CONFIG_*`, `NODE_OPTIONS` among it) but `PATH`, a `HOME` of autotool's,
//!   the locale, CA and proxy variables, and a working directory autotool made (so no project
//!   `.npmrc` is above it). The registry (and a `cafile`) are the only settings taken from the
//!   user's npm configuration ([`Registry::current`]), each from a file only the user or root
//!   can change, checked, and written into autotool's own file.
//! - The cache is autotool's: `$AUTOTOOL_HOME/cache/npm` (0700).
//! - `--ignore-scripts` always: no install script of any package in the tree ever runs.
//! - [`Npm::resolve`]: the exact version (`npm view`), then the whole tree locked
//!   (`npm install --package-lock-only`: metadata only, nothing unpacked). Every package must
//!   come from the registry with a sha512 integrity. The lockfile is kept in
//!   `npm/locks/<sha256>.json`; its sha256 is the layer's address and goes into the tool's
//!   declarations (`NPM = {...}`), so the tool's code hash pins the whole tree.
//! - [`Npm::install`]: `npm ci` of that very lockfile (npm checks each tarball against its
//!   integrity), bounded in time and size, into `layers/.npm-build-*`, then made read-only
//!   (files 0444 or 0555, directories 0555), stamped and renamed to `layers/npm-<sha256>`.

mod lock;
mod seal;

pub use lock::entry_of;
use lock::read_lock;
use seal::{open_for_removal, seal};

use crate::home::Home;
use autotool_policy::added::NpmServer;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The npm autotool runs.
pub const NPM: &str = "/usr/bin/npm";
/// The node npm servers run on.
pub const NODE: &str = "/usr/bin/node";
/// node's arguments in the sandbox: V8 without its JIT, which needs memory that is writable
/// and then executable, and the sandbox's `PR_SET_MDWE` refuses that (docs/added-servers.md).
pub const NODE_ARGS: [&str; 1] = ["--jitless"];
/// The registry when the user's configuration names none.
pub const DEFAULT_REGISTRY: &str = "https://registry.npmjs.org/";
/// The file written last into a layer.
const STAMP: &str = "layer.json";
/// The most files a layer may hold.
const MAX_FILES: u64 = 200_000;

/// Why an npm server could not be had. `Display` is for the user.
#[derive(Debug, thiserror::Error)]
pub enum NpmError {
    #[error(
        "npm servers need Debian's node and npm ({0} is missing): `sudo apt install nodejs npm`"
    )]
    Missing(&'static str),
    #[error("autotool will not run npm with a directory another user could change: {0}")]
    Unsafe(String),
    #[error(
        "the npm registry {0:?} is refused: use https, or http only to this machine's loopback"
    )]
    Registry(String),
    #[error("{what} failed: {said}")]
    Failed { what: &'static str, said: String },
    #[error("{what} did not finish within {secs} s and was stopped")]
    Timeout { what: &'static str, secs: u64 },
    #[error("the lockfile npm wrote cannot be used: {0}")]
    Lock(String),
    #[error("{0}")]
    Entry(String),
    #[error("the installed layer takes more than {0} MiB or too many files")]
    TooLarge(u64),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> NpmError + 'a {
    move |source| NpmError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Where packages come from: the registry and the CA file, from the user's npm configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    pub url: String,
    pub cafile: Option<PathBuf>,
}

/// `key = value` of an npmrc's text, the last one winning (npm's own rule).
fn npmrc_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
        .next_back()
}

/// Whether `url` may be a registry: https anywhere, http only to the loopback.
pub fn registry_ok(url: &str) -> bool {
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return false;
    }
    if let Some(rest) = url.strip_prefix("https://") {
        return !rest.is_empty() && !rest.starts_with('/');
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

impl Registry {
    /// The registry and CA file in effect, first match wins: `npm_config_registry` /
    /// `NPM_CONFIG_REGISTRY` in autotool's environment, then the user's `~/.npmrc`, then the
    /// global ones (`/usr/etc/npmrc`, `/etc/npmrc`). A file is read only when only the user or
    /// root can change it ([`crate::home::check_owned`]), and only for `registry` and `cafile`.
    pub fn current() -> Result<Registry, NpmError> {
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            files.push(PathBuf::from(home).join(".npmrc"));
        }
        files.push("/usr/etc/npmrc".into());
        files.push("/etc/npmrc".into());
        let texts: Vec<String> = files
            .iter()
            .filter(|f| f.is_file())
            .filter_map(|f| match crate::home::check_owned(f) {
                Ok(()) => std::fs::read_to_string(f).ok(),
                Err(e) => {
                    tracing::warn!("not reading the npm settings in {}: {e}", f.display());
                    None
                }
            })
            .collect();
        let env = ["npm_config_registry", "NPM_CONFIG_REGISTRY"]
            .iter()
            .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
        let url = env
            .or_else(|| texts.iter().find_map(|t| npmrc_value(t, "registry")))
            .unwrap_or_else(|| DEFAULT_REGISTRY.to_string());
        if !registry_ok(&url) {
            return Err(NpmError::Registry(url));
        }
        let cafile = texts
            .iter()
            .find_map(|t| npmrc_value(t, "cafile"))
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_file() && !p.to_string_lossy().contains('\n'));
        Ok(Registry { url, cafile })
    }

    /// The user config autotool hands npm.
    fn npmrc(&self) -> String {
        let mut text = format!("registry={}\n", self.url);
        if let Some(ca) = &self.cafile {
            text.push_str(&format!("cafile={}\n", ca.display()));
        }
        text
    }
}

/// How an added npm server runs: [`NODE`] with [`NODE_ARGS`] on `entry` (relative to `layer`,
/// which is mounted like a packages layer) with `args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmRun {
    pub layer: PathBuf,
    pub entry: String,
    pub args: Vec<String>,
    /// The declaration it was read from: what [`Npm::install`] installs again when the layer
    /// is gone.
    pub server: NpmServer,
}

/// A resolved server: what [`Npm::install`] installs and the declarations file names.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub package: String,
    pub version: String,
    pub integrity: String,
    /// sha256 of the lockfile.
    pub lock: String,
    /// Packages in the tree, the server's own included.
    pub packages: usize,
    /// The script node runs, relative to the layer.
    pub entry: String,
    pub registry: String,
}

impl Resolved {
    /// The declaration for the tool's file.
    pub fn server(&self, args: &[String]) -> NpmServer {
        NpmServer {
            package: self.package.clone(),
            version: self.version.clone(),
            integrity: self.integrity.clone(),
            lock: self.lock.clone(),
            entry: self.entry.clone(),
            args: args.to_vec(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    package: String,
    version: String,
    lock: String,
    size_bytes: u64,
    files: u64,
}

/// Resolving and installing npm servers for one home.
#[derive(Debug, Clone)]
pub struct Npm {
    home: PathBuf,
    layers: PathBuf,
    pub layer_bytes: u64,
    pub timeout: Duration,
}

/// The output of one npm run.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Npm {
    /// For `home`, a layer at most `layer_bytes` installed, each npm run at most `timeout`.
    pub fn new(home: &Home, layer_bytes: u64, timeout: Duration) -> Npm {
        Npm {
            home: home.root().to_path_buf(),
            layers: home.layers_dir(),
            layer_bytes,
            timeout,
        }
    }

    fn config_dir(&self) -> PathBuf {
        self.home.join("npm")
    }

    fn cache_dir(&self) -> PathBuf {
        self.home.join("cache").join("npm")
    }

    /// The lockfile kept for `lock`.
    fn lock_file(&self, lock: &str) -> PathBuf {
        self.config_dir().join("locks").join(format!("{lock}.json"))
    }

    /// The layer of `server` if it is installed and holds its lockfile.
    pub fn installed(&self, server: &NpmServer) -> Option<PathBuf> {
        let dir = self.layers.join(server.layer_name());
        let stamp: Stamp = serde_json::from_slice(&std::fs::read(dir.join(STAMP)).ok()?).ok()?;
        (stamp.lock == server.lock && stamp.package == server.package).then_some(dir)
    }

    /// Make autotool's private directories and config files: `(userconfig, globalconfig)`.
    fn prepare(&self, registry: &Registry) -> Result<(PathBuf, PathBuf), NpmError> {
        if !Path::new(NPM).exists() {
            return Err(NpmError::Missing(NPM));
        }
        if !Path::new(NODE).exists() {
            return Err(NpmError::Missing(NODE));
        }
        let unsafe_ = |e: crate::home::Untrusted| NpmError::Unsafe(e.to_string());
        let config = self.config_dir();
        for dir in [
            config.clone(),
            config.join("locks"),
            config.join("home"),
            self.cache_dir(),
            self.home.join("work"),
        ] {
            crate::home::private_dir(&dir).map_err(unsafe_)?;
        }
        let user = config.join("npmrc");
        let global = config.join("globalnpmrc");
        crate::home::write_private(&user, registry.npmrc().as_bytes())
            .map_err(io("writing", &user))?;
        crate::home::write_private(&global, b"").map_err(io("writing", &global))?;
        Ok((user, global))
    }

    /// Run npm `args` in `dir` with nothing of the user's but what [`Registry`] took.
    async fn run(
        &self,
        registry: &Registry,
        dir: &Path,
        args: &[&str],
        what: &'static str,
    ) -> Result<Ran, NpmError> {
        let (user, global) = self.prepare(registry)?;
        let mut cmd = tokio::process::Command::new(NPM);
        cmd.args(args)
            .arg(format!("--userconfig={}", user.display()))
            .arg(format!("--globalconfig={}", global.display()))
            .arg(format!("--cache={}", self.cache_dir().display()))
            .arg(format!("--prefix={}", dir.display()))
            .args([
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--no-update-notifier",
                "--loglevel=error",
            ])
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.config_dir().join("home"))
            .env("LANG", "C.UTF-8")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for var in [
            "NODE_EXTRA_CA_CERTS",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "HTTPS_PROXY",
            "HTTP_PROXY",
            "NO_PROXY",
            "https_proxy",
            "http_proxy",
            "no_proxy",
        ] {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
        let child = cmd.spawn().map_err(|e| NpmError::Failed {
            what,
            said: format!("starting {NPM}: {e}"),
        })?;
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Err(_) => Err(NpmError::Timeout {
                what,
                secs: self.timeout.as_secs(),
            }),
            Ok(Err(e)) => Err(NpmError::Failed {
                what,
                said: e.to_string(),
            }),
            Ok(Ok(out)) => Ok(Ran {
                success: out.status.success(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
        }
    }

    fn work_dir(&self) -> Result<tempfile::TempDir, NpmError> {
        let work = self.home.join("work");
        crate::home::private_dir(&work).map_err(|e| NpmError::Unsafe(e.to_string()))?;
        tempfile::Builder::new()
            .prefix("npm-")
            .tempdir_in(&work)
            .map_err(io("making a working directory in", &work))
    }

    /// Resolve `package` at `version` (an exact version or a tag; `None`: `latest`) and lock its
    /// tree. Nothing is unpacked and nothing of any package runs.
    pub async fn resolve(
        &self,
        package: &str,
        version: Option<&str>,
        entry: Option<&str>,
    ) -> Result<Resolved, NpmError> {
        let registry = Registry::current()?;
        let work = self.work_dir()?;
        let spec = format!("{package}@{}", version.unwrap_or("latest"));
        let viewed = self
            .run(
                &registry,
                work.path(),
                &["view", &spec, "version", "--json"],
                "asking the registry for the version",
            )
            .await?;
        if !viewed.success {
            return Err(NpmError::Failed {
                what: "asking the registry for the version",
                said: tail(&viewed.stderr),
            });
        }
        let exact = match serde_json::from_str::<serde_json::Value>(viewed.stdout.trim()) {
            Ok(serde_json::Value::String(v)) => v,
            Ok(serde_json::Value::Array(vs)) => match vs.last() {
                Some(serde_json::Value::String(v)) => v.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        if exact.is_empty()
            || !exact
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-._".contains(&b))
        {
            return Err(NpmError::Failed {
                what: "asking the registry for the version",
                said: format!("no version of {spec} ({:?})", tail(&viewed.stdout)),
            });
        }
        let manifest = serde_json::json!({
            "name": "autotool-npm-layer",
            "private": true,
            "dependencies": { package: exact },
        });
        let manifest_path = work.path().join("package.json");
        std::fs::write(&manifest_path, manifest.to_string())
            .map_err(io("writing", &manifest_path))?;
        let locked = self
            .run(
                &registry,
                work.path(),
                &["install", "--package-lock-only"],
                "locking the package's tree",
            )
            .await?;
        if !locked.success {
            return Err(NpmError::Failed {
                what: "locking the package's tree",
                said: tail(&locked.stderr),
            });
        }
        let lock_path = work.path().join("package-lock.json");
        let bytes = std::fs::read(&lock_path).map_err(io("reading", &lock_path))?;
        let lock = crate::version::code_hash(&bytes);
        let facts = read_lock(&bytes, package)?;
        let entry = entry_of(package, &facts.bin, entry)?;
        let kept = self.lock_file(&lock);
        std::fs::write(&kept, &bytes).map_err(io("keeping the lockfile at", &kept))?;
        Ok(Resolved {
            package: package.to_string(),
            version: facts.version,
            integrity: facts.integrity,
            lock,
            packages: facts.packages,
            entry,
            registry: registry.url,
        })
    }

    /// The layer of `server`, installed from its kept lockfile when it is not there yet.
    pub async fn install(&self, server: &NpmServer) -> Result<PathBuf, NpmError> {
        if let Some(dir) = self.installed(server) {
            return Ok(dir);
        }
        let registry = Registry::current()?;
        let kept = self.lock_file(&server.lock);
        let bytes = std::fs::read(&kept).map_err(|e| {
            NpmError::Lock(format!(
                "the lockfile of {} {} is gone ({e}): add the server again",
                server.package, server.version
            ))
        })?;
        if crate::version::code_hash(&bytes) != server.lock {
            return Err(NpmError::Lock(format!(
                "{} no longer matches the hash the server was added with",
                kept.display()
            )));
        }
        let facts = read_lock(&bytes, &server.package)?;
        if facts.version != server.version || facts.integrity != server.integrity {
            return Err(NpmError::Lock(format!(
                "the lockfile pins {} {} ({}), not the version added",
                server.package, facts.version, facts.integrity
            )));
        }
        std::fs::create_dir_all(&self.layers).map_err(io("creating", &self.layers))?;
        let staging = tempfile::Builder::new()
            .prefix(&format!(".npm-build-{}-", server.lock))
            .tempdir_in(&self.layers)
            .map_err(io("making a build directory in", &self.layers))?;
        let manifest = serde_json::json!({
            "name": "autotool-npm-layer",
            "private": true,
            "dependencies": { server.package.as_str(): server.version.as_str() },
        });
        let manifest_path = staging.path().join("package.json");
        std::fs::write(&manifest_path, manifest.to_string())
            .map_err(io("writing", &manifest_path))?;
        let lock_path = staging.path().join("package-lock.json");
        std::fs::write(&lock_path, &bytes).map_err(io("writing", &lock_path))?;
        let ran = self
            .run(
                &registry,
                staging.path(),
                &["ci", "--no-bin-links"],
                "installing the package's tree",
            )
            .await?;
        if !ran.success {
            return Err(NpmError::Failed {
                what: "installing the package's tree",
                said: tail(&ran.stderr),
            });
        }
        let entry = staging.path().join(&server.entry);
        if !entry.is_file() {
            return Err(NpmError::Entry(format!(
                "{} {} has no file {} once installed",
                server.package, server.version, server.entry
            )));
        }
        let root = staging.path().to_path_buf();
        let (size_bytes, files) = tokio::task::spawn_blocking(move || seal(&root))
            .await
            .map_err(|e| NpmError::Failed {
                what: "sealing the layer",
                said: e.to_string(),
            })?
            .map_err(io("sealing", staging.path()))?;
        if size_bytes > self.layer_bytes || files > MAX_FILES {
            let _ = open_for_removal(staging.path());
            return Err(NpmError::TooLarge(self.layer_bytes >> 20));
        }
        let stamp = Stamp {
            package: server.package.clone(),
            version: server.version.clone(),
            lock: server.lock.clone(),
            size_bytes,
            files,
        };
        // The stamp goes in last, into the one directory still writable (the layer's root).
        let stamp_path = staging.path().join(STAMP);
        let json = serde_json::to_vec_pretty(&stamp).unwrap_or_default();
        std::fs::write(&stamp_path, json).map_err(io("writing", &stamp_path))?;
        std::fs::set_permissions(&stamp_path, std::fs::Permissions::from_mode(0o444))
            .map_err(io("sealing", &stamp_path))?;
        let dir = self.layers.join(server.layer_name());
        if dir.exists() && self.installed(server).is_none() {
            let _ = open_for_removal(&dir);
            std::fs::remove_dir_all(&dir).map_err(io("removing the incomplete layer", &dir))?;
        }
        let kept = staging.keep();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o555))
            .map_err(io("sealing", &kept))?;
        if let Err(e) = std::fs::rename(&kept, &dir) {
            let _ = open_for_removal(&kept);
            let _ = std::fs::remove_dir_all(&kept);
            // Another add of the same tree got there first.
            if let Some(dir) = self.installed(server) {
                return Ok(dir);
            }
            return Err(io("putting the layer in place at", &dir)(e));
        }
        Ok(dir)
    }
}

impl Npm {
    /// Remove every npm layer `referenced` does not name (by directory name, `npm-<sha256>`)
    /// and not touched in the last `grace`, and builds older than that; returns how many.
    pub fn collect(
        &self,
        referenced: &std::collections::BTreeSet<String>,
        grace: Duration,
    ) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.layers) else {
            return 0;
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let layer = name
                .strip_prefix("npm-")
                .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            let build = name.starts_with(".npm-build-");
            if !(layer || build) || referenced.contains(&name) {
                continue;
            }
            let age = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                .unwrap_or_default();
            if age < grace {
                continue;
            }
            let _ = open_for_removal(&e.path());
            if std::fs::remove_dir_all(e.path()).is_ok() {
                removed += 1;
                if layer {
                    tracing::info!("removed the unused npm layer {name}");
                }
            }
        }
        removed
    }
}

/// The last lines of npm's output, for a message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_entry_is_the_packages_bin_or_the_one_named() {
        let pkg = "@modelcontextprotocol/server-filesystem";
        let one = json!({"mcp-server-filesystem": "dist/index.js"});
        assert_eq!(
            entry_of(pkg, &one, None).unwrap(),
            "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
        );
        assert_eq!(
            entry_of("x", &json!("./cli.js"), None).unwrap(),
            "node_modules/x/cli.js"
        );
        let many = json!({"a": "a.js", "x": "bin/x.js"});
        assert_eq!(
            entry_of("x", &many, None).unwrap(),
            "node_modules/x/bin/x.js"
        );
        assert_eq!(
            entry_of("x", &many, Some("a")).unwrap(),
            "node_modules/x/a.js"
        );
        assert_eq!(
            entry_of("x", &json!(null), Some("dist/server.js")).unwrap(),
            "node_modules/x/dist/server.js"
        );
        assert!(
            entry_of("y", &many, None)
                .unwrap_err()
                .to_string()
                .contains("a, x")
        );
        assert!(entry_of("x", &json!(null), None).is_err());
        for evil in ["../../etc/x.js", "/etc/x.js", "a/../../x.js"] {
            assert!(entry_of("x", &json!(null), Some(evil)).is_err(), "{evil}");
            assert!(
                entry_of("x", &json!({ "x": evil }), None).is_err(),
                "{evil}"
            );
        }
    }

    #[test]
    fn a_lock_must_pin_every_package_from_a_registry() {
        let good = json!({"lockfileVersion": 3, "packages": {
            "": {"dependencies": {"x": "1.0.0"}},
            "node_modules/x": {"version": "1.0.0", "resolved": "https://r/x-1.0.0.tgz",
                "integrity": "sha512-aaa", "bin": {"x": "x.js"}},
            "node_modules/y": {"version": "2.0.0", "resolved": "https://r/y.tgz", "integrity": "sha512-b"}
        }});
        let facts = read_lock(good.to_string().as_bytes(), "x").unwrap();
        assert_eq!(facts.version, "1.0.0");
        assert_eq!(facts.packages, 2);
        for (path, bad) in [
            (
                "node_modules/y",
                json!({"version": "2", "resolved": "git+ssh://h/y", "integrity": "sha512-b"}),
            ),
            (
                "node_modules/y",
                json!({"version": "2", "resolved": "https://r/y.tgz"}),
            ),
            (
                "node_modules/y",
                json!({"version": "2", "resolved": "https://r/y.tgz", "integrity": "sha1-b"}),
            ),
            ("node_modules/y", json!({"link": true, "resolved": "../y"})),
        ] {
            let mut lock = good.clone();
            lock["packages"][path] = bad;
            assert!(
                read_lock(lock.to_string().as_bytes(), "x").is_err(),
                "{lock}"
            );
        }
        assert!(read_lock(good.to_string().as_bytes(), "z").is_err());
    }

    #[test]
    fn registries_are_https_or_loopback_http() {
        for ok in [
            "https://registry.npmjs.org/",
            "https://npm.example.com/api/",
            "http://127.0.0.1:4873/",
            "http://localhost:8080/",
            "http://[::1]:1/",
        ] {
            assert!(registry_ok(ok), "{ok}");
        }
        for bad in [
            "http://evil.example/",
            "http://127.0.0.1.evil.example/",
            "file:///tmp/r",
            "https://",
            "https://x/\nalways-auth=true",
            "ftp://x/",
        ] {
            assert!(!registry_ok(bad), "{bad}");
        }
        assert_eq!(
            npmrc_value(
                "a=1\nregistry = \"https://x/\"\nregistry=https://y/\n",
                "registry"
            ),
            Some("https://y/".into())
        );
    }

    #[test]
    fn unused_npm_layers_are_collected_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let npm = Npm::new(&home, 1 << 20, Duration::from_secs(1));
        let layers = home.layers_dir();
        let used = format!("npm-{}", "a".repeat(64));
        let unused = format!("npm-{}", "b".repeat(64));
        let python = "c".repeat(64);
        for d in [&used, &unused, &python, &".npm-build-x".to_string()] {
            std::fs::create_dir_all(layers.join(d).join("node_modules/x")).unwrap();
        }
        seal(&layers.join(&unused)).unwrap();
        let referenced = std::collections::BTreeSet::from([used.clone()]);
        // Young: kept.
        assert_eq!(npm.collect(&referenced, Duration::from_secs(3600)), 0);
        assert_eq!(npm.collect(&referenced, Duration::ZERO), 2);
        assert!(layers.join(&used).is_dir() && layers.join(&python).is_dir());
        assert!(!layers.join(&unused).exists() && !layers.join(".npm-build-x").exists());
    }

    #[test]
    fn a_sealed_tree_is_read_only_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f.js"), "xx").unwrap();
        let (bytes, files) = seal(dir.path()).unwrap();
        assert_eq!((bytes, files), (2, 3));
        let mode = |p: &str| {
            std::fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("a/b/f.js"), 0o444);
        assert_eq!(mode("a/b"), 0o555);
        open_for_removal(dir.path()).unwrap();
    }
}
