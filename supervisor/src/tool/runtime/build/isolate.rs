//! What the uv and pip processes autotool starts may read: only what autotool chose for them.
//!
//! uv and pip run outside the sandbox, as the user who runs autotool, so anything they read
//! decides what runs and what lands on disk with that user's rights. Left to themselves they
//! read configuration from every ancestor of their working directory (`uv.toml`,
//! `pyproject.toml`'s `[tool.uv]`), from system and user configuration directories and from
//! the environment (`UV_*`, `PIP_*`), any of which another local user may be able to write (the
//! system temp dir, a world-writable `XDG_CONFIG_DIRS` entry). So every such process:
//! - discovers no configuration: `UV_NO_CONFIG=1`; pip with `--isolated` and
//!   `PIP_CONFIG_FILE=/dev/null` (`--isolated` alone still reads the system-wide files);
//! - never builds from source: `UV_NO_BUILD=1` (and `--no-build` where autotool installs);
//!   pip with `--only-binary :all:`;
//! - gets an environment of exactly: the network's own settings (proxies, certificate files),
//!   the locale, `HOME`, a fixed `PATH`, and what autotool decides: the cache directory, the
//!   temp directory and the index. Nothing else of `UV_*` or `PIP_*` is inherited;
//! - uses a cache and a working directory that are autotool's own ([`Private`]: 0700, owned by
//!   the user, below directories nobody else can change), never the system temp dir;
//! - is told the index explicitly: the one [`Source::current`] read from the user's own
//!   settings (and the consent question names).

use crate::home::{Untrusted, private_dir};
use crate::index::Source;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `PATH` uv and pip get: system directories only (they run nothing found on it, and a
/// directory another user can write must never be searched).
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Variables passed on from autotool's own environment: the network's settings and the
/// locale, which say nothing about where packages come from or go.
const PASSED: &[&str] = &[
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
    "UV_HTTP_TIMEOUT",
];

/// The directories a uv or pip run may write: autotool's own, made 0700 and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Private {
    /// The caches: `uv/` and `pip/` inside.
    pub cache: PathBuf,
    /// Working directories (and `TMPDIR`) of the runs.
    pub work: PathBuf,
}

impl Private {
    /// `cache/` and `work/` of the autotool home (or of the directory a runtime is built in),
    /// made or checked: each owned by this user, 0700, below directories only this user or
    /// root can change.
    pub(crate) fn in_home(home: &Path) -> Result<Private, Untrusted> {
        let private = Private {
            cache: home.join("cache"),
            work: home.join("work"),
        };
        for dir in [
            &private.cache,
            &private.cache.join("uv"),
            &private.cache.join("pip"),
            &private.work,
        ] {
            private_dir(dir)?;
        }
        Ok(private)
    }

    /// A fresh working directory for one run, removed when dropped.
    pub(crate) fn workdir(&self) -> std::io::Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(&self.work)
    }
}

/// The environment every uv and pip process starts from: autotool's own variables cleared,
/// then [`PASSED`] and the fixed ones.
fn base(program: &Path, cwd: &Path, private: &Private) -> Command {
    let mut c = Command::new(program);
    c.env_clear().current_dir(cwd);
    for name in PASSED {
        if let Some(v) = std::env::var_os(name) {
            c.env(name, v);
        }
    }
    c.env("PATH", PATH).env("TMPDIR", &private.work);
    c
}

/// uv, reading nothing autotool did not choose: no configuration file, no build from source,
/// no managed Python download, autotool's cache, and `source`'s index.
pub(crate) fn uv_command(uv: &Path, cwd: &Path, private: &Private, source: &Source) -> Command {
    let mut c = base(uv, cwd, private);
    c.env("UV_NO_CONFIG", "1")
        .env("UV_NO_BUILD", "1")
        .env("UV_PYTHON_DOWNLOADS", "never")
        .env("UV_NO_PROGRESS", "1")
        .env("UV_CACHE_DIR", private.cache.join("uv"));
    // The machine's own certificate store, as pip uses it: a network behind a TLS-inspecting
    // proxy has its root there, not in uv's built-in list.
    if std::env::var_os("UV_SYSTEM_CERTS").is_none() && std::env::var_os("UV_NATIVE_TLS").is_none()
    {
        c.env("UV_SYSTEM_CERTS", "1");
    }
    if let Some(index) = &source.default {
        c.env("UV_DEFAULT_INDEX", index);
    }
    if !source.extra.is_empty() {
        c.env("UV_INDEX", source.extra.join(" "));
    }
    c
}

/// `python -I PIP install …` (`pip` is the pip to run: a wheel's path + `/pip`, or `-m pip`),
/// reading no configuration file and no `PIP_*` variable, wheels only, with autotool's cache
/// and `source`'s index; the caller adds what to install and where.
pub(crate) fn pip_install(
    python: &Path,
    pip: &[std::ffi::OsString],
    private: &Private,
    source: &Source,
) -> Command {
    pip_command(python, pip, "install", private, source)
}

/// [`pip_install`] for another of pip's commands that fetch packages (`download`).
pub(crate) fn pip_command(
    python: &Path,
    pip: &[std::ffi::OsString],
    command: &str,
    private: &Private,
    source: &Source,
) -> Command {
    let mut c = base(python, &private.work, private);
    c.env("PIP_CONFIG_FILE", "/dev/null")
        .env("PYTHONNOUSERSITE", "1")
        .arg("-I")
        .args(pip)
        .arg("--isolated")
        .arg("--cache-dir")
        .arg(private.cache.join("pip"))
        .args([
            command,
            "--disable-pip-version-check",
            "--no-input",
            "--progress-bar",
            "off",
            "--only-binary",
            ":all:",
        ]);
    if command == "install" && quiet_as_root(pip, rustix::process::geteuid().is_root()) {
        c.arg("--root-user-action=ignore");
    }
    if let Some(index) = &source.default {
        c.args(["--index-url", index]);
    }
    for extra in &source.extra {
        c.args(["--extra-index-url", extra]);
    }
    c
}

/// Whether to turn off pip's "Running pip as the 'root' user" warning: autotool's pip installs
/// into a directory of its own (`--target`) or a virtual environment, never into the system's
/// Python, so the warning is only noise in the progress (and the demo's first screen). It is
/// given as `--root-user-action=ignore` (`PIP_ROOT_USER_ACTION` would not do: `--isolated`
/// reads no `PIP_*` variable), which pip knows from 22.1; so only to a pip whose wheel's name
/// says it is that recent (`…/pip-23.0.1-py3-none-any.whl/pip`). An older pip would refuse
/// the option, and `-m pip`'s version is not known without running it: both keep the warning.
/// pip's other warnings and errors are untouched.
fn quiet_as_root(pip: &[std::ffi::OsString], root: bool) -> bool {
    let wheel = match pip {
        [one] => Path::new(one).parent().and_then(Path::file_name),
        _ => None,
    };
    let version = wheel
        .and_then(|w| w.to_str())
        .and_then(|w| w.strip_prefix("pip-"))
        .and_then(|rest| rest.split('-').next())
        .map(|v| {
            v.split('.')
                .map(|n| n.parse::<u32>().ok())
                .take(2)
                .collect::<Option<Vec<u32>>>()
        });
    root && matches!(version, Some(Some(v)) if v.len() == 2 && (v[0], v[1]) >= (22, 1))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env_of(c: &Command) -> Vec<(String, Option<String>)> {
        c.get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    #[test]
    fn uv_gets_no_configuration_no_build_and_autotools_cache_and_index() {
        let home = tempfile::tempdir().unwrap();
        let private = Private::in_home(home.path()).unwrap();
        let source = Source {
            default: Some("http://127.0.0.1:1/simple".into()),
            extra: vec!["http://127.0.0.1:2/simple".into()],
        };
        let c = uv_command(Path::new("/bin/uv"), &private.work, &private, &source);
        let env = env_of(&c);
        let has = |k: &str, v: &str| env.contains(&(k.to_string(), Some(v.to_string())));
        assert!(has("UV_NO_CONFIG", "1"), "{env:?}");
        assert!(has("UV_NO_BUILD", "1"), "{env:?}");
        assert!(has("UV_DEFAULT_INDEX", "http://127.0.0.1:1/simple"));
        assert!(has("UV_INDEX", "http://127.0.0.1:2/simple"));
        assert!(has(
            "UV_CACHE_DIR",
            &home.path().join("cache/uv").to_string_lossy()
        ));
        assert!(has("TMPDIR", &home.path().join("work").to_string_lossy()));
        assert_eq!(
            c.get_current_dir(),
            Some(home.path().join("work").as_path())
        );
        // Nothing else of uv's or pip's: the environment is cleared first (a cleared
        // environment is what `get_envs` cannot show, so the set of names is pinned).
        for (k, _) in &env {
            assert!(
                PASSED.contains(&k.as_str())
                    || [
                        "PATH",
                        "TMPDIR",
                        "UV_NO_CONFIG",
                        "UV_NO_BUILD",
                        "UV_PYTHON_DOWNLOADS",
                        "UV_NO_PROGRESS",
                        "UV_CACHE_DIR",
                        "UV_DEFAULT_INDEX",
                        "UV_INDEX",
                    ]
                    .contains(&k.as_str()),
                "{k}"
            );
        }
        let dir = std::fs::metadata(&private.cache).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn pip_reads_no_configuration_and_installs_wheels_only() {
        let home = tempfile::tempdir().unwrap();
        let private = Private::in_home(home.path()).unwrap();
        let source = Source {
            default: Some("http://127.0.0.1:1/simple".into()),
            extra: Vec::new(),
        };
        let c = pip_install(
            Path::new("/usr/bin/python3"),
            &["-m".into(), "pip".into()],
            &private,
            &source,
        );
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let text = args.join(" ");
        assert!(
            text.starts_with("-I -m pip --isolated --cache-dir "),
            "{text}"
        );
        assert!(
            text.ends_with("install --disable-pip-version-check --no-input --progress-bar off --only-binary :all: --index-url http://127.0.0.1:1/simple"),
            "{text}"
        );
        assert!(env_of(&c).contains(&("PIP_CONFIG_FILE".into(), Some("/dev/null".into()))));
    }

    #[test]
    fn pips_root_warning_is_off_only_where_pip_knows_the_option() {
        let wheel = |name: &str| vec![std::ffi::OsString::from(format!("/w/{name}/pip"))];
        for (pip, root, quiet) in [
            (wheel("pip-23.0.1-py3-none-any.whl"), true, true),
            (wheel("pip-22.1-py3-none-any.whl"), true, true),
            (wheel("pip-24.10-py3-none-any.whl"), true, true),
            // Not root: there is nothing to silence.
            (wheel("pip-23.0.1-py3-none-any.whl"), false, false),
            // Ubuntu 22.04's pip: it would refuse the option.
            (wheel("pip-22.0.2-py3-none-any.whl"), true, false),
            (wheel("pip-21.2.3-py3-none-any.whl"), true, false),
            (wheel("pip-x-py3-none-any.whl"), true, false),
            (vec!["-m".into(), "pip".into()], true, false),
        ] {
            assert_eq!(quiet_as_root(&pip, root), quiet, "{pip:?} root={root}");
        }
        // In the command: install only (download has no such option), and only as root.
        let home = tempfile::tempdir().unwrap();
        let private = Private::in_home(home.path()).unwrap();
        let pip = wheel("pip-23.0.1-py3-none-any.whl");
        let has = |command: &str| {
            pip_command(
                Path::new("/usr/bin/python3"),
                &pip,
                command,
                &private,
                &Source::default(),
            )
            .get_args()
            .any(|a| a == "--root-user-action=ignore")
        };
        assert_eq!(has("install"), rustix::process::geteuid().is_root());
        assert!(!has("download"));
    }

    #[test]
    fn a_cache_another_user_could_change_is_refused() {
        let home = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir(home.path().join("cache")).unwrap();
        // Made world-writable: made private again (it is this user's own).
        std::fs::set_permissions(
            home.path().join("cache"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        Private::in_home(home.path()).unwrap();
        let mode = std::fs::metadata(home.path().join("cache"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        // Below a directory others may write (no sticky bit): refused.
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Private::in_home(home.path()).unwrap_err();
        assert!(e.why.contains("writable by other users"), "{e}");
    }
}
