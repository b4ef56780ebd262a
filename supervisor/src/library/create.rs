//! How a tool enters: [`Library::prepare`] reads what consent needs from the code once (its
//! hash and `REQUIRED_ENV`, after the size rule) and [`Library::resolve_packages`] resolves its
//! `REQUIRED_PACKAGES`; then [`Library::create`] installs the packages' layer, stages the code,
//! verifies it with the keys it is granted ([`Library::check`]: a [`Checked`] candidate, not
//! yet committed), commits it as a new version, hands the verified process to the pool as the
//! first warm instance and swaps the snapshot ([`Library::commit_checked`]). Candidates racing
//! for one need are checked alike and only the winner is committed ([`super::race`]). Every
//! way a tool enters (an agent's `create_tool`, synthesis, a file placed by hand, a changed
//! file verified again) comes through here, so every one passes the same gate.

use super::Library;
use crate::ledger::Event;
use crate::registry::{FunctionSpec, Manifest, RegistryError};
use crate::verify::{SmokeTest, Thoroughness, Verdict, VerifyFailure, VerifyRequest};
use crate::version::Subject;
use autotool_policy::names::{FunctionName, KeyName, MountedName, ToolName};

/// What to create.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub name: ToolName,
    /// The whole Python file.
    pub code: String,
    pub description: String,
    pub smoke_test: Option<SmokeTest>,
    pub thoroughness: Thoroughness,
}

/// A request whose code passed the size rule, with what consent needs read from it once.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub request: CreateRequest,
    /// sha256 of the code, lowercase hex.
    pub code_hash: String,
    /// The keys the code declares; empty when `REQUIRED_ENV` does not parse (verification
    /// then reports why).
    pub declared: Vec<KeyName>,
    /// The other tools' functions it declares in `USES` (mounted names); empty when `USES`
    /// does not parse (verification then reports why).
    pub uses: Vec<String>,
    /// What it declares it reaches (`REQUIRED_HOSTS`, `READ_DIRS`, `WRITE_DIRS`); empty when
    /// they do not parse (verification then reports why).
    pub reach: autotool_policy::reach::DeclaredReach,
    /// Whether `REQUIRED_ENV` parsed.
    declarations_read: bool,
    /// Its `REQUIRED_PACKAGES`, resolved ([`Library::resolve_packages`]); `None` before that,
    /// or when it declares none.
    pub packages: Option<crate::packages::PackageSet>,
    /// Obligations the version owes besides this machine's baseline of the tool: those a
    /// pulled artifact carries from its publisher's trusted versions.
    pub carried_baseline: Vec<crate::verify::Obligation>,
}

impl Prepared {
    /// What consent for this code is about.
    pub fn subject(&self) -> Subject<'_> {
        Subject {
            tool: &self.request.name,
            code_hash: &self.code_hash,
            declared: &self.declared,
            packages: self.packages.as_ref(),
            uses: &self.uses,
            reach: Some(&self.reach),
        }
    }
}

/// A tool that passed verification and is mounted.
#[derive(Debug, Clone)]
pub struct Created {
    pub tool: ToolName,
    pub version: u32,
    /// Each function, with the name it is mounted under.
    pub functions: Vec<(MountedName, FunctionSpec)>,
    /// The keys its code declares.
    pub required_env: Vec<KeyName>,
    /// The keys it was given.
    pub keys_granted: Vec<KeyName>,
    /// Why a declared key was not given, and what the user can do.
    pub key_notes: Vec<String>,
    /// What the robustness probes did.
    pub robustness: String,
    /// What verification found of each function (redacted), as kept in the ledger.
    pub verdicts: Vec<Verdict>,
    /// The trigger check's findings (`{"skipped": why}` without a model of its own).
    pub trigger_check: serde_json::Value,
    /// Whether its functions are in the tool list now (the list limit may leave them out).
    pub listed: bool,
    /// Its packages, as installed: `feedparser 6.0.11, sgmllib3k 1.0.0`.
    pub packages: Option<String>,
    /// The code and description were byte-identical to the mounted version's: no new version
    /// was made, and this is that version as it was verified.
    pub unchanged: bool,
    /// What the server said it offers besides tools, which hosts do not get (empty when
    /// unchanged: nothing was started).
    pub not_relayed: Vec<String>,
}

/// A candidate that passed verification and waits, its process running, to be committed
/// ([`Library::commit_checked`]) or given up ([`Library::discard_checked`]); dropped without
/// either, its staged code is removed and its process killed.
pub struct Checked {
    prepared: Prepared,
    staged: crate::registry::Staged,
    verified: crate::verify::Verified,
    /// The keys it was verified with (values: never formatted).
    keys: std::collections::BTreeMap<KeyName, String>,
    /// The reach it was verified with.
    reach: Option<autotool_policy::reach::DeclaredReach>,
}

impl std::fmt::Debug for Checked {
    /// The candidate's name, hash and verdicts: no key value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("tool", &self.prepared.request.name)
            .field("code_hash", &self.prepared.code_hash)
            .field("verdicts", &self.verified.verdicts)
            .finish_non_exhaustive()
    }
}

impl Checked {
    /// The tool it would be a version of.
    pub fn name(&self) -> &ToolName {
        &self.prepared.request.name
    }

    /// sha256 of its code, lowercase hex.
    pub fn code_hash(&self) -> &str {
        &self.prepared.code_hash
    }

    /// Every verdict verification reached.
    pub fn verdicts(&self) -> &[Verdict] {
        &self.verified.verdicts
    }

    /// How many functions it offers.
    pub fn functions(&self) -> usize {
        self.verified.tools.len()
    }
}

/// Why a tool was not created. `Display` is the text for the agent (redact before it reaches
/// one).
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("the Python runtime is not available: {0}")]
    Runtime(#[source] super::RuntimeUnavailable),
    #[error("create_tool failed: {0}")]
    Stage(#[source] RegistryError),
    #[error("{0}")]
    Verify(VerifyFailure),
    #[error("create_tool failed storing the tool: {0}")]
    Store(#[source] RegistryError),
    #[error("create_tool failed reading the tool's baseline: {0}")]
    Baseline(String),
    /// The user pinned the tool: nothing replaces its current version until it is unpinned.
    #[error("create_tool refused: {0}")]
    PinHeld(crate::ledger::PinHeld),
    /// Its packages need the user's yes, which this way of entering cannot ask for.
    #[error(
        "consent needed: the tool `{tool}` asks to {phrase}, and the user has not approved it. \
         Nothing was installed. Ask the user to run `autotool tools approve {tool} --packages`, \
         then create it again."
    )]
    PackagesConsent {
        tool: String,
        phrase: String,
        /// The set's digest, which an approval is bound to.
        digest: String,
    },
    /// Its declared reach needs the user's yes, which this way of entering cannot ask for.
    #[error(
        "consent needed: the tool `{tool}` declares that it may {phrase}, and the user has not \
         granted it. Nothing ran. Ask the user to run `autotool tools approve {tool} --reach`, \
         then create it again."
    )]
    ReachConsent { tool: String, phrase: String },
}

impl Library {
    /// Check `request`'s code against the size rule and read what consent needs from it: its
    /// hash and the keys it declares. Nothing of the code runs. A tool the user pinned is
    /// refused here, before consent and verification (and again at commit).
    pub fn prepare(&self, request: CreateRequest) -> Result<Prepared, CreateError> {
        self.registry
            .check_code_size(request.code.len())
            .map_err(CreateError::Stage)?;
        let code_hash = crate::version::code_hash(request.code.as_bytes());
        let name = request.name.as_str();
        let held = self
            .registry
            .ledger()
            .held(name, &code_hash, &request.description);
        if let Some(held) = held.map_err(|e| CreateError::Stage(e.into()))? {
            return Err(self.pin_refused(held, &code_hash));
        }
        let (declared, declarations_read) = match crate::verify::required_env(&request.code) {
            Ok(d) => (d, true),
            Err(_) => (Vec::new(), false),
        };
        let uses = crate::verify::declarations::uses(&request.code)
            .map(|u| u.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        let reach = crate::verify::declarations::reach(&request.code).unwrap_or_default();
        Ok(Prepared {
            request,
            code_hash,
            declared,
            uses,
            reach,
            declarations_read,
            packages: None,
            carried_baseline: Vec::new(),
        })
    }

    /// Stage, verify, commit and mount a prepared request as a new version of its tool. The
    /// keys the process gets are those approved (the host was asked before this runs) or, for
    /// a tool placed by hand, approved earlier.
    pub async fn create(&self, prepared: Prepared) -> Result<Created, CreateError> {
        let grants = self.grants(prepared.subject());
        self.create_with(prepared, grants).await
    }

    /// [`Library::create`] with the grants already read (by the consent check of the same
    /// call).
    pub async fn create_with(
        &self,
        prepared: Prepared,
        grants: super::Grants,
    ) -> Result<Created, CreateError> {
        if let Some(same) = self.unchanged(&prepared, &grants) {
            return Ok(same);
        }
        let checked = self.check_with(prepared, grants).await?;
        self.commit_checked(checked).await
    }

    /// Stage and verify a prepared request with the keys it is granted, without committing it:
    /// the candidate waits, its process running, for [`Library::commit_checked`] or
    /// [`Library::discard_checked`]. A failure is audited and leaves nothing behind.
    pub async fn check(&self, prepared: Prepared) -> Result<Checked, CreateError> {
        let grants = self.grants(prepared.subject());
        self.check_with(prepared, grants).await
    }

    /// [`Library::check`] with the grants already read.
    pub async fn check_with(
        &self,
        mut prepared: Prepared,
        grants: super::Grants,
    ) -> Result<Checked, CreateError> {
        let name = prepared.request.name.clone();
        // A refusal before anything of the code runs, audited like any failed verification.
        let refused = |stage, message: String| {
            let failure = VerifyFailure {
                stage,
                message,
                log: String::new(),
            };
            self.audit(
                name.as_str(),
                Event::VerificationFailed,
                &format!("{}: {}", failure.stage, failure.message),
            );
            CreateError::Verify(failure)
        };
        if let Err(why) = self.check_uses(name.as_str(), &prepared.uses) {
            return Err(refused(crate::verify::Stage::Declarations, why));
        }
        // A trusted tool's rewrite may not reach further than its trusted versions did; this
        // is refused before the rewrite runs, since verifying it would already make its calls.
        match self.uses_beyond_trust(name.as_str(), &prepared.uses) {
            Err(e) => return Err(CreateError::Baseline(e.to_string())),
            Ok(Some(why)) => return Err(refused(crate::verify::Stage::Baseline, why)),
            Ok(None) => {}
        }
        let python = self.runtime().await.map_err(CreateError::Runtime)?;
        self.resolve_packages(&mut prepared).await?;
        // Nothing is installed for a set the user has not said yes to: a tool placed by hand
        // or synthesized has nobody to ask, and waits for `autotool tools approve --packages`.
        if let Some(ask) = self.packages_ask(prepared.subject()) {
            self.remember(prepared.subject());
            return Err(CreateError::PackagesConsent {
                tool: name.to_string(),
                phrase: ask.phrase,
                digest: ask.digest,
            });
        }
        // Nothing runs with reach the user has not granted (verifying would already reach it).
        if let Some(ask) = self.reach_ask(prepared.subject()) {
            self.remember(prepared.subject());
            return Err(CreateError::ReachConsent {
                tool: name.to_string(),
                phrase: ask.phrase,
            });
        }
        let reach = self.reach_granted(prepared.subject());
        let layer = self
            .layer(name.as_str(), prepared.packages.as_ref())
            .await?;
        let staged = self
            .registry
            .stage_hashed(&name, &prepared.request.code, prepared.code_hash.clone())
            .map_err(CreateError::Stage)?;
        let keys = grants.keys;
        let secrets = self.secrets();
        let mut spec = self.spec(
            name.as_str(),
            staged.dir().to_path_buf(),
            python,
            &keys,
            layer,
            reach.as_ref(),
        );
        if let Err(e) = self.npm_layer(&spec).await {
            let _ = self.registry.discard(staged);
            return Err(e);
        }
        spec.uses = self.uses_channel(name.as_str(), &prepared.uses);
        let mut request = VerifyRequest::new(name.clone(), prepared.request.code.clone(), spec);
        request.smoke_test = prepared.request.smoke_test.clone();
        request.thoroughness = prepared.request.thoroughness;
        request.declared = prepared
            .declarations_read
            .then(|| prepared.declared.clone());
        request.redactor = secrets.redactor().cloned();
        request.adversary = self.adversary();
        request.baseline = match self.registry.ledger().baseline(name.as_str(), false) {
            Ok(rows) => rows
                .into_iter()
                .map(|r| r.obligation)
                .chain(prepared.carried_baseline.iter().cloned())
                .collect(),
            Err(e) => {
                let _ = self.registry.discard(staged);
                return Err(CreateError::Baseline(e.to_string()));
            }
        };
        match crate::verify::verify(request).await {
            Ok(verified) => Ok(Checked {
                prepared,
                staged,
                verified,
                keys,
                reach,
            }),
            Err(failure) => {
                let _ = self.registry.discard(staged);
                self.audit(
                    name.as_str(),
                    Event::VerificationFailed,
                    &format!("{}: {}", failure.stage, failure.message),
                );
                Err(CreateError::Verify(failure))
            }
        }
    }

    /// A checked candidate given up: its process stopped, its staged code removed.
    pub async fn discard_checked(&self, checked: Checked) {
        let Checked {
            staged, verified, ..
        } = checked;
        verified.process.shutdown().await;
        if let Err(e) = self.registry.discard(staged) {
            tracing::warn!("removing a staged candidate: {e}");
        }
    }

    /// Commit a checked candidate as a new version of its tool and mount it: its process
    /// becomes the first warm instance, its verdicts and what it met are recorded, and its
    /// trigger check runs.
    pub async fn commit_checked(&self, checked: Checked) -> Result<Created, CreateError> {
        let Checked {
            prepared,
            staged,
            verified,
            keys,
            reach,
        } = checked;
        let name = prepared.request.name.clone();
        let grants = self.fingerprint(&keys, reach.as_ref());
        let secrets = self.secrets();
        let manifest = Manifest {
            description: prepared.request.description.clone(),
            required_env: verified.required_env.clone(),
            functions: verified
                .tools
                .iter()
                .cloned()
                .map(FunctionSpec::from)
                .collect(),
            packages: prepared.packages.clone(),
            uses: prepared.uses.clone(),
            reach: prepared.reach.clone(),
        };
        let functions: Vec<(MountedName, FunctionSpec)> = manifest
            .functions
            .iter()
            .filter_map(|f| {
                // Verification checked both rules; a function that somehow fails them is left
                // out of what is reported rather than reported under a wrong name.
                let function = FunctionName::parse(&f.name).ok()?;
                Some((MountedName::join(&name, &function).ok()?, f.clone()))
            })
            .collect();
        // Its prompts and resources, listed once and kept beside its code: what hosts are
        // shown of them is this list ([`super::offers`]).
        super::offers::keep(&name, &verified.process, &staged.tool_file()).await;
        let version = match self.registry.commit(staged, manifest) {
            Ok(v) => v,
            Err(e) => {
                verified.process.shutdown().await;
                return Err(match e {
                    // Pinned while it was being verified: the pin holds.
                    RegistryError::PinHeld(held) => self.pin_refused(held, &prepared.code_hash),
                    e => CreateError::Store(e),
                });
            }
        };
        let robustness = verified.robustness.to_string();
        let verdicts: Vec<Verdict> = verified
            .verdicts
            .iter()
            .map(|v| Verdict {
                detail: secrets.redact(&v.detail),
                ..v.clone()
            })
            .collect();
        if let Err(e) =
            self.registry
                .ledger()
                .record_verdicts(name.as_str(), version.version, &verdicts)
        {
            tracing::warn!(tool = %name, "recording the verdicts: {e}");
        }
        if let Err(e) =
            self.registry
                .ledger()
                .record_met(name.as_str(), version.version, &verified.met)
        {
            tracing::warn!(tool = %name, "recording what the version met: {e}");
        }
        let required_env = verified.required_env.clone();
        let not_relayed = verified.process.server().not_relayed.clone();
        self.pool
            .adopt(name.as_str(), version.version, grants, verified.process)
            .await;
        if let Err(e) = self.reload() {
            tracing::warn!("reloading the registry: {e}");
        }
        self.changed();
        self.collect_layers();
        let key_notes = self.key_notes(prepared.subject(), &keys);
        let trigger_check = self
            .trigger_check(&name, version.version, &prepared.request.description)
            .await;
        Ok(Created {
            listed: self.snapshot().shown.contains(&name),
            tool: name,
            version: version.version,
            functions,
            required_env,
            keys_granted: keys.keys().cloned().collect(),
            key_notes,
            robustness,
            verdicts,
            trigger_check,
            packages: prepared.packages.as_ref().map(|p| p.lock.describe()),
            unchanged: false,
            not_relayed,
        })
    }

    /// A new version of a pinned tool refused: a `pin_held` event naming who tried, once per
    /// code and pin (an agent retrying, or serve looking at a file each round, adds no more).
    pub(super) fn pin_refused(&self, held: crate::ledger::PinHeld, code_hash: &str) -> CreateError {
        let detail = format!(
            "new code (sha256 {}) refused: version {} is {}",
            crate::pin::short(code_hash),
            held.version,
            held.pin
        );
        tracing::info!(tool = %held.tool, "{detail}");
        if let Err(e) = self
            .registry
            .ledger()
            .claim_once(&held.tool, Event::PinHeld, &detail)
        {
            tracing::warn!(tool = %held.tool, "recording a refusal by the pin: {e}");
        }
        CreateError::PinHeld(held)
    }

    /// The mounted version of the tool, when the request is byte for byte what it was made from
    /// (code and description) and it is listed: created again, it would only be a copy. What
    /// verification found then is read back from the ledger.
    fn unchanged(&self, prepared: &Prepared, grants: &super::Grants) -> Option<Created> {
        let name = &prepared.request.name;
        let current = self.mounted(name.as_str())?;
        if current.code_hash != prepared.code_hash
            || current.description != prepared.request.description
            || !current.state.listed()
        {
            return None;
        }
        let verdicts = self
            .registry
            .ledger()
            .verdicts(name.as_str(), current.version)
            .unwrap_or_default();
        let functions = current
            .functions
            .specs()
            .into_iter()
            .filter_map(|f| {
                let function = FunctionName::parse(&f.name).ok()?;
                Some((MountedName::join(name, &function).ok()?, f.clone()))
            })
            .collect();
        tracing::info!(tool = %name, version = current.version, "create_tool: unchanged");
        Some(Created {
            listed: self.snapshot().shown.contains(name),
            tool: name.clone(),
            version: current.version,
            functions,
            required_env: current.required_env.clone(),
            keys_granted: grants.keys.keys().cloned().collect(),
            key_notes: self.key_notes(prepared.subject(), &grants.keys),
            robustness: format!("unchanged: verified when v{} was created", current.version),
            verdicts,
            trigger_check: serde_json::json!({"skipped": "unchanged code"}),
            packages: current.packages.as_ref().map(|p| p.lock.describe()),
            unchanged: true,
            not_relayed: Vec::new(),
        })
    }
}
