//! Settings: every value autotool runs with, and the layer it came from.
//!
//! One table, [`SETTINGS`], names each setting once: its flag (`serve`'s, where it has one), its
//! environment variable, its key in `$AUTOTOOL_HOME/config.toml`, how its text is read and
//! checked, and what it does. [`resolve`] takes the layers as data ([`Inputs`]) and, per
//! setting, keeps the strongest that gives a value: flag > environment > file > default
//! ([`Layer`] is ordered so). `autotool serve` and `autotool config` both build their settings
//! here, so what `config` prints is what `serve` runs with.
//!
//! Every layer is checked, also one that a stronger layer overrides. A value that does not
//! parse, a key the file may not hold and a file that is not TOML are each a [`Problem`]; all of
//! them are collected ([`Problems`]), `autotool config` exits non-zero with them and `serve`
//! refuses to start.
//!
//! Two settings keep, for the flag and the environment, the rule they had before the file
//! existed: for `sandbox` only an explicit `off`, `0`, `false` or `no` turns the sandbox off
//! (anything else, a typo too, is strict), and for `consent` only `dangerously-allow-all`
//! grants keys without asking. Such a fallback is kept as a note beside the value; in the file,
//! where the setting is new, an unknown word is a problem.
//!
//! Some settings are read from the environment only: `home` holds the file, and the others
//! (`runtime`, `python`, `log`, `credentials`, `key_names`) are read by commands that do not
//! resolve settings; `autotool config` shows them so that one place answers.

use crate::library::Settings;
use crate::tool::process::SandboxMode;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file's name in `$AUTOTOOL_HOME`.
pub const FILE_NAME: &str = "config.toml";

/// Where a value came from. Ordered by strength: the strongest layer that gives a value wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Default,
    File,
    Env,
    Flag,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Default => "default",
            Layer::File => "file",
            Layer::Env => "env",
            Layer::Flag => "flag",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything the table sets: `serve`'s [`Settings`] and the environment-only values.
#[derive(Debug, Clone)]
pub struct Values {
    pub serve: Settings,
    /// `$AUTOTOOL_HOME`.
    pub home: PathBuf,
    /// `$AUTOTOOL_RUNTIME`: a prepared virtual environment to run tools on.
    pub runtime: Option<PathBuf>,
    /// `$AUTOTOOL_PYTHON`: the interpreter the runtime is built from.
    pub python: Option<PathBuf>,
    /// `$AUTOTOOL_LOG`: the log filter.
    pub log: Option<String>,
    /// `$AUTOTOOL_CREDENTIALS`: where `autotool keys add` stores a value, `keychain` or `file`.
    pub credentials: String,
    /// `$AUTOTOOL_KEYS`: more environment variables that count as keys.
    pub key_names: Vec<String>,
}

impl Values {
    /// The defaults, for a home at `home`.
    pub fn defaults(home: &Path) -> Values {
        Values {
            serve: Settings::default(),
            home: home.to_path_buf(),
            runtime: None,
            python: None,
            log: None,
            credentials: "keychain".into(),
            key_names: Vec::new(),
        }
    }
}

/// Reads a setting's text into [`Values`]: `Ok(Some(note))` when it took the value with a
/// remark, `Err(why)` when the text is not a value of the setting.
type Apply = fn(&mut Values, &str, Layer) -> Result<Option<String>, String>;

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
    apply: Apply,
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
        description: "`ask` asks the user before a tool gets a key; `dangerously-allow-all` \
                      grants every declared key without asking",
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
                return Err(
                    "is not an absolute path: give the launcher's full path, or \"auto\"".into(),
                );
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
            let word = raw.trim().to_ascii_lowercase();
            v.serve.synthesize = match word.as_str() {
                "on" | "1" | "true" | "yes" => true,
                "off" | "0" | "false" | "no" => false,
                _ => return Err("is not on or off".into()),
            };
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
        name: "home",
        flag: None,
        env: "AUTOTOOL_HOME",
        key: None,
        description: "where autotool keeps its tools, ledger, keys, logs and this file \
                      (default ~/.autotool)",
        apply: |v, raw, _| {
            v.home = std::path::absolute(raw).map_err(|e| format!("is not a usable path: {e}"))?;
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
            tracing_subscriber::EnvFilter::try_new(raw).map_err(|e| {
                format!(
                    "is not a log filter ({e}): give a level (error, warn, info, debug, trace) \
                     or directives such as autotool=debug,rmcp=warn"
                )
            })?;
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
                return Err("is not a credential store: give `keychain` or `file`".into());
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
];

const ALLOW_ALL: &str = "dangerously-allow-all";

/// `sandbox`: `off`, `0`, `false` or `no` turns it off. From the flag and the environment
/// anything else is strict, as it always was; in the file an unknown word is a problem.
fn apply_sandbox(v: &mut Values, raw: &str, layer: Layer) -> Result<Option<String>, String> {
    let word = raw.trim().to_ascii_lowercase();
    if ["off", "0", "false", "no"].contains(&word.as_str()) {
        v.serve.sandbox = SandboxMode::Off;
        return Ok(None);
    }
    if layer == Layer::File && !["strict", "on", "1", "true", "yes"].contains(&word.as_str()) {
        return Err(
            "is not a sandbox mode: give \"strict\" (confine every tool) or \"off\" (run tools \
             unconfined)"
                .into(),
        );
    }
    v.serve.sandbox = SandboxMode::Strict;
    Ok((word != "strict")
        .then(|| format!("{raw:?} is not off, 0, false or no, so the sandbox stays strict")))
}

/// `consent`: only `dangerously-allow-all` grants without asking. From the flag and the
/// environment anything else asks, as it always did; in the file an unknown word is a problem.
fn apply_consent(v: &mut Values, raw: &str, layer: Layer) -> Result<Option<String>, String> {
    if raw == ALLOW_ALL {
        v.serve.allow_all_keys = true;
        return Ok(None);
    }
    if layer == Layer::File && raw != "ask" {
        return Err(format!(
            "is not a consent mode: give \"ask\" (the user is asked before a tool gets a key) or \
             \"{ALLOW_ALL}\""
        ));
    }
    v.serve.allow_all_keys = false;
    Ok((raw != "ask").then(|| format!("{raw:?} is not {ALLOW_ALL}, so the user is asked")))
}

/// The leading digits of `raw` as a number and the unit after them (lower case, spaces around
/// it removed).
fn number_and_unit(raw: &str) -> Option<(u64, String)> {
    let raw = raw.trim();
    let end = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let number = raw[..end].parse().ok()?;
    Some((number, raw[end..].trim().to_ascii_lowercase()))
}

/// Whole seconds (`60`), or a number and a unit: `500ms`, `30s`, `10m`, `1h`; at least `min`.
pub fn duration(raw: &str, min: Duration) -> Result<Duration, String> {
    const FORMS: &str = "give whole seconds (60) or a number and a unit (500ms, 30s, 10m, 1h)";
    let (n, unit) = number_and_unit(raw).ok_or_else(|| format!("is not a duration: {FORMS}"))?;
    let millis: u64 = match unit.as_str() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("has an unknown unit `{unit}`: {FORMS}")),
    };
    let total = n
        .checked_mul(millis)
        .ok_or_else(|| "is too long to be a duration".to_string())?;
    let d = Duration::from_millis(total);
    if d < min {
        return Err(format!("is too short: the least is {}", show_duration(min)));
    }
    Ok(d)
}

/// A duration as text [`duration`] reads back: seconds when whole, else milliseconds.
pub fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Bytes (`262144`), or a number and a binary unit: `256KiB`, `64MiB`, `2GiB` (`K`, `M`, `G`
/// too); at least `min`.
pub fn bytes(raw: &str, min: u64) -> Result<u64, String> {
    const FORMS: &str = "give bytes (262144) or a number and a unit (256KiB, 64MiB, 2GiB)";
    let (n, unit) = number_and_unit(raw).ok_or_else(|| format!("is not a size: {FORMS}"))?;
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return Err(format!("has an unknown unit `{unit}`: {FORMS}")),
    };
    let total = n
        .checked_mul(scale)
        .ok_or_else(|| "is too large".to_string())?;
    if total < min {
        return Err(format!("is too small: the least is {}", show_bytes(min)));
    }
    Ok(total)
}

/// A size as text [`bytes`] reads back: in the largest binary unit that divides it.
pub fn show_bytes(n: u64) -> String {
    for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= scale && n.is_multiple_of(scale) {
            return format!("{}{unit}", n / scale);
        }
    }
    n.to_string()
}

/// A whole number, at least `min`.
pub fn count(raw: &str, min: u64) -> Result<u64, String> {
    let n: u64 = raw
        .trim()
        .parse()
        .map_err(|_| "is not a whole number".to_string())?;
    if n < min {
        return Err(format!("is too small: the least is {min}"));
    }
    Ok(n)
}

/// A fraction above 0 and at most 1.
fn rate(raw: &str) -> Result<f64, String> {
    let r: f64 = raw
        .trim()
        .parse()
        .map_err(|_| "is not a number: give a fraction such as 0.5".to_string())?;
    if !(r > 0.0 && r <= 1.0) {
        return Err("is out of range: give a fraction above 0 and at most 1, such as 0.5".into());
    }
    Ok(r)
}

fn to_usize(n: u64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| "is too large".to_string())
}

fn to_u32(n: u64) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| format!("is too large: the most is {}", u32::MAX))
}

/// The config file as the resolver is given it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FileText {
    /// There is none.
    #[default]
    Absent,
    /// Its text.
    Text(String),
    /// It could not be read, and why.
    Unreadable(String),
}

/// What each layer says, before anything is checked.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Command-line flags by setting name, as typed (only `serve` has any).
    pub flags: BTreeMap<String, String>,
    /// The environment; only the variables the table names are read, and an empty one counts
    /// as unset.
    pub env: BTreeMap<String, String>,
    /// The home the file is in (and the `home` setting's value).
    pub home: PathBuf,
    /// `$home/config.toml`.
    pub file: FileText,
}

impl Inputs {
    /// This process's environment and config file, with `flags`.
    pub fn from_process(flags: BTreeMap<String, String>) -> Result<Inputs, Problems> {
        let home = crate::home::Home::from_env()
            .map_err(|e| Problems(vec![Problem::Home(e.to_string())]))?;
        let env = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                k.starts_with("AUTOTOOL_")
                    .then(|| (k, v.to_string_lossy().into_owned()))
            })
            .collect();
        let path = home.root().join(FILE_NAME);
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => FileText::Text(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => FileText::Absent,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                FileText::Unreadable("it is not UTF-8 text".into())
            }
            Err(e) => FileText::Unreadable(e.to_string()),
        };
        Ok(Inputs {
            flags,
            env,
            home: home.root().to_path_buf(),
            file,
        })
    }
}

/// One setting as resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub name: &'static str,
    /// As text every layer accepts.
    pub value: String,
    pub layer: Layer,
    /// Where: the flag, the environment variable, or `path:line` in the file (`None` for the
    /// default).
    #[serde(rename = "where")]
    pub source: Option<String>,
    /// Weaker layers that also gave a value, which this one overrides.
    pub overrides: Vec<String>,
    /// A remark on how the value was read (a word taken as strict, names ignored).
    pub note: Option<String>,
}

/// The settings in effect and where each came from.
#[derive(Debug, Clone)]
pub struct Config {
    pub values: Values,
    /// The config file, read or not.
    pub file: PathBuf,
    pub file_exists: bool,
    /// One per row of [`SETTINGS`], in order.
    pub entries: Vec<Entry>,
}

impl Config {
    /// `serve`'s settings.
    pub fn settings(&self) -> Settings {
        self.values.serve.clone()
    }

    /// The entry of the setting `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// `name: note` for every value read with a remark.
    pub fn notes(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| e.note.as_ref().map(|n| format!("{}: {n}", e.name)))
            .collect()
    }
}

/// Something wrong with a setting or the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("{setting} = {raw:?} ({layer}, {at}) {why}")]
    Value {
        setting: &'static str,
        layer: Layer,
        /// The flag, the variable, or `path:line`.
        at: String,
        raw: String,
        why: String,
    },
    #[error(
        "{path}, line {line}, column {column}: not valid TOML: {message}. Fix that line: each \
         setting is `name = value`, text in double quotes (sandbox = \"strict\"), and \
         limits.* and lifecycle.* may go under [limits] and [lifecycle]"
    )]
    Malformed {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{at}: unknown setting `{key}`{hint}. The file may set: {known}")]
    UnknownKey {
        /// `path:line`.
        at: String,
        key: String,
        /// ` (did you mean …?)`, or empty.
        hint: String,
        known: String,
    },
    #[error(
        "{at}: `{key}` is read from the environment only (commands that do not read this file \
         use it too); remove it and set {env} instead"
    )]
    EnvOnly {
        at: String,
        key: String,
        env: &'static str,
    },
    #[error("cannot read {path}: {why}; fix it, or move it away to use the defaults")]
    Unreadable { path: String, why: String },
    #[error("{0}")]
    Home(String),
}

/// Every problem found; `serve` starts only when there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} problems with the settings:", many.len())?;
                for p in many {
                    write!(f, "\n- {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Problems {}

/// One value the file gives: its text and line.
#[derive(Debug, Clone)]
struct FileValue {
    raw: String,
    line: usize,
}

/// Resolve every setting: flag > environment > file > default, each layer checked.
pub fn resolve(inputs: &Inputs) -> Result<Config, Problems> {
    let path = inputs.home.join(FILE_NAME);
    let mut problems = Vec::new();
    let file = match &inputs.file {
        FileText::Absent => BTreeMap::new(),
        FileText::Unreadable(why) => {
            problems.push(Problem::Unreadable {
                path: path.display().to_string(),
                why: why.clone(),
            });
            BTreeMap::new()
        }
        FileText::Text(text) => read_file(&path, text, &mut problems),
    };
    let mut values = Values::defaults(&inputs.home);
    let mut entries = Vec::with_capacity(SETTINGS.len());
    for s in SETTINGS {
        // Weakest first, so the strongest that gives a value is applied last and stays.
        let mut given: Vec<(Layer, &str, String)> = Vec::new();
        if let Some(v) = s.key.and_then(|k| file.get(k)) {
            given.push((
                Layer::File,
                &v.raw,
                format!("{}:{}", path.display(), v.line),
            ));
        }
        if let Some(v) = inputs.env.get(s.env).filter(|v| !v.is_empty()) {
            given.push((Layer::Env, v, s.env.to_string()));
        }
        if let Some(v) = inputs.flags.get(s.name) {
            given.push((Layer::Flag, v, s.flag.unwrap_or(s.name).to_string()));
        }
        let mut entry = Entry {
            name: s.name,
            value: String::new(),
            layer: Layer::Default,
            source: None,
            overrides: Vec::new(),
            note: None,
        };
        for (layer, raw, source) in given {
            match (s.apply)(&mut values, raw, layer) {
                Ok(note) => {
                    if let Some(previous) = entry.source.take() {
                        entry.overrides.push(previous);
                    }
                    entry.layer = layer;
                    entry.source = Some(source);
                    entry.note = note;
                }
                Err(why) => problems.push(Problem::Value {
                    setting: s.name,
                    layer,
                    at: source,
                    raw: raw.to_string(),
                    why,
                }),
            }
        }
        entry.value = (s.show)(&values);
        entries.push(entry);
    }
    if !problems.is_empty() {
        return Err(Problems(problems));
    }
    Ok(Config {
        values,
        file: path,
        file_exists: inputs.file != FileText::Absent,
        entries,
    })
}

/// The settings the file gives, by key; problems of its syntax and keys go to `problems`.
fn read_file(
    path: &Path,
    text: &str,
    problems: &mut Vec<Problem>,
) -> BTreeMap<&'static str, FileValue> {
    let mut found = BTreeMap::new();
    let doc = match toml_edit::Document::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            let (line, column) = e
                .span()
                .map(|s| line_column(text, s.start))
                .unwrap_or((1, 1));
            problems.push(Problem::Malformed {
                path: path.display().to_string(),
                line,
                column,
                message: e.message().to_string(),
            });
            return found;
        }
    };
    let mut leaves = Vec::new();
    walk(doc.as_table(), "", text, &mut leaves);
    for (key, item, line) in leaves {
        let at = format!("{}:{line}", path.display());
        if let Some(s) = SETTINGS.iter().find(|s| s.key == Some(key.as_str())) {
            match toml_text(item) {
                Ok(raw) => {
                    found.insert(s.name, FileValue { raw, line });
                }
                Err(kind) => problems.push(Problem::Value {
                    setting: s.name,
                    layer: Layer::File,
                    at,
                    raw: item.to_string().trim().to_string(),
                    why: format!("is {kind}: give a number or a string"),
                }),
            }
        } else if let Some(s) = SETTINGS.iter().find(|s| s.key.is_none() && s.name == key) {
            problems.push(Problem::EnvOnly {
                at,
                key,
                env: s.env,
            });
        } else {
            let hint = nearest_key(&key)
                .map(|k| format!(" (did you mean `{k}`?)"))
                .unwrap_or_default();
            let known = SETTINGS
                .iter()
                .filter_map(|s| s.key)
                .collect::<Vec<_>>()
                .join(", ");
            problems.push(Problem::UnknownKey {
                at,
                key,
                hint,
                known,
            });
        }
    }
    found
}

/// Every value in `table`, with its dotted key and line. A table is walked into; an empty one
/// that no key lives under is reported as a key of its own.
fn walk<'a>(
    table: &'a dyn toml_edit::TableLike,
    prefix: &str,
    text: &str,
    out: &mut Vec<(String, &'a toml_edit::Item, usize)>,
) {
    for (name, item) in table.iter() {
        let key = format!("{prefix}{name}");
        let line = table
            .key(name)
            .and_then(toml_edit::Key::span)
            .or_else(|| item.span())
            .map_or(1, |s| line_column(text, s.start).0);
        match item.as_table_like() {
            Some(inner) => {
                let section = format!("{key}.");
                let used = SETTINGS
                    .iter()
                    .any(|s| s.key.is_some_and(|k| k.starts_with(&section)));
                if inner.is_empty() && !used {
                    out.push((key, item, line));
                } else {
                    walk(inner, &section, text, out);
                }
            }
            None => out.push((key, item, line)),
        }
    }
}

/// A scalar's text for the setting's parser, or what kind of value it is instead.
fn toml_text(item: &toml_edit::Item) -> Result<String, &'static str> {
    use toml_edit::Value;
    match item.as_value() {
        Some(Value::String(s)) => Ok(s.value().clone()),
        Some(Value::Integer(i)) => Ok(i.value().to_string()),
        Some(Value::Float(f)) => Ok(f.value().to_string()),
        Some(Value::Boolean(b)) => Ok(b.value().to_string()),
        Some(Value::Datetime(_)) => Err("a date"),
        Some(Value::Array(_)) => Err("a list"),
        Some(Value::InlineTable(_)) | None => Err("a table"),
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The file key closest to `key`, when it is a likely typo of it.
fn nearest_key(key: &str) -> Option<&'static str> {
    SETTINGS
        .iter()
        .filter_map(|s| s.key)
        .map(|k| (edit_distance(key, k), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
        .or_else(|| {
            // A section-less spelling: `memory_bytes` for `limits.memory_bytes`.
            SETTINGS
                .iter()
                .filter_map(|s| s.key)
                .find(|k| k.rsplit('.').next() == Some(key) && k.contains('.'))
        })
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// `autotool config`: a table of every setting, then the notes.
pub fn render(config: &Config, out: &mut dyn Write) -> io::Result<()> {
    let state = if config.file_exists {
        "read"
    } else {
        "absent; see docs/config.md for an example"
    };
    writeln!(out, "config file: {} ({state})", config.file.display())?;
    writeln!(out)?;
    let rows: Vec<[&str; 4]> = config
        .entries
        .iter()
        .map(|e| {
            [
                e.name,
                e.value.as_str(),
                e.layer.as_str(),
                e.source.as_deref().unwrap_or(""),
            ]
        })
        .collect();
    let header = ["NAME", "VALUE", "LAYER", "WHERE"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    let mut remarks = Vec::new();
    for e in &config.entries {
        if !e.overrides.is_empty() {
            remarks.push(format!(
                "{}: {} overrides {}",
                e.name,
                e.source.as_deref().unwrap_or(""),
                e.overrides.join(" and ")
            ));
        }
    }
    remarks.extend(config.notes());
    if !remarks.is_empty() {
        writeln!(out)?;
        for r in remarks {
            writeln!(out, "note: {r}")?;
        }
    }
    Ok(())
}

/// `autotool config --json`.
pub fn to_json(config: &Config) -> serde_json::Value {
    let defaults = Values::defaults(&config.values.home);
    let settings: Vec<serde_json::Value> = SETTINGS
        .iter()
        .zip(&config.entries)
        .map(|(s, e)| {
            serde_json::json!({
                "name": e.name,
                "value": e.value,
                "layer": e.layer,
                "where": e.source,
                "overrides": e.overrides,
                "note": e.note,
                "default": s.show(&defaults),
                "flag": s.flag,
                "env": s.env,
                "key": s.key,
                "description": s.description,
            })
        })
        .collect();
    serde_json::json!({
        "file": { "path": config.file, "exists": config.file_exists },
        "settings": settings,
    })
}

#[cfg(test)]
mod tests;
