//! The MCP servers users already run, added behind the sandbox: `autotool add NAME
//! pypi:PACKAGE[==VERSION] [-- ARGS…]`.
//!
//! An added PyPI server becomes a tool like any other. autotool writes a small Python file
//! for it ([`shim`]) that declares the package in `REQUIRED_PACKAGES` and the keys, hosts and
//! directories the user named in `REQUIRED_ENV`, `REQUIRED_HOSTS`, `READ_DIRS` and
//! `WRITE_DIRS`, and starts the package's own server. From there it takes the road every tool
//! takes ([`crate::library::Library::create`]): the package resolved wheels-only with every
//! hash locked, installed into a read-only layer, the process confined by the launcher with
//! only what was granted, verified (launched, initialized, listed; no probes: an added
//! server's functions act on the world), mounted as `NAME__function` on every serve of the
//! home, recorded in the ledger, redacted, quarantined when it keeps failing.
//!
//! [`plan`] resolves the package (nothing of it runs) and says what will be installed and
//! granted; the caller shows that and asks; [`add`] records the user's yes (keys, package set,
//! reach), creates the tool and records where it came from ([`record`]).
//!
//! An added npm server is the same, but its file only declares: `NPM = {...}` names the
//! package, its version and integrity, the sha256 of the lockfile that pins its whole tree, the
//! script node runs and its arguments ([`shim::render_npm`]). [`plan`] resolves and locks the
//! tree with the machine's npm ([`crate::npm`]: no install script, no settings but the
//! registry, a cache autotool owns); [`add`] installs that lockfile into a read-only layer after
//! the user's yes; the tool then runs as `node --jitless <entry> ARGS` from that layer, through
//! the launcher (never forked from the Python template), with the reach its file declares.

pub mod shim;

/// Where each added server came from (kept outside this module: the library reads it too).
pub use crate::provenance as record;

use crate::ledger::Event;
use crate::library::{CreateRequest, Library, Prepared};
pub use crate::provenance::AddedVersion;
use autotool_policy::added::ServerSource;
use autotool_policy::names::{KeyName, ToolName};
use autotool_policy::packages::Requirement;
use autotool_policy::reach::DeclaredReach;

/// What the user asked to add.
#[derive(Debug, Clone)]
pub struct AddRequest {
    pub name: ToolName,
    pub source: ServerSource,
    /// A console script or `module:function` (`--entry`).
    pub entry: Option<String>,
    /// Arguments the server is started with (after `--`).
    pub args: Vec<String>,
    /// Keys it gets, by name (`--key`).
    pub keys: Vec<KeyName>,
    /// Hosts and directories (`--host`, `--read`, `--write`).
    pub reach: DeclaredReach,
    /// Variables it is given that are no keys (`--env NAME=VALUE`), in the order given.
    pub settings: Vec<(String, String)>,
    /// Replace an added server of this name with this source's newest version.
    pub upgrade: bool,
    /// The host app it is moved from (`setup --import`).
    pub imported_from: Option<String>,
}

/// Why a server was not added. `Display` is for the user's terminal (already redacted).
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    #[error("{0}")]
    Npm(#[from] crate::npm::NpmError),
    #[error(
        "no value is stored for {0}: store it first with `autotool keys add {0}` (the value is \
         read from the terminal or stdin, never from the command line)"
    )]
    NoKeyValue(KeyName),
    #[error(
        "a tool named `{0}` already exists and is not an added server: choose another name, or \
         remove it first with `autotool tools remove {0}`"
    )]
    NameTaken(String),
    #[error("`{name}` is already added ({origin}): `autotool add {name} … --upgrade` replaces it")]
    AlreadyAdded { name: String, origin: String },
    #[error("{0} resolved to no version of {1}")]
    NotResolved(String, String),
    #[error("{0}")]
    Create(String),
    #[error("--env: {0}")]
    Setting(String),
    #[error("{0}")]
    Other(String),
}

/// A resolved add, waiting for the user's yes.
#[derive(Debug)]
pub struct Plan {
    pub request: AddRequest,
    /// The exact version installed.
    pub package_version: String,
    prepared: Prepared,
    /// The version this would replace (`--upgrade`).
    pub replaces: Option<AddedVersion>,
    /// An npm server's locked tree, installed once the user said yes.
    pub npm: Option<crate::npm::Resolved>,
}

impl Plan {
    /// `pypi:mcp-server-time 2026.10.19`.
    pub fn origin(&self) -> String {
        format!(
            "{}:{} {}",
            self.request.source.registry(),
            self.request.source.package(),
            self.package_version
        )
    }

    /// What `add` shows before it asks, one line each.
    pub fn lines(&self, library: &Library) -> Vec<String> {
        let r = &self.request;
        let mut lines = vec![format!("autotool add {}: {}", r.name, self.origin())];
        if let Some(was) = &self.replaces {
            lines.push(format!(
                "  replaces:  {} (version {})",
                was.origin(),
                was.version
            ));
        }
        let install = match (&self.npm, self.prepared.packages.as_ref()) {
            (Some(npm), _) => format!(
                "{} {} and {} packages it depends on, from {}, each pinned by its sha512 \
                 integrity in a lockfile (sha256 {}); no install script runs",
                npm.package,
                npm.version,
                npm.packages.saturating_sub(1),
                npm.registry,
                &npm.lock[..12]
            ),
            (None, None) => "nothing: the tool runtime holds it all".to_string(),
            (None, Some(set)) => {
                let held = set.lock.packages.len() - set.layer_lock.packages.len();
                let phrase =
                    autotool_policy::packages::install_phrase(&set.layer_lock, &set.source);
                let phrase = phrase
                    .strip_prefix("install ")
                    .unwrap_or(&phrase)
                    .to_string();
                if held == 0 {
                    phrase
                } else {
                    format!("{phrase} (with {held} the tool runtime already holds)")
                }
            }
        };
        lines.push(format!("  install:   {install}"));
        let mut start = match &self.npm {
            Some(npm) => vec![
                format!("{} {}", crate::npm::NODE, crate::npm::NODE_ARGS.join(" ")),
                npm.entry.clone(),
            ],
            None => vec![r.entry.clone().unwrap_or_else(|| r.source.package().into())],
        };
        start.extend(r.args.iter().cloned());
        lines.push(format!("  starts:    {}", start.join(" ")));
        let secrets = library.secrets();
        let keys = if r.keys.is_empty() {
            "none".to_string()
        } else {
            r.keys
                .iter()
                .map(|k| match secrets.allowlists().get(k) {
                    Some(rules) if !rules.is_empty() => format!(
                        "{k} (sent only to {})",
                        rules
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    _ => format!("{k} (no host list: `autotool keys allow {k} HOST` narrows it)"),
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        lines.push(format!("  keys:      {keys}"));
        let list = |v: &[String], none: &str| {
            if v.is_empty() {
                none.to_string()
            } else {
                v.join(", ")
            }
        };
        lines.push(format!(
            "  hosts:     {}",
            list(&r.reach.hosts, "none without a key")
        ));
        lines.push(format!("  reads:     {}", list(&r.reach.read_dirs, "none")));
        lines.push(format!(
            "  writes:    {}",
            list(&r.reach.write_dirs, "none")
        ));
        if !r.settings.is_empty() {
            let shown: Vec<String> = r
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={}", secrets.redact(v)))
                .collect();
            lines.push(format!("  settings:  {}", shown.join(", ")));
        }
        lines.push(
            "Nothing of the package has run. Once you say yes it is installed read-only, started \
             confined (its own namespaces, Landlock, seccomp, the egress proxy) with only the \
             above, and verified: started, initialized, its functions listed."
                .into(),
        );
        lines
    }
}

/// What was added.
#[derive(Debug)]
pub struct Added {
    pub origin: AddedVersion,
    pub created: crate::library::Created,
}

/// Each setting is a plain variable, named once, never a key's name and never holding a key's
/// value: a setting is written in the tool's file and shown, a key never is.
fn check_settings(library: &Library, request: &AddRequest) -> Result<(), AddError> {
    let secrets = library.secrets();
    let mut seen = std::collections::BTreeSet::new();
    if request.settings.len() > autotool_policy::added::MAX_SETTINGS {
        return Err(AddError::Setting(format!(
            "{} settings given; at most {}",
            request.settings.len(),
            autotool_policy::added::MAX_SETTINGS
        )));
    }
    for (name, value) in &request.settings {
        if let Some(problem) = autotool_policy::added::setting_problem(name, value) {
            return Err(AddError::Setting(problem));
        }
        if !seen.insert(name.as_str()) {
            return Err(AddError::Setting(format!("{name} is given twice")));
        }
        if request.keys.iter().any(|k| k.as_str() == name) {
            return Err(AddError::Setting(format!(
                "{name} is given both as a key and as a setting: a key is never a setting"
            )));
        }
        if secrets.redact(value) != *value {
            return Err(AddError::Setting(format!(
                "the value of {name} holds the value of a stored key; a setting is written in \
                 the tool's file and shown: give a secret with `--key` instead"
            )));
        }
    }
    Ok(())
}

fn pin_requirement(req: &Requirement, version: &str) -> Result<Requirement, AddError> {
    let extras = if req.extras.is_empty() {
        String::new()
    } else {
        format!("[{}]", req.extras.join(","))
    };
    Requirement::parse(&format!("{}{extras}=={version}", req.name))
        .map_err(|e| AddError::Other(e.to_string()))
}

fn code_for(request: &AddRequest, requirement: &Requirement) -> String {
    let keys: Vec<String> = request.keys.iter().map(ToString::to_string).collect();
    shim::render(&shim::Shim {
        requirement,
        entry: request.entry.as_deref(),
        args: &request.args,
        keys: &keys,
        reach: &request.reach,
        settings: &request.settings,
    })
}

fn prepare(
    library: &Library,
    request: &AddRequest,
    code: String,
    description: String,
) -> Result<Prepared, AddError> {
    library
        .prepare(CreateRequest {
            name: request.name.clone(),
            code,
            description,
            smoke_test: None,
            thoroughness: crate::verify::Thoroughness::Quick,
        })
        .map_err(|e| AddError::Create(library.secrets().redact(&e.to_string())))
}

async fn prepared_for(
    library: &Library,
    request: &AddRequest,
    requirement: &Requirement,
    version: Option<&str>,
) -> Result<Prepared, AddError> {
    let description = format!(
        "{} {}from PyPI: an MCP server added with `autotool add`",
        requirement.name,
        version.map(|v| format!("{v} ")).unwrap_or_default()
    );
    let mut prepared = prepare(
        library,
        request,
        code_for(request, requirement),
        description,
    )?;
    library
        .resolve_packages(&mut prepared)
        .await
        .map_err(|e| AddError::Create(library.secrets().redact(&e.to_string())))?;
    Ok(prepared)
}

/// Resolve what `request` would install and grant. Nothing of the package runs.
pub async fn plan(library: &Library, request: AddRequest) -> Result<Plan, AddError> {
    let secrets = library.secrets();
    if let Some(missing) = request.keys.iter().find(|k| !secrets.has_value(k)) {
        return Err(AddError::NoKeyValue(missing.clone()));
    }
    check_settings(library, &request)?;
    let current = library
        .registry
        .get(request.name.as_str())
        .map_err(|e| AddError::Other(e.to_string()))?;
    let replaces = match &current {
        None => None,
        Some(v) => match record::of(&library.home, request.name.as_str(), &v.code_hash) {
            None => return Err(AddError::NameTaken(request.name.to_string())),
            Some(was) => Some(was),
        },
    };
    let requirement = match &request.source {
        ServerSource::Pypi(r) => r.clone(),
        ServerSource::Npm { name, version } => {
            let npm = library.npm();
            let resolved = npm
                .resolve(name, version.as_deref(), request.entry.as_deref())
                .await?;
            let keys: Vec<String> = request.keys.iter().map(ToString::to_string).collect();
            let code = shim::render_npm(
                &resolved.server(&request.args),
                &keys,
                &request.reach,
                &request.settings,
            );
            let description = format!(
                "{} {} from npm: an MCP server added with `autotool add`",
                resolved.package, resolved.version
            );
            let prepared = prepare(library, &request, code, description)?;
            return finish(
                request,
                resolved.version.clone(),
                prepared,
                replaces,
                current,
                Some(resolved),
            );
        }
    };
    let first = prepared_for(library, &request, &requirement, None).await?;
    let version = first
        .packages
        .as_ref()
        .and_then(|set| {
            set.lock
                .packages
                .iter()
                .find(|p| p.name == requirement.name)
        })
        .map(|p| p.version.clone())
        .ok_or_else(|| {
            AddError::NotResolved(request.source.to_string(), requirement.name.clone())
        })?;
    let pinned = pin_requirement(&requirement, &version)?;
    let prepared = prepared_for(library, &request, &pinned, Some(&version)).await?;
    finish(request, version, prepared, replaces, current, None)
}

/// The plan, unless it would replace an added server without `--upgrade`.
fn finish(
    request: AddRequest,
    package_version: String,
    prepared: Prepared,
    replaces: Option<AddedVersion>,
    current: Option<crate::version::Version>,
    npm: Option<crate::npm::Resolved>,
) -> Result<Plan, AddError> {
    if let (Some(was), Some(v)) = (&replaces, &current)
        && !request.upgrade
        && v.code_hash != prepared.code_hash
    {
        return Err(AddError::AlreadyAdded {
            name: request.name.to_string(),
            origin: was.origin(),
        });
    }
    Ok(Plan {
        request,
        package_version,
        prepared,
        replaces,
        npm,
    })
}

/// Record the user's yes to everything `plan` showed, then create the tool and record where it
/// came from.
pub async fn add(library: &Library, plan: Plan, via: &str) -> Result<Added, AddError> {
    let Plan {
        request,
        package_version,
        prepared,
        npm,
        ..
    } = plan;
    let ledger_err = |e: crate::ledger::LedgerError| AddError::Other(e.to_string());
    let subject = prepared.subject();
    library
        .approve(subject, &request.keys, via)
        .map_err(ledger_err)?;
    library.approve_packages(subject, via).map_err(ledger_err)?;
    library.approve_reach(subject, via).map_err(ledger_err)?;
    if let Some(resolved) = &npm {
        // Only now, after the yes, is anything of the package fetched and unpacked (and still
        // nothing of it runs: no install script ever does).
        library
            .npm()
            .install(&resolved.server(&request.args))
            .await?;
    }
    let code_hash = prepared.code_hash.clone();
    let created = library
        .create(prepared)
        .await
        .map_err(|e| AddError::Create(library.secrets().redact(&e.to_string())))?;
    let origin = AddedVersion {
        version: created.version,
        code_hash,
        registry: request.source.registry().to_string(),
        package: request.source.package().to_string(),
        package_version,
        entry: request.entry.clone(),
        args: request.args.clone(),
        added_at: crate::ledger::format_ms(crate::ledger::now_ms()),
        imported_from: request.imported_from.clone(),
    };
    record::record(&library.home, request.name.as_str(), origin.clone())
        .map_err(|e| AddError::Other(format!("recording where it came from: {e}")))?;
    library.audit(
        request.name.as_str(),
        Event::Created,
        &format!(
            "version {} added from {}{}",
            created.version,
            origin.origin(),
            request
                .imported_from
                .as_deref()
                .map(|a| format!(" (moved from {a})"))
                .unwrap_or_default()
        ),
    );
    Ok(Added { origin, created })
}
