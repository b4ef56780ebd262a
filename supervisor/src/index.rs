//! Where a tool's packages (and the runtime's) come from: the index the user's own configuration
//! names, never one a tool names (a requirement may not carry a URL; see
//! `autotool_policy::packages`), never one another local user planted.
//!
//! uv and pip read no settings of their own accord (see `crate::tool::runtime::build`'s
//! `isolate`): autotool reads the user's index settings here and passes the index to them
//! explicitly, so the index the consent question names is the one used. In order, the first
//! that names an index wins:
//! - uv's variables: `UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `UV_INDEX`, `UV_EXTRA_INDEX_URL`;
//! - uv's files: `$UV_CONFIG_FILE`, the user's `uv.toml`, then the system's (`XDG_CONFIG_DIRS`,
//!   `/etc/uv/uv.toml`): `index-url`, `extra-index-url`, `[[index]]`;
//! - pip's: `PIP_INDEX_URL` and `PIP_EXTRA_INDEX_URL`, else `index-url` and `extra-index-url`
//!   of the pip configuration files (`/etc/pip.conf`, `XDG_CONFIG_DIRS`, `~/.pip/pip.conf`,
//!   `~/.config/pip/pip.conf`, `$PIP_CONFIG_FILE`, the later winning; `[install]` over
//!   `[global]`), so a company index set up for pip works unchanged.
//!
//! A file is read only when nobody but the user or root can change it or any directory above
//! it ([`crate::home::check_owned`]): a `uv.toml` another local user planted in a world-writable
//! `XDG_CONFIG_DIRS` entry, or one that is group- or world-writable, is skipped with a warning.
//! Nothing else of those files (caches, `find-links`, build settings, other indexes' options)
//! is used.
//!
//! [`Source::describe`] names the index for the consent question and `tools show`, with any
//! user name and password taken out of the URL; [`Source::scrub`] takes them out of a resolver's
//! message too.

use std::path::PathBuf;

/// The index settings in effect for one resolution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    /// The default index, when one is configured (`None`: PyPI).
    pub default: Option<String>,
    /// Further indexes.
    pub extra: Vec<String>,
}

/// `path`'s text, when it exists and only the user or root can change it (and what is above
/// it); a file someone else could have written is skipped, with a warning.
fn read_trusted(path: &std::path::Path) -> Option<String> {
    if !path.is_file() {
        return None;
    }
    match crate::home::check_owned(path) {
        Ok(()) => std::fs::read_to_string(path).ok(),
        Err(e) => {
            tracing::warn!(
                "not reading the package index settings in {}: {e}; another user could have \
                 written it",
                path.display()
            );
            None
        }
    }
}

/// Environment variables through which uv is given an index of its own.
const UV_INDEX_VARS: [&str; 4] = [
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_INDEX",
    "UV_EXTRA_INDEX_URL",
];

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn urls(value: &str) -> Vec<String> {
    value.split_whitespace().map(str::to_string).collect()
}

/// The `uv.toml` files uv reads of its own accord (user, then system).
fn uv_config_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(path) = var("UV_CONFIG_FILE") {
        files.push(PathBuf::from(path));
    }
    let config_home = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(c) = config_home {
        files.push(c.join("uv/uv.toml"));
    }
    let dirs = var("XDG_CONFIG_DIRS").unwrap_or_else(|| "/etc/xdg".into());
    files.extend(dirs.split(':').map(|d| PathBuf::from(d).join("uv/uv.toml")));
    files.push(PathBuf::from("/etc/uv/uv.toml"));
    files
}

/// The indexes a `uv.toml` names: `index-url`, `extra-index-url`, and `[[index]]` tables (the
/// one marked `default = true` is the default).
fn uv_toml_indexes(text: &str) -> (Option<String>, Vec<String>) {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return (None, Vec::new());
    };
    let mut default = doc
        .get("index-url")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let mut extra: Vec<String> = doc
        .get("extra-index-url")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(tables) = doc.get("index").and_then(|v| v.as_array_of_tables()) {
        for t in tables.iter() {
            let Some(url) = t.get("url").and_then(|v| v.as_str()) else {
                continue;
            };
            if t.get("default").and_then(|v| v.as_bool()) == Some(true) {
                default = Some(url.to_string());
            } else {
                extra.push(url.to_string());
            }
        }
    }
    (default, extra)
}

/// `index-url` and `extra-index-url` of pip's configuration files, `[install]` over `[global]`,
/// later files over earlier ones.
fn pip_conf_indexes() -> (Option<String>, Vec<String>) {
    let mut files = vec![PathBuf::from("/etc/pip.conf")];
    if let Some(c) = var("XDG_CONFIG_DIRS") {
        files.extend(c.split(':').map(|d| PathBuf::from(d).join("pip/pip.conf")));
    } else {
        files.push(PathBuf::from("/etc/xdg/pip/pip.conf"));
    }
    if let Some(home) = var("HOME").map(PathBuf::from) {
        files.push(home.join(".pip/pip.conf"));
        let config = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".config"));
        files.push(config.join("pip/pip.conf"));
    }
    if let Some(f) = var("PIP_CONFIG_FILE") {
        files.push(PathBuf::from(f));
    }
    let (mut default, mut extra) = (None, Vec::new());
    for file in files {
        let Some(text) = read_trusted(&file) else {
            continue;
        };
        let (d, e) = pip_conf_file(&text);
        default = d.or(default);
        if !e.is_empty() {
            extra = e;
        }
    }
    (default, extra)
}

/// One pip configuration file's `index-url` and `extra-index-url` (`[install]` over
/// `[global]`; continuation lines are further values).
pub(crate) fn pip_conf_file(text: &str) -> (Option<String>, Vec<String>) {
    let mut section = String::new();
    // (section rank, value) per key: install = 2 beats global = 1.
    let mut index: Option<(u8, String)> = None;
    let mut extra: Option<(u8, Vec<String>)> = None;
    let mut current: Option<&'static str> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            section = line[1..line.len() - 1].trim().to_ascii_lowercase();
            current = None;
            continue;
        }
        let rank = match section.as_str() {
            "install" => 2,
            "global" => 1,
            _ => {
                current = None;
                continue;
            }
        };
        let continued = raw.starts_with(char::is_whitespace) && current.is_some();
        if continued {
            if current == Some("extra")
                && let Some((r, list)) = &mut extra
                && *r == rank
            {
                list.extend(urls(line));
            }
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']) else {
            current = None;
            continue;
        };
        let key = key.trim().to_ascii_lowercase().replace('_', "-");
        let value = value.trim();
        match key.as_str() {
            "index-url" if index.as_ref().is_none_or(|(r, _)| *r <= rank) => {
                index = urls(value).into_iter().next().map(|v| (rank, v));
                current = Some("index");
            }
            "extra-index-url" if extra.as_ref().is_none_or(|(r, _)| *r <= rank) => {
                extra = Some((rank, urls(value)));
                current = Some("extra");
            }
            _ => current = None,
        }
    }
    (
        index.map(|(_, v)| v),
        extra.map(|(_, v)| v).unwrap_or_default(),
    )
}

impl Source {
    /// The settings in effect now, read from this process's environment and the files only the
    /// user (or root) can change.
    pub fn current() -> Source {
        let mut source = Source::default();
        let uv_env = UV_INDEX_VARS.iter().any(|v| var(v).is_some());
        if uv_env {
            source.default = var("UV_DEFAULT_INDEX").or_else(|| var("UV_INDEX_URL"));
            for v in ["UV_INDEX", "UV_EXTRA_INDEX_URL"] {
                if let Some(value) = var(v) {
                    // `UV_INDEX` entries may be named: `name=url`.
                    source.extra.extend(urls(&value).into_iter().map(
                        |u| match u.split_once('=') {
                            Some((_, url)) if !u.contains("://") || url.contains("://") => {
                                url.to_string()
                            }
                            _ => u,
                        },
                    ));
                }
            }
            return source;
        }
        for file in uv_config_files() {
            let Some(text) = read_trusted(&file) else {
                continue;
            };
            let (default, extra) = uv_toml_indexes(&text);
            if default.is_some() || !extra.is_empty() {
                source.default = default;
                source.extra = extra;
                return source;
            }
        }
        let (mut default, mut extra) = pip_conf_indexes();
        if let Some(v) = var("PIP_INDEX_URL") {
            default = urls(&v).into_iter().next();
        }
        if let Some(v) = var("PIP_EXTRA_INDEX_URL") {
            extra = urls(&v);
        }
        source.default = default;
        source.extra = extra;
        source
    }

    /// `PyPI`, or `the index https://pypi.corp.example/simple` (and any further ones), with
    /// credentials taken out of every URL.
    pub fn describe(&self) -> String {
        let mut text = match &self.default {
            None => "PyPI".to_string(),
            Some(url) => format!("the index {}", without_credentials(url)),
        };
        if !self.extra.is_empty() {
            let extra: Vec<String> = self.extra.iter().map(|u| without_credentials(u)).collect();
            text.push_str(&format!(" (also {})", extra.join(", ")));
        }
        text
    }

    /// `text` with every configured URL's credentials taken out.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for url in self.default.iter().chain(&self.extra) {
            let clean = without_credentials(url);
            if clean != *url {
                out = out.replace(url.as_str(), &clean);
            }
            if let Some(userinfo) = userinfo(url)
                && !userinfo.is_empty()
            {
                out = out.replace(userinfo, "***");
            }
        }
        out
    }
}

/// The `user:password` part of a URL, if it has one.
fn userinfo(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority.rfind('@').map(|at| &authority[..at])
}

/// `url` without its `user:password@`.
pub fn without_credentials(url: &str) -> String {
    match (url.find("://"), userinfo(url)) {
        (Some(scheme), Some(info)) => {
            let start = scheme + 3;
            format!("{}{}", &url[..start], &url[start + info.len() + 1..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show() {
        let url = "https://alice:s3cret@pypi.corp.example/simple";
        assert_eq!(without_credentials(url), "https://pypi.corp.example/simple");
        let source = Source {
            default: Some(url.into()),
            ..Source::default()
        };
        assert_eq!(
            source.describe(),
            "the index https://pypi.corp.example/simple"
        );
        let said = source.scrub(&format!(
            "failed to fetch {url}/feedparser/ (user alice:s3cret)"
        ));
        assert!(!said.contains("s3cret"), "{said}");
        assert_eq!(
            without_credentials("https://pypi.org/simple"),
            "https://pypi.org/simple"
        );
        assert_eq!(Source::default().describe(), "PyPI");
    }

    #[test]
    fn pip_conf_install_beats_global_and_continuations_are_values() {
        let (index, extra) = pip_conf_file(
            "[global]\nindex-url = https://a.example/simple\nextra-index-url =\n    https://b.example/simple\n    https://c.example/simple\n[install]\nindex_url: https://d.example/simple\n[freeze]\nindex-url = https://e.example/simple\n",
        );
        assert_eq!(index.as_deref(), Some("https://d.example/simple"));
        assert_eq!(
            extra,
            vec!["https://b.example/simple", "https://c.example/simple"]
        );
        assert_eq!(pip_conf_file("# nothing\n"), (None, Vec::new()));
    }

    #[test]
    fn uv_toml_default_index_and_extras() {
        let (d, e) = uv_toml_indexes(
            "[[index]]\nname = \"corp\"\nurl = \"https://corp.example/simple\"\ndefault = true\n[[index]]\nurl = \"https://more.example/simple\"\n",
        );
        assert_eq!(d.as_deref(), Some("https://corp.example/simple"));
        assert_eq!(e, vec!["https://more.example/simple"]);
        let (d, _) = uv_toml_indexes("index-url = \"https://x.example/simple\"\n");
        assert_eq!(d.as_deref(), Some("https://x.example/simple"));
    }
}
