//! What a tool may be given: the keys autotool holds ([`Secrets`]: their names, offered to the
//! agent; their values; their allowlists; the redactor that keeps every value from the model),
//! which of them a tool version is granted (consent on record, [`Library::granted`]), and the
//! process a version runs as: its environment and egress proxy (`Library::spec`).

use super::Library;
use crate::consent::{self, Ask};
use crate::credentials::Stamp;
use crate::ledger::{Event, PendingConsent, now_ms};
use crate::redact::Redactor;
use crate::tool::process::{SandboxMode, ToolSpec};
use crate::tool::runtime::Python;
use crate::version::Subject;
use autotool_policy::hosts::AllowRule;
use autotool_policy::names::KeyName;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What autotool knows of the keys: their names (offered to the agent), the value each
/// resolves to now, their allowlists, and a redactor holding every value (shadowed ones too),
/// so no value reaches the model. Reread when the key files change.
#[derive(Default)]
pub struct Secrets {
    pub(super) stamp: Option<Stamp>,
    pub names: Vec<KeyName>,
    redactor: Option<Arc<Redactor>>,
    /// Whether values are known that the redactor could not take in: then no key is granted.
    unredactable: bool,
    values: BTreeMap<KeyName, String>,
    allowlists: BTreeMap<KeyName, Vec<AllowRule>>,
}

impl std::fmt::Debug for Secrets {
    /// Names only: a value is never formatted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.names)
            .field("allowlists", &self.allowlists)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// Secrets holding exactly `values` (for tests of what reaches the model).
    pub fn with_values(values: &[(&str, &str)]) -> Secrets {
        let redactor = Redactor::new(values).ok().map(Arc::new);
        Secrets {
            stamp: None,
            names: values
                .iter()
                .filter_map(|(k, _)| KeyName::parse(k).ok())
                .collect(),
            unredactable: redactor.is_none() && !values.is_empty(),
            redactor,
            values: values
                .iter()
                .filter_map(|(k, v)| Some((KeyName::parse(k).ok()?, v.to_string())))
                .collect(),
            allowlists: BTreeMap::new(),
        }
    }

    /// Whether `key` has a value now.
    pub fn has_value(&self, key: &KeyName) -> bool {
        self.values.contains_key(key)
    }

    /// The value `key` resolves to now (environment, keychain, file: first wins). `None` for
    /// every key when the values could not all be put in the redactor: a key the model might
    /// see back is never handed out.
    pub fn value(&self, key: &KeyName) -> Option<&str> {
        if self.unredactable {
            return None;
        }
        self.values.get(key).map(String::as_str)
    }

    /// Every key's allowlist; a key missing here has none.
    pub fn allowlists(&self) -> &BTreeMap<KeyName, Vec<AllowRule>> {
        &self.allowlists
    }

    /// The redactor of every value known, if there are any.
    pub fn redactor(&self) -> Option<&Arc<Redactor>> {
        self.redactor.as_ref()
    }

    /// `text` with every known secret replaced by `[REDACTED:NAME]`.
    pub fn redact(&self, text: &str) -> String {
        match &self.redactor {
            Some(r) => r.redact(text).into_owned(),
            None => text.to_string(),
        }
    }

    /// Redact every string (and object key) of `value`.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        if let Some(r) = &self.redactor {
            r.redact_json(value);
        }
    }
}

/// What a tool version may hold, as of one read of the approvals ([`Library::grants`]).
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// The keys the user must still be asked for, and why.
    pub asks: Vec<Ask>,
    /// The keys it is given, with their values (never formatted: see `Debug` of the map's
    /// callers; values are only ever put into the tool's environment).
    pub keys: BTreeMap<KeyName, String>,
    /// Its package set, when the user must still be asked about it.
    pub packages: Option<crate::consent::PackagesAsk>,
    /// Its declared reach not yet granted, when the user must still be asked about it.
    pub reach: Option<crate::consent::ReachAsk>,
}

impl Library {
    /// What autotool knows of the keys right now.
    pub fn secrets(&self) -> Arc<Secrets> {
        self.secrets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reread the key store when it changed: names for the agent, values for the redactor.
    /// Returns whether the names changed (the tool list mentions them).
    pub fn refresh_keys(&self) -> bool {
        let stamp = self.keys.stamp();
        let old = self.secrets();
        if old.stamp.as_ref() == Some(&stamp) {
            return false;
        }
        let (values, errors) = self.keys.known_values();
        for e in errors {
            tracing::warn!("reading a key: {e}");
        }
        let (redactor, unredactable) = match Redactor::new(&values) {
            Ok(r) => (Some(Arc::new(r)), false),
            Err(e) => {
                // Fail closed: a value the redactor cannot find is never handed to a tool.
                tracing::error!("building the redactor: {e}; no key is given to any tool");
                (None, !values.is_empty())
            }
        };
        let mut names: Vec<KeyName> = self
            .keys
            .list()
            .map(|l| {
                l.into_iter()
                    .filter(|k| k.source.is_some())
                    .filter_map(|k| KeyName::parse(&k.name).ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let mut current = BTreeMap::new();
        for name in &names {
            match self.keys.get(name.as_str()) {
                Ok(Some((value, _))) => {
                    current.insert(
                        name.clone(),
                        String::from_utf8_lossy(value.expose()).into_owned(),
                    );
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("reading key {name}: {e}"),
            }
        }
        let allowlists = match self.keys.allowlists() {
            Ok(lists) => lists
                .into_iter()
                .filter_map(|(k, entries)| {
                    Some((KeyName::parse(&k).ok()?, consent::parse_list(&entries)))
                })
                .collect(),
            Err(e) => {
                // Fail closed: a list that cannot be read allows nothing for every key.
                tracing::error!("reading the allowlists: {e}; keys are sent nowhere");
                names.iter().map(|n| (n.clone(), Vec::new())).collect()
            }
        };
        let changed = names != old.names;
        if let Some(r) = &redactor {
            crate::logging::set_redactor(r.clone());
        }
        *self.secrets.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Secrets {
            stamp: Some(stamp),
            names,
            redactor,
            unredactable,
            values: current,
            allowlists,
        });
        changed
    }

    fn sandboxed(&self) -> bool {
        self.settings.sandbox == SandboxMode::Strict
    }

    /// The keys `subject` wants, holds a value for, and has no approval for, with why each is
    /// asked. Empty under `--dangerously-allow-all-tools`.
    pub fn consent_asks(&self, subject: Subject<'_>) -> Vec<Ask> {
        if self.settings.allow_all_keys {
            return Vec::new();
        }
        let secrets = self.secrets();
        let known: Vec<KeyName> = subject
            .declared
            .iter()
            .filter(|k| secrets.has_value(k))
            .cloned()
            .collect();
        if known.is_empty() {
            return Vec::new();
        }
        let approvals = match self.registry.ledger().approvals(subject.tool.as_str()) {
            Ok(a) => a,
            Err(e) => {
                // Fail closed: without the record, every key is asked.
                tracing::warn!("reading approvals: {e}");
                Vec::new()
            }
        };
        consent::uncovered(
            subject,
            &known,
            secrets.allowlists(),
            &approvals,
            self.sandboxed(),
        )
    }

    /// What `subject` may hold now, the approvals on record read once: the keys still to be
    /// asked for, and those granted with their values (declared, holding a value, approved;
    /// all of them under `--dangerously-allow-all-tools`).
    pub fn grants(&self, subject: Subject<'_>) -> Grants {
        let secrets = self.secrets();
        let asks = self.consent_asks(subject);
        let keys = subject
            .declared
            .iter()
            .filter(|k| !asks.iter().any(|a| &a.key == *k))
            .filter_map(|k| secrets.value(k).map(|v| (k.clone(), v.to_string())))
            .collect();
        Grants {
            asks,
            keys,
            packages: self.packages_ask(subject),
            reach: self.reach_ask(subject),
        }
    }

    /// Record the user's yes to `keys` of `subject`.
    pub fn approve(
        &self,
        subject: Subject<'_>,
        keys: &[KeyName],
        via: &str,
    ) -> Result<(), crate::ledger::LedgerError> {
        let secrets = self.secrets();
        let rows = consent::rows_for(subject, keys, secrets.allowlists(), self.sandboxed(), via);
        self.registry.ledger().grant(&rows)
    }

    /// An audit event about `tool`; a failure to record it is logged.
    pub fn audit(&self, tool: &str, kind: Event, detail: &str) {
        let detail = self.secrets().redact(detail);
        if let Err(e) = self.registry.event(Some(tool), kind, &detail) {
            tracing::warn!("recording a {kind} event: {e}");
        }
    }

    /// Remember the question, so `autotool tools approve` can answer it even if the host never
    /// does (it may drop an `input_required` result, or the user may close the dialog).
    pub fn remember(&self, subject: Subject<'_>) {
        let pending = PendingConsent {
            tool: subject.tool.to_string(),
            code_hash: subject.code_hash.to_string(),
            declared: subject.declared.iter().map(ToString::to_string).collect(),
            packages: subject.packages.and_then(|p| serde_json::to_string(p).ok()),
            reach: subject.reach.and_then(|r| serde_json::to_string(r).ok()),
            asked_at: now_ms(),
        };
        if let Err(e) = self.registry.ledger().set_pending(&pending) {
            tracing::warn!("remembering the consent question: {e}");
        }
    }

    /// Which declared keys the tool did not get, and why, for the agent.
    pub fn key_notes(
        &self,
        subject: Subject<'_>,
        granted: &BTreeMap<KeyName, String>,
    ) -> Vec<String> {
        let secrets = self.secrets();
        subject
            .declared
            .iter()
            .filter(|k| !granted.contains_key(*k))
            .map(|k| {
                if !secrets.has_value(k) {
                    format!(
                        "{k} is not set: ask the user to run `autotool keys add {k}`, then call \
                         create_tool again"
                    )
                } else {
                    format!(
                        "{k} is not approved for {tool}: the user can run `autotool tools \
                         approve {tool} {k}`",
                        tool = subject.tool
                    )
                }
            })
            .collect()
    }

    /// The egress proxy for `tool` holding `keys` and granted the hosts of `reach`: where it
    /// may go is the intersection of its keys' allowlists, or without a key that has one, the
    /// hosts of `reach` (`None`: a version kept from before reach was declared, any public
    /// host); the host's loopback only on the ports those name and the ports of serve's own
    /// `*_API_BASE` variables, never one of autotool's listeners
    /// ([`autotool_policy::hosts::decide`]); refusals are audit events.
    fn egress(
        &self,
        tool: &str,
        keys: &BTreeMap<KeyName, String>,
        reach: Option<&autotool_policy::reach::DeclaredReach>,
    ) -> crate::egress::EgressConfig {
        let mut lists = autotool_policy::hosts::KeyLists::new(tool);
        if let Some(reach) = reach {
            lists = lists.with_reach(reach.host_rules());
        }
        let secrets = self.secrets();
        for key in keys.keys() {
            lists = lists.with_key(autotool_policy::hosts::KeyAllowlist {
                key: key.to_string(),
                rules: secrets.allowlists().get(key).cloned(),
            });
        }
        let mut config = crate::egress::EgressConfig::new(lists).with_api_bases(&self.api_bases);
        let registry = self.registry.clone();
        let tool_name = tool.to_string();
        let refusals = self.refusals.clone();
        config.events = Some(Arc::new(move |event: crate::egress::EgressEvent| {
            let detail = format!("{}: {event}", event.target);
            tracing::warn!(tool = tool_name, "egress refused: {detail}");
            refusals.push(&tool_name, event.target.to_string());
            let _ = registry.event(Some(&tool_name), Event::EgressDenied, &detail);
        }));
        config
    }

    /// The environment of a process of `tool` holding `keys`, assembled once: the approved
    /// keys, the OS basics and the `*_API_BASE` overrides (the proxy variables are added where
    /// the listener is known, [`crate::tool::process`]).
    fn environment(
        &self,
        tool: &str,
        keys: &BTreeMap<KeyName, String>,
    ) -> BTreeMap<String, String> {
        let keys: BTreeMap<String, String> = keys
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let mut env = autotool_policy::launch::tool_environment(&keys, &self.api_bases, None);
        if self.settings.sandbox == SandboxMode::Off {
            // Unconfined, the sandbox's /tmp and home do not exist: a private scratch directory
            // under the home stands in for both.
            let scratch = self.home.root().join("scratch").join(tool);
            let _ = std::fs::create_dir_all(&scratch);
            let s = scratch.display().to_string();
            env.insert("HOME".into(), s.clone());
            env.insert("TMPDIR".into(), s);
        }
        env
    }

    /// How to start a process of `tool` from `dir` holding `keys`, with the package layer
    /// `packages` mounted, granted `reach` (what [`Library::reach_granted`] says; `None`: a
    /// version kept from before reach was declared).
    pub(super) fn spec(
        &self,
        tool: &str,
        dir: PathBuf,
        python: Python,
        keys: &BTreeMap<KeyName, String>,
        packages: Option<PathBuf>,
        reach: Option<&autotool_policy::reach::DeclaredReach>,
    ) -> ToolSpec {
        let mut spec = ToolSpec::new(
            dir,
            crate::version::TOOL_FILE,
            python,
            self.settings.sandbox,
        );
        spec.env = self.environment(tool, keys);
        spec.packages = packages;
        spec.egress = Some(self.egress(tool, keys, reach));
        spec.user_dirs = reach.map(|r| self.user_dirs(tool, r)).unwrap_or_default();
        spec.limits = self.settings.limits;
        spec.max_output_bytes = self.settings.max_output_bytes;
        spec.launcher = self.settings.launcher.clone();
        spec.template = self.template_shares();
        spec.stderr_file = Some(crate::tool::process::StderrFile {
            path: self.home.tool_log(tool),
            redactor: self.secrets().redactor().cloned(),
        });
        let code = std::fs::read_to_string(spec.tool_dir.join(crate::version::TOOL_FILE));
        if let Ok(code) = &code {
            spec.npm = self.npm_run(tool, code);
            // An added server's settings (`--env`): plain variables, never over a key or
            // anything autotool sets (the verifier refused such a file before it ran).
            match crate::verify::declarations::settings(code) {
                Ok(settings) => {
                    for (name, value) in settings {
                        spec.env.entry(name).or_insert(value);
                    }
                }
                Err(e) => tracing::warn!(tool, "its SETTINGS cannot be read: {e}"),
            }
        }
        spec
    }

    /// How an added npm server whose file is `code` runs: what it declares in `NPM`, read
    /// statically, with the layer its lockfile names. `None` for a Python tool (and for a
    /// declaration that cannot be read: the verifier refuses that file with the reason).
    fn npm_run(&self, tool: &str, code: &str) -> Option<crate::npm::NpmRun> {
        match crate::verify::declarations::npm(code) {
            Ok(Some(server)) => Some(crate::npm::NpmRun {
                layer: self.home.layers_dir().join(server.layer_name()),
                entry: server.entry.clone(),
                args: server.args.clone(),
                server,
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(tool, "its NPM declaration cannot be read: {e}");
                None
            }
        }
    }

    /// The granted directories of `reach`, resolved for the launcher
    /// ([`crate::tool::dirs::resolve_grant`]: `~` expanded, symlinks and `..` resolved once,
    /// the home itself, `~/.ssh`, autotool's home, `/etc` and the like refused unless the user
    /// widened the rule, `autotool dirs widen`). One that cannot be granted (gone, refused) is
    /// left out, with a warning and a `reach_refused` event saying why: the tool runs without
    /// it and its reads there fail.
    fn user_dirs(
        &self,
        tool: &str,
        reach: &autotool_policy::reach::DeclaredReach,
    ) -> Vec<autotool_policy::UserDir> {
        if reach.read_dirs.is_empty() && reach.write_dirs.is_empty() {
            return Vec::new();
        }
        let Some(user_home) = std::env::var_os("HOME").map(PathBuf::from) else {
            tracing::warn!(
                tool,
                "HOME is not set: no directory of the user's is granted"
            );
            return Vec::new();
        };
        let widened = self.widened_dirs();
        let read = reach.read_dirs.iter().map(|d| (d, false));
        let write = reach.write_dirs.iter().map(|d| (d, true));
        read.chain(write)
            .filter_map(|(declared, write)| {
                match crate::tool::dirs::resolve_grant(
                    declared,
                    write,
                    &user_home,
                    self.home.root(),
                    &widened,
                ) {
                    Ok(dir) => Some(dir),
                    Err(why) => {
                        tracing::warn!(tool, "{declared} is not mounted: {why}");
                        self.audit(
                            tool,
                            Event::ReachRefused,
                            &format!("directory {declared} not mounted: {why}"),
                        );
                        None
                    }
                }
            })
            .collect()
    }

    /// The directories a tool template shares, when tools are forked from one
    /// ([`crate::tool::template`]).
    fn template_shares(&self) -> Option<crate::tool::template::Shares> {
        (self.settings.fork_tools && self.settings.sandbox == SandboxMode::Strict).then(|| {
            crate::tool::template::Shares {
                tools: self.home.tools_dir(),
                layers: self.home.layers_dir(),
            }
        })
    }

    /// Start the template of `python` ahead of the first tool, when tools are forked.
    pub fn warm_template(&self, python: &Python) {
        let Some(shares) = self.template_shares() else {
            return;
        };
        let launcher = match &self.settings.launcher {
            Some(path) => path.clone(),
            None => match crate::tool::launcher::locate() {
                Ok(path) => path,
                Err(_) => return,
            },
        };
        crate::tool::template::warm(&launcher, &shares, python);
    }

    /// A fingerprint of what a process was given: the keys, their values and allowlists, the
    /// reach granted and, for a tool granted directories, the deny rules widened. A warm process whose fingerprint differs from the call's is replaced.
    pub(super) fn fingerprint(
        &self,
        keys: &BTreeMap<KeyName, String>,
        reach: Option<&autotool_policy::reach::DeclaredReach>,
    ) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let secrets = self.secrets();
        let mut h = self.grants_hasher.build_hasher();
        reach
            .map(|r| (&r.hosts, &r.read_dirs, &r.write_dirs))
            .hash(&mut h);
        // A rule widened or narrowed since changes which directories are mounted.
        if reach.is_some_and(|r| !r.read_dirs.is_empty() || !r.write_dirs.is_empty()) {
            self.widened_dirs().hash(&mut h);
        }
        for (k, v) in keys {
            k.hash(&mut h);
            v.hash(&mut h);
            secrets.allowlists().get(k).hash(&mut h);
        }
        h.finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::home::Home;
    use crate::library::Settings;
    use autotool_policy::hosts::{KeyAllowlist, KeyLists};
    use autotool_policy::launch::DEFAULT_EGRESS_PORT;
    use autotool_policy::{Egress, LaunchPolicy, Limits};

    /// The whole launch policy and the whole environment of a confined tool holding one key
    /// with an allowlist, in one comparison each: a variable, a mount, a limit or a rule
    /// added, lost or changed anywhere on the way shows here.
    #[test]
    fn a_tool_holding_a_key_with_an_allowlist_gets_exactly_this() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            sandbox: SandboxMode::Strict,
            ..Settings::default()
        };
        let library = Library::new(settings, Home::at(dir.path())).unwrap();
        // The library holds a weak reference to itself (its tools' uses channels).
        let mut library = Arc::try_unwrap(library).unwrap();
        let lib = &mut library;
        lib.api_bases = BTreeMap::from([(
            "OPENAI_API_BASE".to_string(),
            "http://127.0.0.1:4010/v1".to_string(),
        )]);
        let key = KeyName::parse("WEATHER_KEY").unwrap();
        let mut secrets = Secrets::with_values(&[
            ("WEATHER_KEY", "wk-0123456789abcdef"),
            ("OTHER_KEY", "ok-not-granted-0000"),
        ]);
        secrets.allowlists.insert(
            key.clone(),
            consent::parse_list(&["api.weather.example".to_string()]),
        );
        *lib.secrets.write().unwrap() = Arc::new(secrets);

        let granted = BTreeMap::from([(key, "wk-0123456789abcdef".to_string())]);
        // A runtime (a virtual environment, mounted at /runtime) on a base Python under
        // /usr/local.
        let python = Python {
            interpreter: PathBuf::from("/home/u/.autotool/runtime/bin/python3"),
            runtime_dirs: vec![PathBuf::from("/usr/local")],
            venv: Some(PathBuf::from("/home/u/.autotool/runtime")),
            version: "3.12".to_string(),
        };
        let tool_dir = dir.path().join("tools/weather/3");
        let spec = lib.spec("weather", tool_dir.clone(), python, &granted, None, None);
        let policy = crate::tool::process::launch_policy(&spec, Some(DEFAULT_EGRESS_PORT));
        let proxy = format!("http://127.0.0.1:{DEFAULT_EGRESS_PORT}");
        let env: BTreeMap<String, String> = [
            ("ALL_PROXY", proxy.as_str()),
            ("HOME", "/home/tool"),
            ("HTTPS_PROXY", &proxy),
            ("HTTP_PROXY", &proxy),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C.UTF-8"),
            ("LOGNAME", "tool"),
            ("NO_PROXY", ""),
            ("OPENAI_API_BASE", "http://127.0.0.1:4010/v1"),
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("PYTHONUTF8", "1"),
            ("SSL_CERT_DIR", "/etc/ssl/certs"),
            ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
            ("TMPDIR", "/tmp"),
            ("USER", "tool"),
            // The granted key, and no other (OTHER_KEY has a value but no grant).
            ("WEATHER_KEY", "wk-0123456789abcdef"),
            ("all_proxy", &proxy),
            ("http_proxy", &proxy),
            ("https_proxy", &proxy),
            ("no_proxy", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let paths = |p: &[&str]| p.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(
            policy,
            LaunchPolicy {
                tool_dir,
                tool_file: "tool.py".into(),
                interpreter: "/home/u/.autotool/runtime/bin/python3".into(),
                interpreter_args: vec!["-I".into(), "-B".into()],
                runtime_dirs: paths(&["/usr/local"]),
                runtime: Some("/home/u/.autotool/runtime".into()),
                packages: None,
                system_dirs: paths(&[
                    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"
                ]),
                etc_files: paths(&[
                    "/etc/ld.so.cache",
                    "/etc/ld.so.conf",
                    "/etc/localtime",
                    "/etc/nsswitch.conf",
                    "/etc/protocols",
                    "/etc/services",
                    "/etc/mime.types",
                    "/etc/ssl/certs",
                    "/etc/ssl/openssl.cnf",
                    "/etc/ca-certificates.conf",
                    "/etc/pki/tls/certs",
                    "/etc/alternatives",
                ]),
                env,
                limits: Limits {
                    memory_bytes: 2 << 30,
                    threads: 64,
                    open_files: 256,
                    file_size_bytes: 64 << 20,
                    cpu_seconds: 3600,
                    tmp_bytes: 64 << 20,
                },
                keep_fds: vec![],
                egress: Some(Egress {
                    report_fd: 4,
                    port: DEFAULT_EGRESS_PORT,
                }),
                uses_fd: None,
                user_dirs: vec![],
                layer_program: None,
                min_landlock_abi: 6,
                hostname: "autotool".into(),
            }
        );
        // Where the key may go: the proxy holds the tool, its one key and that key's list.
        let egress = spec.egress.as_ref().unwrap();
        assert_eq!(
            *egress.lists.borrow(),
            KeyLists::new("weather").with_key(
                KeyAllowlist::parse("WEATHER_KEY", Some(&["api.weather.example"])).unwrap()
            )
        );
        // The same policy the launcher reads: it survives its JSON unchanged.
        let json = serde_json::to_vec(&policy).unwrap();
        assert_eq!(LaunchPolicy::from_json(&json).unwrap(), policy);

        // The same tool declaring USES: one more descriptor and the variable naming it, nothing
        // else.
        let mut composite = spec.clone();
        composite.uses = lib.uses_channel("weather", &["geo__lookup".to_string()]);
        let mut with_uses =
            crate::tool::process::launch_policy(&composite, Some(DEFAULT_EGRESS_PORT));
        assert_eq!(with_uses.uses_fd, Some(5));
        assert_eq!(
            with_uses.env.remove("AUTOTOOL_USES_FD").as_deref(),
            Some("5")
        );
        with_uses.uses_fd = None;
        assert_eq!(with_uses, policy);
        assert!(lib.uses_channel("weather", &[]).is_none());
    }
}
