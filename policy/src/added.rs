//! Where an added MCP server comes from (`autotool add NAME pypi:PACKAGE[==VERSION]` or
//! `npm:PACKAGE[@VERSION]`), and how a value is written into the Python file that starts it.
//!
//! A PyPI source is a requirement of the same strict grammar `REQUIRED_PACKAGES` accepts
//! ([`crate::packages::Requirement`]): a name, optional extras, optional version specifiers; no
//! URL, no path, no option, no marker. An npm source is a package name as the npm registry
//! spells them (`name` or `@scope/name`, lowercase, URL-safe) and an optional exact version or
//! dist-tag: never a tarball URL, a git URL, a path or an alias (`npm:` inside the spec).

use crate::packages::{Requirement, RequirementError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Component, Path};

/// The longest npm package name the registry accepts.
pub const MAX_NPM_NAME: usize = 214;
/// The longest version or tag accepted after `@`.
pub const MAX_NPM_VERSION: usize = 64;

/// An added server's package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSource {
    /// `pypi:REQUIREMENT`.
    Pypi(Requirement),
    /// `npm:NAME[@VERSION]`.
    Npm {
        name: String,
        /// An exact version or a dist-tag; `None` for the latest.
        version: Option<String>,
    },
}

/// Why a source is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error(
        "{0:?}: a server's source is `pypi:PACKAGE[==VERSION]` or `npm:PACKAGE[@VERSION]` (for \
         example `pypi:mcp-server-time` or `npm:@modelcontextprotocol/server-memory`)"
    )]
    Scheme(String),
    #[error("{0}")]
    Pypi(#[from] RequirementError),
    #[error(
        "{0:?}: an npm package is `name` or `@scope/name` (lowercase letters, digits, `-`, `.`, \
         `_`, `~`), at most {MAX_NPM_NAME} characters; URLs, paths, git and aliases are refused"
    )]
    NpmName(String),
    #[error(
        "{0:?}: an npm version is an exact version (`2026.1.14`) or a tag (`latest`): letters, \
         digits, `.`, `-`, `+`, `_`; ranges, URLs and paths are refused"
    )]
    NpmVersion(String),
}

impl ServerSource {
    /// Parse `pypi:…` or `npm:…`.
    pub fn parse(text: &str) -> Result<ServerSource, SourceError> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("pypi:") {
            return Ok(ServerSource::Pypi(Requirement::parse(rest)?));
        }
        if let Some(rest) = text.strip_prefix("npm:") {
            let (name, version) = split_npm(rest);
            if !npm_name_ok(name) {
                return Err(SourceError::NpmName(name.to_string()));
            }
            let version = match version {
                None => None,
                Some(v) if npm_version_ok(v) => Some(v.to_string()),
                Some(v) => return Err(SourceError::NpmVersion(v.to_string())),
            };
            return Ok(ServerSource::Npm {
                name: name.to_string(),
                version,
            });
        }
        Err(SourceError::Scheme(text.chars().take(200).collect()))
    }

    /// `pypi` or `npm`.
    pub fn registry(&self) -> &'static str {
        match self {
            ServerSource::Pypi(_) => "pypi",
            ServerSource::Npm { .. } => "npm",
        }
    }

    /// The package's name, normalised as its registry compares names.
    pub fn package(&self) -> &str {
        match self {
            ServerSource::Pypi(r) => &r.name,
            ServerSource::Npm { name, .. } => name,
        }
    }
}

impl fmt::Display for ServerSource {
    /// The canonical spelling: `pypi:mcp-server-time==2026.10.19`, `npm:@scope/name@1.2.3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerSource::Pypi(r) => write!(f, "pypi:{r}"),
            ServerSource::Npm {
                name,
                version: Some(v),
            } => write!(f, "npm:{name}@{v}"),
            ServerSource::Npm {
                name,
                version: None,
            } => write!(f, "npm:{name}"),
        }
    }
}

/// `@scope/name@1.0` → (`@scope/name`, `1.0`); `name@1.0` → (`name`, `1.0`).
fn split_npm(spec: &str) -> (&str, Option<&str>) {
    let search_from = usize::from(spec.starts_with('@'));
    match spec[search_from..].find('@') {
        Some(i) => {
            let at = search_from + i;
            (&spec[..at], Some(&spec[at + 1..]))
        }
        None => (spec, None),
    }
}

fn npm_part_ok(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && !part.starts_with('_')
        && part.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_' | b'~')
        })
}

fn npm_name_ok(name: &str) -> bool {
    if name.is_empty() || name.len() > MAX_NPM_NAME {
        return false;
    }
    match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, pkg)) => npm_part_ok(scope) && npm_part_ok(pkg),
            None => false,
        },
        None => npm_part_ok(name),
    }
}

fn npm_version_ok(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_NPM_VERSION
        && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_'))
}

/// What the declarations file of an added npm server says in its `NPM = {...}` literal: the
/// package, its exact version and integrity, the lockfile that pins every package of its tree
/// (by sha256: the layer's content address), the script node runs and its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NpmServer {
    pub package: String,
    pub version: String,
    /// The package's own integrity (`sha512-…`) as the lockfile holds it.
    pub integrity: String,
    /// sha256 of the `package-lock.json` installed (lowercase hex).
    pub lock: String,
    /// The script node runs, relative to the layer (`node_modules/NAME/dist/index.js`).
    pub entry: String,
    /// The arguments it is started with.
    #[serde(default)]
    pub args: Vec<String>,
}

impl NpmServer {
    /// Why this declaration cannot be run, or `Ok`.
    pub fn check(&self) -> Result<(), String> {
        if !npm_name_ok(&self.package) {
            return Err(format!("{:?} is not an npm package name", self.package));
        }
        if !npm_version_ok(&self.version) {
            return Err(format!("{:?} is not an exact version", self.version));
        }
        if !self.integrity.starts_with("sha512-") {
            return Err(format!(
                "integrity {:?} is not a sha512 integrity",
                self.integrity
            ));
        }
        let hex = self.lock.len() == 64
            && self
                .lock
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(format!("lock {:?} is not a sha256 in hex", self.lock));
        }
        let prefix = format!("node_modules/{}/", self.package);
        let entry = Path::new(&self.entry);
        let plain = entry
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !plain || !self.entry.starts_with(&prefix) || self.entry.len() == prefix.len() {
            return Err(format!(
                "entry {:?} is not a plain path inside {prefix}",
                self.entry
            ));
        }
        if self.args.iter().any(|a| a.contains('\0')) {
            return Err("an argument holds a NUL byte".into());
        }
        Ok(())
    }

    /// The layer's directory name below `$AUTOTOOL_HOME/layers`.
    pub fn layer_name(&self) -> String {
        format!("npm-{}", self.lock)
    }
}

/// `text` as a Python string literal that means exactly `text`: double-quoted, with `\`, `"`
/// and every character outside printable ASCII escaped, so nothing a user or a config file
/// hands us can end the literal or hide in the file.
pub fn python_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// A list of strings as a Python list literal: `["a", "b"]`.
pub fn python_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| python_literal(s.as_ref())).collect();
    format!("[{}]", inner.join(", "))
}

/// The most settings an added server may be given.
pub const MAX_SETTINGS: usize = 32;
/// The longest setting value.
pub const MAX_SETTING_VALUE: usize = 4096;

/// Variables a setting may never name, because autotool or the sandbox sets them, or because
/// they change how the interpreter, the loader or the package managers behave rather than what
/// the server does (matched without regard to case).
const RESERVED_SETTINGS: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "PWD",
    "SHELL",
    "USER",
    "LOGNAME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GLIBC_TUNABLES",
    "BASH_ENV",
    "ENV",
];

/// Prefixes a setting may never start with (without regard to case).
const RESERVED_PREFIXES: &[&str] = &[
    "LD_", "PYTHON", "NODE_", "NPM_", "UV_", "PIP_", "AUTOTOOL", "SSL_", "MALLOC_",
];

/// Why `NAME=VALUE` cannot be a setting of an added server (a variable that is no key: the
/// file the server keeps its data in, a log level), or `None`. A setting's value is not
/// secret: it is written in the tool's file and shown; a key's value never is (`--key`).
pub fn setting_problem(name: &str, value: &str) -> Option<String> {
    let b = name.as_bytes();
    let well_formed = !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if !well_formed {
        return Some(format!(
            "{name:?} is not a variable name: letters, digits and `_`, not starting with a digit"
        ));
    }
    let upper = name.to_ascii_uppercase();
    if RESERVED_SETTINGS.contains(&upper.as_str())
        || RESERVED_PREFIXES.iter().any(|p| upper.starts_with(p))
        || upper.ends_with("_API_BASE")
    {
        return Some(format!(
            "{name} is set by autotool or changes how the server's interpreter, loader or \
             network path work, so it cannot be a setting"
        ));
    }
    if value.len() > MAX_SETTING_VALUE {
        return Some(format!(
            "the value of {name} is {} bytes; a setting holds at most {MAX_SETTING_VALUE}",
            value.len()
        ));
    }
    if value.contains('\0') {
        return Some(format!("the value of {name} holds a NUL byte"));
    }
    None
}

/// `{"NAME": "VALUE", …}` as a Python dict literal, every string by [`python_literal`].
pub fn python_dict<K: AsRef<str>, V: AsRef<str>>(items: &[(K, V)]) -> String {
    let inner: Vec<String> = items
        .iter()
        .map(|(k, v)| {
            format!(
                "{}: {}",
                python_literal(k.as_ref()),
                python_literal(v.as_ref())
            )
        })
        .collect();
    format!("{{{}}}", inner.join(", "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pypi_sources_are_requirements() {
        let s = ServerSource::parse("pypi:mcp-server-time").unwrap();
        assert_eq!(s.registry(), "pypi");
        assert_eq!(s.package(), "mcp-server-time");
        assert_eq!(s.to_string(), "pypi:mcp-server-time");
        let s = ServerSource::parse("pypi:MCP_Server.Fetch==2026.10.24").unwrap();
        assert_eq!(s.package(), "mcp-server-fetch");
        assert_eq!(s.to_string(), "pypi:mcp-server-fetch==2026.10.24");
    }

    #[test]
    fn pypi_sources_refuse_what_requirements_refuse() {
        for bad in [
            "pypi:",
            "pypi:https://evil.example/x.whl",
            "pypi:x @ file:///etc",
            "pypi:--index-url=http://evil",
            "pypi:x; python_version>'3'",
            "pypi:../x",
        ] {
            assert!(
                matches!(ServerSource::parse(bad), Err(SourceError::Pypi(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn npm_sources_plain_and_scoped_with_versions() {
        let s = ServerSource::parse("npm:@modelcontextprotocol/server-memory").unwrap();
        assert_eq!(
            s,
            ServerSource::Npm {
                name: "@modelcontextprotocol/server-memory".into(),
                version: None
            }
        );
        assert_eq!(s.to_string(), "npm:@modelcontextprotocol/server-memory");
        let s =
            ServerSource::parse("npm:@modelcontextprotocol/server-filesystem@2026.1.14").unwrap();
        assert_eq!(
            s.to_string(),
            "npm:@modelcontextprotocol/server-filesystem@2026.1.14"
        );
        let s = ServerSource::parse("npm:is-number@latest").unwrap();
        assert_eq!(s.package(), "is-number");
        assert_eq!(s.registry(), "npm");
    }

    #[test]
    fn npm_sources_refuse_urls_paths_aliases_and_ranges() {
        for bad in [
            "npm:",
            "npm:@scope",
            "npm:@/x",
            "npm:Upper",
            "npm:../x",
            "npm:./x",
            "npm:/abs",
            "npm:x/y",
            "npm:.hidden",
            "npm:_under",
            "npm:git+https://github.com/a/b",
            "npm:https://evil.example/x.tgz",
            "npm:file:../x",
        ] {
            assert!(
                matches!(ServerSource::parse(bad), Err(SourceError::NpmName(_))),
                "{bad}: {:?}",
                ServerSource::parse(bad)
            );
        }
        for bad in [
            "npm:x@",
            "npm:x@^1.0",
            "npm:x@>=1",
            "npm:x@1 || 2",
            "npm:x@npm:y",
            "npm:x@file:../y",
            "npm:x@-1",
        ] {
            assert!(
                matches!(ServerSource::parse(bad), Err(SourceError::NpmVersion(_))),
                "{bad}: {:?}",
                ServerSource::parse(bad)
            );
        }
        assert!(ServerSource::parse(&format!("npm:{}", "a".repeat(MAX_NPM_NAME + 1))).is_err());
    }

    #[test]
    fn other_schemes_are_refused_with_the_two_forms() {
        for bad in ["mcp-server-time", "uvx:x", "docker:x", "https://x", ""] {
            let e = ServerSource::parse(bad).unwrap_err();
            assert!(matches!(e, SourceError::Scheme(_)), "{bad}");
            assert!(e.to_string().contains("pypi:PACKAGE"), "{e}");
        }
    }

    #[test]
    fn an_npm_declaration_names_a_script_inside_its_package() {
        let good = NpmServer {
            package: "@modelcontextprotocol/server-memory".into(),
            version: "2026.1.26".into(),
            integrity: "sha512-abc==".into(),
            lock: "a".repeat(64),
            entry: "node_modules/@modelcontextprotocol/server-memory/dist/index.js".into(),
            args: vec![],
        };
        good.check().unwrap();
        assert_eq!(good.layer_name(), format!("npm-{}", "a".repeat(64)));
        let bad_entries = [
            "node_modules/@modelcontextprotocol/server-memory/../../x/evil.js",
            "node_modules/other/dist/index.js",
            "/usr/lib/x.js",
            "node_modules/@modelcontextprotocol/server-memory/",
        ];
        for entry in bad_entries {
            let mut bad = good.clone();
            bad.entry = entry.into();
            assert!(bad.check().is_err(), "{entry}");
        }
        let mut bad = good.clone();
        bad.lock = "../x".into();
        assert!(bad.check().is_err());
        let mut bad = good.clone();
        bad.version = "^1".into();
        assert!(bad.check().is_err());
        let mut bad = good;
        bad.integrity = "sha1-x".into();
        assert!(bad.check().is_err());
    }

    #[test]
    fn python_literals_cannot_be_broken_out_of() {
        assert_eq!(python_literal("plain /path"), "\"plain /path\"");
        assert_eq!(python_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(python_literal("x\ny\u{7f}"), "\"x\\x0ay\\x7f\"");
        assert_eq!(python_literal("é€😀"), "\"\\xe9\\u20ac\\U0001f600\"");
        assert_eq!(
            python_literal("\"]\nimport os; os.system('x') #"),
            "\"\\\"]\\x0aimport os; os.system('x') #\""
        );
        assert_eq!(python_list(&["a", "b\""]), "[\"a\", \"b\\\"\"]");
        assert_eq!(python_list::<&str>(&[]), "[]");
        // Only printable ASCII is ever written.
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        assert!(
            python_literal(&all)
                .bytes()
                .all(|b| (b' '..=b'~').contains(&b))
        );
    }

    #[test]
    fn settings_are_plain_variables_autotool_does_not_own() {
        for ok in [
            ("MEMORY_FILE_PATH", "/home/u/notes/m.json"),
            ("log_level", ""),
            ("_X", "1"),
        ] {
            assert_eq!(setting_problem(ok.0, ok.1), None, "{ok:?}");
        }
        for bad in [
            "",
            "1X",
            "A-B",
            "A B",
            "PATH",
            "path",
            "HOME",
            "LD_PRELOAD",
            "ld_library_path",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "NODE_OPTIONS",
            "NPM_CONFIG_REGISTRY",
            "UV_INDEX_URL",
            "HTTPS_PROXY",
            "https_proxy",
            "NO_PROXY",
            "AUTOTOOL_USES_FD",
            "SSL_CERT_FILE",
            "OPENAI_API_BASE",
            "GLIBC_TUNABLES",
            "TMPDIR",
        ] {
            assert!(setting_problem(bad, "x").is_some(), "{bad}");
        }
        assert!(setting_problem("X", "a\0b").is_some());
        assert!(setting_problem("X", &"v".repeat(MAX_SETTING_VALUE + 1)).is_some());
        assert_eq!(
            python_dict(&[("A", "1"), ("B", "x\"\n")]),
            "{\"A\": \"1\", \"B\": \"x\\\"\\x0a\"}"
        );
    }
}
