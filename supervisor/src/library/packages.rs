//! A tool's packages in the library: resolved when its code is prepared (consent is asked
//! about the resolved set), approved per set, installed into their layer before the tool is
//! verified, mounted into every process of the version, and unused layers collected.

use super::{CreateError, Library, Prepared};
use crate::consent::PackagesAsk;
use crate::ledger::Event;
use crate::packages::{PackageSet, Packages};
use crate::verify::{Stage, VerifyFailure};
use crate::version::{Subject, Version};
use std::path::PathBuf;
use std::time::Duration;

/// How long a layer nobody names is kept (one being installed for a tool that is still being
/// verified is named by nobody yet).
pub const LAYER_GRACE: Duration = Duration::from_secs(3600);

fn failure(stage: Stage, message: String) -> CreateError {
    CreateError::Verify(VerifyFailure {
        stage,
        message,
        log: String::new(),
    })
}

impl Library {
    /// Resolving and installing packages for this home.
    pub fn packages(&self) -> Packages {
        Packages::new(&self.home, self.settings.packages)
    }

    /// Resolve what `prepared`'s code declares in `REQUIRED_PACKAGES`, once: the set consent
    /// is asked about and the version is locked to. A declaration that cannot be read is a
    /// lint failure; a set that cannot be resolved, a packages failure, each with the reason.
    pub async fn resolve_packages(&self, prepared: &mut Prepared) -> Result<(), CreateError> {
        if prepared.packages.is_some() {
            return Ok(());
        }
        let requirements = match crate::verify::required_packages(&prepared.request.code) {
            Ok(r) if r.is_empty() => return Ok(()),
            Ok(r) => r,
            Err(e) => return Err(failure(Stage::Lint, e.to_string())),
        };
        let python = self.runtime().await.map_err(CreateError::Runtime)?;
        match self.packages().resolve(&python, &requirements).await {
            Ok(set) => {
                prepared.packages = Some(set);
                Ok(())
            }
            Err(e) => {
                let message = self.secrets().redact(&e.to_string());
                self.audit(
                    prepared.request.name.as_str(),
                    Event::VerificationFailed,
                    &format!("packages: {message}"),
                );
                Err(failure(Stage::Packages, message))
            }
        }
    }

    /// The package set of `subject` if the user has not approved it (none under
    /// `--dangerously-allow-all-tools`).
    pub fn packages_ask(&self, subject: Subject<'_>) -> Option<PackagesAsk> {
        let set = subject.packages?;
        if self.settings.allow_all_keys {
            return None;
        }
        let ledger = self.registry.ledger();
        match ledger.packages_approved(subject.tool.as_str(), &set.digest) {
            Ok(true) => return None,
            Ok(false) => {}
            // Fail closed: without the record, the set is asked about.
            Err(e) => tracing::warn!("reading package approvals: {e}"),
        }
        let before = ledger
            .package_approvals(subject.tool.as_str())
            .ok()
            .and_then(|rows| rows.into_iter().next())
            .map(|row| row.packages);
        Some(PackagesAsk {
            digest: set.digest.clone(),
            phrase: set.install_phrase(),
            before,
        })
    }

    /// Record the user's yes to `subject`'s package set.
    pub fn approve_packages(
        &self,
        subject: Subject<'_>,
        via: &str,
    ) -> Result<(), crate::ledger::LedgerError> {
        match subject.packages {
            Some(set) => self
                .registry
                .ledger()
                .approve_packages(&crate::ledger::approved_now(
                    subject.tool.as_str(),
                    set,
                    via,
                )),
            None => Ok(()),
        }
    }

    /// The layer to mount for `set`, installed first when it is not there (the version's lock
    /// pins every file, so a layer collected or lost is installed again exactly).
    pub(super) async fn layer(
        &self,
        tool: &str,
        set: Option<&PackageSet>,
    ) -> Result<Option<PathBuf>, CreateError> {
        let Some(set) = set else {
            return Ok(None);
        };
        let packages = self.packages();
        if let Some(dir) = packages.installed(set) {
            return Ok(Some(dir));
        }
        let python = self.runtime().await.map_err(CreateError::Runtime)?;
        packages.install(&python, set).await.map_err(|e| {
            let message = self.secrets().redact(&e.to_string());
            self.audit(
                tool,
                Event::VerificationFailed,
                &format!("packages: {message}"),
            );
            failure(Stage::Packages, message)
        })
    }

    /// The layer of a committed version, for starting one of its processes.
    pub async fn version_layer(&self, version: &Version) -> Result<Option<PathBuf>, String> {
        self.layer(version.name.as_str(), version.packages.as_deref())
            .await
            .map_err(|e| e.to_string())
    }

    /// Resolving and installing npm servers for this home, within the packages' limits.
    pub fn npm(&self) -> crate::npm::Npm {
        let limits = self.settings.packages;
        crate::npm::Npm::new(&self.home, limits.layer_bytes, limits.timeout)
    }

    /// An npm server's layer, installed again from its kept lockfile when it is gone (the
    /// lockfile must still hash to what the tool's file names, so the tree is the one the user
    /// said yes to); nothing for a Python tool.
    pub async fn npm_layer(
        &self,
        spec: &crate::tool::process::ToolSpec,
    ) -> Result<(), CreateError> {
        let Some(run) = &spec.npm else {
            return Ok(());
        };
        let npm = self.npm();
        if npm.installed(&run.server).is_some() {
            return Ok(());
        }
        npm.install(&run.server).await.map(|_| ()).map_err(|e| {
            let message = self.secrets().redact(&e.to_string());
            failure(Stage::Packages, format!("npm: {message}"))
        })
    }

    /// Remove the layers no live tool's version names; returns how many went.
    pub fn collect_layers(&self) -> usize {
        let npm = match self.npm_layers_in_use() {
            Ok(used) => self.npm().collect(&used, LAYER_GRACE),
            Err(e) => {
                tracing::warn!("reading which npm layers are in use: {e}");
                0
            }
        };
        npm + match self.registry.ledger().layers_in_use() {
            Ok(used) => self.packages().collect(&used, LAYER_GRACE),
            Err(e) => {
                // Fail safe: without the record, nothing is removed.
                tracing::warn!("reading which package layers are in use: {e}");
                0
            }
        }
    }

    /// The npm layers (`npm-<sha256>`) some version of a live tool declares in `NPM`. Fails
    /// (and then nothing is removed) when a version's file cannot be read.
    fn npm_layers_in_use(&self) -> Result<std::collections::BTreeSet<String>, String> {
        let mut used = std::collections::BTreeSet::new();
        for tool in self.registry.current().map_err(|e| e.to_string())? {
            for v in self
                .registry
                .versions(tool.name.as_str())
                .map_err(|e| e.to_string())?
            {
                let file = self.registry.file_of(&v);
                let code = match std::fs::read_to_string(&file) {
                    Ok(code) => code,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(format!("{}: {e}", file.display())),
                };
                if let Ok(Some(server)) = crate::verify::declarations::npm(&code) {
                    used.insert(server.layer_name());
                }
            }
        }
        Ok(used)
    }
}
