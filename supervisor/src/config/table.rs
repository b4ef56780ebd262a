//! [`SETTINGS`]: every setting once, with its flag, variable, file key, reader and text.

use super::units::{
    ValueError, bytes, count, duration, rate, show_bytes, show_duration, to_u32, to_usize,
};
use super::{Layer, Values};
use crate::tool::process::SandboxMode;
use std::path::PathBuf;
use std::time::Duration;

/// Reads a setting's text into [`Values`]: `Ok(Some(note))` when it took the value with a
/// remark, `Err(why)` when the text is not a value of the setting.
pub(super) type Apply = fn(&mut Values, &str, Layer) -> Result<Option<String>, ValueError>;

/// One setting: its names in each layer, how it is read, and what it is for.
#[derive(Debug)]
pub struct Setting {
    /// What `autotool config` calls it; sections are dotted (`limits.memory_bytes`).
    pub name: &'static str,
    /// `serve`'s flag, if it has one.
    pub flag: Option<&'static str>,
    /// The environment variable.
    pub env: &'static str,
    /// The key in `config.toml` (`None`: the environment only).
    pub key: Option<&'static str>,
    /// One line: what it does.
    pub description: &'static str,
    pub(super) apply: Apply,
    show: fn(&Values) -> String,
}

impl Setting {
    /// Its value in `values`, as text every layer accepts back.
    pub fn show(&self, values: &Values) -> String {
        (self.show)(values)
    }
}

/// Every setting, in the order `autotool config` prints them.
pub static SETTINGS: &[Setting] = &[
    Setting {
        name: "sandbox",
        flag: Some("--sandbox"),
        env: "AUTOTOOL_SANDBOX",
        key: Some("sandbox"),
        description: "`strict` confines every tool through the launcher; `off` runs tools as \
                      plain subprocesses (inside a container or VM)",
        apply: apply_sandbox,
        show: |v| match v.serve.sandbox {
            SandboxMode::Strict => "strict".into(),
            SandboxMode::Off => "off".into(),
        },
    },
    Setting {
        name: "consent",
        flag: Some("--dangerously-allow-all-tools"),
        env: "AUTOTOOL_CONSENT",
        key: Some("consent"),
        description: "`ask` asks the user before a tool gets a key or has packages installed; \
                      `dangerously-allow-all` grants every declared key, package set and reach \
                      (hosts, directories) without asking",
        apply: apply_consent,
        show: |v| {
            if v.serve.allow_all_keys {
                ALLOW_ALL.into()
            } else {
                "ask".into()
            }
        },
    },
    Setting {
        name: "call_timeout",
        flag: Some("--call-timeout"),
        env: "AUTOTOOL_CALL_TIMEOUT",
        key: Some("call_timeout"),
        description: "wall-clock bound on one tool call",
        apply: |v, raw, _| {
            v.serve.call_timeout = duration(raw, Duration::from_secs(1))?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.call_timeout),
    },
    Setting {
        name: "idle_timeout",
        flag: Some("--idle-timeout"),
        env: "AUTOTOOL_IDLE_TIMEOUT",
        key: Some("idle_timeout"),
        description: "a tool process unused this long is stopped (the next call starts it)",
        apply: |v, raw, _| {
            v.serve.idle_timeout = duration(raw, Duration::from_secs(1))?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.idle_timeout),
    },
    Setting {
        name: "fork_tools",
        flag: None,
        env: "AUTOTOOL_FORK_TOOLS",
        key: Some("fork_tools"),
        description: "`on` forks confined tools from a template that has imported the SDK \
                      (milliseconds to start, shared memory); `off` starts each through the \
                      launcher",
        apply: |v, raw, _| {
            v.serve.fork_tools = on_off(raw)?;
            Ok(None)
        },
        show: |v| if v.serve.fork_tools { "on" } else { "off" }.into(),
    },
    Setting {
        name: "tool_processes",
        flag: None,
        env: "AUTOTOOL_TOOL_PROCESSES",
        key: Some("tool_processes"),
        description: "most processes one tool runs at once when it is called concurrently \
                      (also at most the number of cores; 1: one process per tool)",
        apply: |v, raw, _| {
            v.serve.tool_processes = to_usize(count(raw, 1)?)?;
            Ok(None)
        },
        show: |v| v.serve.tool_processes.to_string(),
    },
    Setting {
        name: "create_hold",
        flag: None,
        env: "AUTOTOOL_CREATE_HOLD",
        key: Some("create_hold"),
        description: "how long create_tool waits for its verification before answering that it \
                      continues (0: until it ends)",
        apply: |v, raw, _| {
            v.serve.create_hold = duration(raw, Duration::ZERO)?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.create_hold),
    },
    Setting {
        name: "max_output_bytes",
        flag: Some("--max-output-bytes"),
        env: "AUTOTOOL_MAX_OUTPUT_BYTES",
        key: Some("max_output_bytes"),
        description: "text a tool result may carry before it is cut",
        apply: |v, raw, _| {
            v.serve.max_output_bytes = to_usize(bytes(raw, 1 << 10)?)?;
            Ok(None)
        },
        show: |v| show_bytes(v.serve.max_output_bytes as u64),
    },
    Setting {
        name: "max_code_bytes",
        flag: None,
        env: "AUTOTOOL_MAX_CODE_BYTES",
        key: Some("max_code_bytes"),
        description: "largest `code` create_tool accepts",
        apply: |v, raw, _| {
            v.serve.max_code_bytes = to_usize(bytes(raw, 1 << 10)?)?;
            Ok(None)
        },
        show: |v| show_bytes(v.serve.max_code_bytes as u64),
    },
    Setting {
        name: "packages_limit",
        flag: None,
        env: "AUTOTOOL_PACKAGES_LIMIT",
        key: Some("packages_limit"),
        description: "most disk one tool's installed packages may take (REQUIRED_PACKAGES)",
        apply: |v, raw, _| {
            v.serve.packages.layer_bytes = bytes(raw, 1 << 20)?;
            Ok(None)
        },
        show: |v| show_bytes(v.serve.packages.layer_bytes),
    },
    Setting {
        name: "packages_timeout",
        flag: None,
        env: "AUTOTOOL_PACKAGES_TIMEOUT",
        key: Some("packages_timeout"),
        description: "bound on resolving, and on installing, one tool's packages",
        apply: |v, raw, _| {
            v.serve.packages.timeout = duration(raw, Duration::from_secs(1))?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.packages.timeout),
    },
    Setting {
        name: "poll_interval",
        flag: None,
        env: "AUTOTOOL_POLL_INTERVAL",
        key: Some("poll_interval"),
        description: "how often serve looks for tools other autotool processes changed",
        apply: |v, raw, _| {
            v.serve.poll_interval = duration(raw, Duration::from_millis(10))?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.poll_interval),
    },
    Setting {
        name: "follow_interval",
        flag: None,
        env: "AUTOTOOL_FOLLOW_INTERVAL",
        key: Some("follow_interval"),
        description: "how often serve looks for new versions in the team libraries it follows",
        apply: |v, raw, _| {
            v.serve.follow_interval = duration(raw, Duration::from_secs(1))?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.follow_interval),
    },
    Setting {
        name: "list_limit",
        flag: None,
        env: "AUTOTOOL_LIST_LIMIT",
        key: Some("list_limit"),
        description: "most entries one tools/list answer carries, built-ins included (0: no limit); the rest are found with search_tools",
        apply: |v, raw, _| {
            v.serve.list_limit = to_usize(count(raw, 0)?)?;
            Ok(None)
        },
        show: |v| v.serve.list_limit.to_string(),
    },
    Setting {
        name: "launcher",
        flag: None,
        env: "AUTOTOOL_LAUNCHER",
        key: Some("launcher"),
        description: "the autotool-launcher binary (`auto`: the installed one, else the one \
                      beside autotool)",
        apply: |v, raw, layer| {
            if raw == "auto" {
                v.serve.launcher = None;
                return Ok(None);
            }
            let path = PathBuf::from(raw);
            if layer == Layer::File && !path.is_absolute() {
                return Err(ValueError::LauncherNotAbsolute);
            }
            v.serve.launcher = Some(path);
            Ok(None)
        },
        show: |v| match &v.serve.launcher {
            Some(p) => p.display().to_string(),
            None => "auto".into(),
        },
    },
    Setting {
        name: "limits.memory_bytes",
        flag: None,
        env: "AUTOTOOL_LIMITS_MEMORY_BYTES",
        key: Some("limits.memory_bytes"),
        description: "address space of a confined tool (RLIMIT_AS)",
        apply: |v, raw, _| {
            v.serve.limits.memory_bytes = bytes(raw, 1)?;
            Ok(None)
        },
        show: |v| show_bytes(v.serve.limits.memory_bytes),
    },
    Setting {
        name: "limits.threads",
        flag: None,
        env: "AUTOTOOL_LIMITS_THREADS",
        key: Some("limits.threads"),
        description: "threads of a confined tool (RLIMIT_NPROC in its namespace)",
        apply: |v, raw, _| {
            v.serve.limits.threads = count(raw, 1)?;
            Ok(None)
        },
        show: |v| v.serve.limits.threads.to_string(),
    },
    Setting {
        name: "limits.open_files",
        flag: None,
        env: "AUTOTOOL_LIMITS_OPEN_FILES",
        key: Some("limits.open_files"),
        description: "open descriptors of a tool (RLIMIT_NOFILE)",
        apply: |v, raw, _| {
            v.serve.limits.open_files = count(raw, 1)?;
            Ok(None)
        },
        show: |v| v.serve.limits.open_files.to_string(),
    },
    Setting {
        name: "limits.file_size_bytes",
        flag: None,
        env: "AUTOTOOL_LIMITS_FILE_SIZE_BYTES",
        key: Some("limits.file_size_bytes"),
        description: "largest file a tool may write (RLIMIT_FSIZE)",
        apply: |v, raw, _| {
            v.serve.limits.file_size_bytes = bytes(raw, 1)?;
            Ok(None)
        },
        show: |v| show_bytes(v.serve.limits.file_size_bytes),
    },
    Setting {
        name: "limits.cpu_seconds",
        flag: None,
        env: "AUTOTOOL_LIMITS_CPU_SECONDS",
        key: Some("limits.cpu_seconds"),
        description: "CPU seconds over a tool process's life (RLIMIT_CPU); it is restarted \
                      after",
        apply: |v, raw, _| {
            v.serve.limits.cpu_seconds = count(raw, 1)?;
            Ok(None)
        },
        show: |v| v.serve.limits.cpu_seconds.to_string(),
    },
    Setting {
        name: "limits.tmp_bytes",
        flag: None,
        env: "AUTOTOOL_LIMITS_TMP_BYTES",
        key: Some("limits.tmp_bytes"),
        description: "size of each private tmpfs of a confined tool (/tmp and its home)",
        apply: |v, raw, _| {
            v.serve.limits.tmp_bytes = bytes(raw, 1)?;
            Ok(None)
        },
        show: |v| show_bytes(v.serve.limits.tmp_bytes),
    },
    Setting {
        name: "lifecycle.promote_after",
        flag: None,
        env: "AUTOTOOL_LIFECYCLE_PROMOTE_AFTER",
        key: Some("lifecycle.promote_after"),
        description: "successful calls in a row that take a new version off probation",
        apply: |v, raw, _| {
            v.serve.lifecycle.promote_after = to_u32(count(raw, 1)?)?;
            Ok(None)
        },
        show: |v| v.serve.lifecycle.promote_after.to_string(),
    },
    Setting {
        name: "lifecycle.quarantine_consecutive",
        flag: None,
        env: "AUTOTOOL_LIFECYCLE_QUARANTINE_CONSECUTIVE",
        key: Some("lifecycle.quarantine_consecutive"),
        description: "failures in a row that quarantine a version",
        apply: |v, raw, _| {
            v.serve.lifecycle.quarantine_consecutive = to_u32(count(raw, 1)?)?;
            Ok(None)
        },
        show: |v| v.serve.lifecycle.quarantine_consecutive.to_string(),
    },
    Setting {
        name: "lifecycle.quarantine_rate",
        flag: None,
        env: "AUTOTOOL_LIFECYCLE_QUARANTINE_RATE",
        key: Some("lifecycle.quarantine_rate"),
        description: "failure rate over the window that quarantines a version",
        apply: |v, raw, _| {
            v.serve.lifecycle.quarantine_rate = rate(raw)?;
            Ok(None)
        },
        show: |v| v.serve.lifecycle.quarantine_rate.to_string(),
    },
    Setting {
        name: "lifecycle.window",
        flag: None,
        env: "AUTOTOOL_LIFECYCLE_WINDOW",
        key: Some("lifecycle.window"),
        description: "recent calls the failure rate is taken over (and how many it needs)",
        apply: |v, raw, _| {
            v.serve.lifecycle.window = to_u32(count(raw, 1)?)?;
            Ok(None)
        },
        show: |v| v.serve.lifecycle.window.to_string(),
    },
    Setting {
        name: "synthesize",
        flag: None,
        env: crate::library::settings::SWITCH_VAR,
        key: Some("synthesize"),
        description: "`on` offers synthesize_tool when $AUTOTOOL_HOME/.env names a model; `off` \
                      never offers it",
        apply: |v, raw, _| {
            v.serve.synthesize = on_off(raw)?;
            Ok(None)
        },
        show: |v| if v.serve.synthesize { "on" } else { "off" }.into(),
    },
    Setting {
        name: "synthesize_rounds",
        flag: None,
        env: "AUTOTOOL_SYNTHESIZE_ROUNDS",
        key: Some("synthesize_rounds"),
        description: "rounds of write, verify and repair one synthesize_tool call may take",
        apply: |v, raw, _| {
            v.serve.synthesize_rounds = to_usize(count(raw, 1)?)?;
            Ok(None)
        },
        show: |v| v.serve.synthesize_rounds.to_string(),
    },
    Setting {
        name: "synthesize_timeout",
        flag: None,
        env: "AUTOTOOL_SYNTHESIZE_TIMEOUT",
        key: Some("synthesize_timeout"),
        description: "bound on one synthesize_tool call (no model request starts after it)",
        apply: |v, raw, _| {
            v.serve.synthesize_time = duration(raw, Duration::from_secs(1))?;
            Ok(None)
        },
        show: |v| show_duration(v.serve.synthesize_time),
    },
    Setting {
        name: "synthesize_candidates",
        flag: None,
        env: "AUTOTOOL_SYNTHESIZE_CANDIDATES",
        key: Some("synthesize_candidates"),
        description: "candidates synthesize_tool writes for one need, each verified; the best \
                      one is kept (1 to 4)",
        apply: |v, raw, _| {
            v.serve.synthesize_candidates = candidates(raw)?;
            Ok(None)
        },
        show: |v| v.serve.synthesize_candidates.to_string(),
    },
    Setting {
        name: "home",
        flag: None,
        env: "AUTOTOOL_HOME",
        key: None,
        description: "where autotool keeps its tools, ledger, keys, logs and this file \
                      (default ~/.autotool)",
        apply: |v, raw, _| {
            v.home = std::path::absolute(raw)
                .map_err(|e| ValueError::NotUsablePath { why: e.to_string() })?;
            Ok(None)
        },
        show: |v| v.home.display().to_string(),
    },
    Setting {
        name: "runtime",
        flag: None,
        env: "AUTOTOOL_RUNTIME",
        key: None,
        description: "a prepared Python virtual environment to run tools on, used as it is \
                      (default: made in $AUTOTOOL_HOME/runtime on first use)",
        apply: |v, raw, _| {
            v.runtime = Some(PathBuf::from(raw));
            Ok(None)
        },
        show: |v| match &v.runtime {
            Some(p) => p.display().to_string(),
            None => v.home.join("runtime").display().to_string(),
        },
    },
    Setting {
        name: "python",
        flag: None,
        env: "AUTOTOOL_PYTHON",
        key: None,
        description: "the interpreter the runtime is made from (default python3 on PATH)",
        apply: |v, raw, _| {
            v.python = Some(PathBuf::from(raw));
            Ok(None)
        },
        show: |v| match &v.python {
            Some(p) => p.display().to_string(),
            None => "python3".into(),
        },
    },
    Setting {
        name: "log",
        flag: None,
        env: "AUTOTOOL_LOG",
        key: None,
        description: "log filter: a level or directives such as autotool=debug (serve \
                      defaults to info, connect to warn)",
        apply: |v, raw, _| {
            tracing_subscriber::EnvFilter::try_new(raw)
                .map_err(|e| ValueError::NotLogFilter { why: e.to_string() })?;
            v.log = Some(raw.to_string());
            Ok(None)
        },
        show: |v| v.log.clone().unwrap_or_else(|| "info".into()),
    },
    Setting {
        name: "credentials",
        flag: None,
        env: crate::credentials::CREDENTIALS_VAR,
        key: None,
        description: "where `autotool keys add` stores a value: `keychain` (the OS keychain) \
                      or `file` ($AUTOTOOL_HOME/credentials, mode 0600)",
        apply: |v, raw, _| {
            let word = raw.trim().to_ascii_lowercase();
            if word != "keychain" && word != "file" {
                return Err(ValueError::NotCredentialStore);
            }
            v.credentials = word;
            Ok(None)
        },
        show: |v| v.credentials.clone(),
    },
    Setting {
        name: "key_names",
        flag: None,
        env: crate::credentials::KEYS_VAR,
        key: None,
        description: "more environment variables that count as keys, beside *_API_KEY, \
                      *_TOKEN and the like (comma- or space-separated)",
        apply: |v, raw, _| {
            let (names, ignored): (Vec<&str>, Vec<&str>) = raw
                .split([',', ' ', '\t', '\n'])
                .filter(|n| !n.is_empty())
                .partition(|n| crate::credentials::is_valid_name(n));
            v.key_names = names.into_iter().map(str::to_owned).collect();
            Ok((!ignored.is_empty()).then(|| {
                format!(
                    "{} ignored: not key names (upper-case letters, digits and `_`)",
                    ignored.join(", ")
                )
            }))
        },
        show: |v| {
            if v.key_names.is_empty() {
                "none".into()
            } else {
                v.key_names.join(",")
            }
        },
    },
    Setting {
        name: "reach",
        flag: None,
        env: "AUTOTOOL_REACH",
        key: Some("reach"),
        description: "how a tool's declared reach (REQUIRED_HOSTS, READ_DIRS, WRITE_DIRS) is \
                      granted: `ask` asks for each host not allowed for every tool (`autotool \
                      hosts allow`) and each directory; `trusted`, for a single-user box, grants \
                      declared hosts without asking (nothing undeclared is reached either way)",
        apply: |v, raw, _| {
            v.serve.reach = autotool_policy::reach::ReachPreset::parse(raw)
                .ok_or(ValueError::NotReachPreset)?;
            Ok(None)
        },
        show: |v| v.serve.reach.as_str().into(),
    },
];

const ALLOW_ALL: &str = "dangerously-allow-all";

/// `sandbox`: `off`, `0`, `false` or `no` turns it off. From the flag and the environment
/// anything else is strict, as it always was; in the file an unknown word is a problem.
/// `synthesize_candidates`: a whole number from 1 to
/// [`MAX_CANDIDATES`](crate::library::settings::MAX_CANDIDATES).
fn candidates(raw: &str) -> Result<usize, ValueError> {
    let most = crate::library::settings::MAX_CANDIDATES;
    let n = to_usize(count(raw, 1)?)?;
    if n > most {
        return Err(ValueError::AboveMost { most: most as u64 });
    }
    Ok(n)
}

/// An on/off setting's value.
fn on_off(raw: &str) -> Result<bool, ValueError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        _ => Err(ValueError::NotOnOff),
    }
}

fn apply_sandbox(v: &mut Values, raw: &str, layer: Layer) -> Result<Option<String>, ValueError> {
    let word = raw.trim().to_ascii_lowercase();
    if ["off", "0", "false", "no"].contains(&word.as_str()) {
        v.serve.sandbox = SandboxMode::Off;
        return Ok(None);
    }
    if layer == Layer::File && !["strict", "on", "1", "true", "yes"].contains(&word.as_str()) {
        return Err(ValueError::NotSandboxMode);
    }
    v.serve.sandbox = SandboxMode::Strict;
    Ok((word != "strict")
        .then(|| format!("{raw:?} is not off, 0, false or no, so the sandbox stays strict")))
}

/// `consent`: only `dangerously-allow-all` grants without asking. From the flag and the
/// environment anything else asks, as it always did; in the file an unknown word is a problem.
fn apply_consent(v: &mut Values, raw: &str, layer: Layer) -> Result<Option<String>, ValueError> {
    if raw == ALLOW_ALL {
        v.serve.allow_all_keys = true;
        return Ok(None);
    }
    if layer == Layer::File && raw != "ask" {
        return Err(ValueError::NotConsentMode {
            allow_all: ALLOW_ALL,
        });
    }
    v.serve.allow_all_keys = false;
    Ok((raw != "ask").then(|| format!("{raw:?} is not {ALLOW_ALL}, so the user is asked")))
}
