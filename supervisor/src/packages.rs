//! Packages a tool declares in `REQUIRED_PACKAGES`: resolved, locked with hashes, consented to
//! and installed by autotool, outside the sandbox and never by the tool; then mounted read-only
//! into the tool's sandbox next to the runtime.
//!
//! - What may be declared is `autotool_policy::packages` (names and version specifiers only: no
//!   URL, no path, no option, no marker); reading the declaration is the verifier's
//!   (`crate::verify::required_packages`).
//! - [`Packages::resolve`]: `uv pip compile` of the requirements for the runtime's interpreter,
//!   wheels only (`--only-binary :all:`: no build script ever runs), constrained to what the
//!   runtime already holds, with every file's hash: a [`PackageSet`], kept in the version's
//!   manifest. The set is what consent is asked about ([`PackageSet::digest`]): a changed
//!   resolution is a new set and a new question.
//! - [`Packages::install`]: the part of the set the runtime lacks, installed with `uv pip install
//!   --require-hashes --no-deps --only-binary :all:` into a content-addressed layer,
//!   `$AUTOTOOL_HOME/layers/<hash>`, shared by every tool whose set needs the same files, bounded
//!   in size ([`Limits::layer_bytes`]) and time ([`Limits::timeout`]).
//! - [`Packages::collect`]: layers no version of a live tool names are removed.
//! - [`crate::index`]: where packages come from (the user's uv or pip configuration).

mod layer;
mod resolve;
mod wheels;

use crate::tool::runtime::Python;
use crate::tool::runtime::build::Private;
use autotool_policy::packages::{LockError, Requirement};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::index::Source;
pub use crate::version::PackageSet;

/// Where the installed packages of a layer are, inside `layers/<hash>/`.
pub const SITE_DIR: &str = "site";

/// How large and how slow a layer may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most a layer may take on disk, installed.
    pub layer_bytes: u64,
    /// The most resolving, or installing, may take.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            layer_bytes: 500 << 20,
            timeout: Duration::from_secs(300),
        }
    }
}

/// Why a tool's packages could not be had. `Display` is for the agent (redact before it
/// reaches one); each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum PackagesError {
    #[error(
        "installing packages needs uv, which autotool could not get ({0}); the user can set AUTOTOOL_UV to a uv binary"
    )]
    NoUv(String),
    #[error("resolving REQUIRED_PACKAGES failed: {0}")]
    Resolve(String),
    #[error("installing the packages failed: {0}")]
    Install(String),
    #[error(
        "the packages take more than {limit_mib} MiB installed, over the limit per tool (the setting `packages_limit`); declare fewer or smaller packages"
    )]
    TooLarge { limit_mib: u64 },
    #[error(
        "{what} did not finish within {secs} s (the setting `packages_timeout`) and was stopped; declare fewer packages, or ask the user to raise the limit"
    )]
    Timeout { what: &'static str, secs: u64 },
    #[error(
        "autotool will not run uv with a cache or working directory another user could change: {0}"
    )]
    Unsafe(String),
    #[error("the resolver's lock could not be read: {0}")]
    Lock(#[from] LockError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PackagesError + 'a {
    move |source| PackagesError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Resolving and installing packages for tools on one runtime.
#[derive(Debug, Clone)]
pub struct Packages {
    /// `$AUTOTOOL_HOME/layers`.
    pub layers: PathBuf,
    pub limits: Limits,
    /// `$AUTOTOOL_HOME`: uv's cache and working directories are in it (`cache/`, `work/`).
    home: PathBuf,
}

impl Packages {
    pub fn new(home: &crate::home::Home, limits: Limits) -> Packages {
        Packages {
            layers: home.layers_dir(),
            limits,
            home: home.root().to_path_buf(),
        }
    }

    /// uv's cache and working directories, made or checked (see
    /// `crate::tool::runtime::build`'s `isolate`).
    fn private(&self) -> Result<Private, PackagesError> {
        Private::in_home(&self.home).map_err(|e| PackagesError::Unsafe(e.to_string()))
    }

    /// Resolve `requirements` for `python` (the tools' runtime) into a locked set, from the
    /// index the user's configuration names. Nothing is installed and nothing of any package
    /// runs: wheels' metadata is read.
    pub async fn resolve(
        &self,
        python: &Python,
        requirements: &[Requirement],
    ) -> Result<PackageSet, PackagesError> {
        let private = self.private()?;
        let uv = self.uv(python, &private).await?;
        let source = Source::current();
        let present = resolve::present(&uv, python, &source, &private, self.limits.timeout).await?;
        let lock = resolve::compile(
            &uv,
            python,
            requirements,
            &present,
            &source,
            &private,
            self.limits.timeout,
        )
        .await?;
        let layer_lock = lock.without(&present);
        let layer = (!layer_lock.is_empty()).then(|| layer::address(python, &layer_lock));
        Ok(PackageSet {
            declared: requirements.iter().map(ToString::to_string).collect(),
            digest: crate::version::code_hash(lock.to_requirements().as_bytes()),
            lock,
            layer_lock,
            layer,
            source: source.describe(),
        })
    }

    /// The host directory to mount at `/packages` for `set`, installing its layer first when
    /// it is not there yet (`None`: the runtime holds everything).
    pub async fn install(
        &self,
        python: &Python,
        set: &PackageSet,
    ) -> Result<Option<PathBuf>, PackagesError> {
        let Some(address) = &set.layer else {
            return Ok(None);
        };
        let dir = self.layers.join(address);
        if layer::ready(&dir, &set.layer_lock) {
            return Ok(Some(dir.join(SITE_DIR)));
        }
        let private = self.private()?;
        let uv = self.uv(python, &private).await?;
        layer::build(
            &uv,
            python,
            &self.layers,
            address,
            &set.layer_lock,
            self.limits,
            &private,
        )
        .await?;
        Ok(Some(dir.join(SITE_DIR)))
    }

    /// The layer of `set` if it is installed now.
    pub fn installed(&self, set: &PackageSet) -> Option<PathBuf> {
        let dir = self.layers.join(set.layer.as_ref()?);
        layer::ready(&dir, &set.layer_lock).then(|| dir.join(SITE_DIR))
    }

    /// Remove every layer not in `referenced` and not touched in the last `grace`, and what
    /// killed builds left; returns how many were removed.
    pub fn collect(&self, referenced: &BTreeSet<String>, grace: Duration) -> usize {
        layer::collect(&self.layers, referenced, grace)
    }

    /// autotool's uv (see `crate::tool::runtime::build`): fetched the first time, off the
    /// async threads.
    async fn uv(&self, python: &Python, private: &Private) -> Result<PathBuf, PackagesError> {
        let interpreter = python.interpreter.clone();
        let parent = self.layers.clone();
        let private = private.clone();
        tokio::task::spawn_blocking(move || {
            crate::tool::runtime::build::uv(&interpreter, &parent, &private)
        })
        .await
        .map_err(|e| PackagesError::NoUv(e.to_string()))?
        .map_err(PackagesError::NoUv)
    }
}
