//! What autotool installs with (uv, pip, the runtime's ruff) runs outside the sandbox, as the
//! user: another local user must not be able to steer it. Each attack is planted as that other
//! user would (as root: files owned by `nobody`, uid 65534; as an unprivileged user, who cannot
//! give files away: in directories everyone may write, with the modes a planter's files would
//! have), and each has a control showing the plant works on uv run as autotool used to run it:
//! - `uv.toml` and `pyproject.toml` (`[tool.uv]`) in every ancestor of where uv could run and in
//!   the temp dir, `uv/uv.toml` and `pip/pip.conf` in `XDG_CONFIG_DIRS`, a `UV_CONFIG_FILE`, a
//!   `UV_CACHE_DIR`: each names the planter's index (an edited wheel, an sdist whose build
//!   script leaves a marker) and the planter's cache. None is read: the user's own index is
//!   asked about and used, the planter's index and cache are never touched, no build script
//!   runs, and the tool imports the genuine code;
//! - a home below a directory others may write (no sticky bit) is refused, by every command
//!   and in `autotool doctor`; below a sticky one (as `/tmp`) it is used;
//! - a runtime whose `ruff` another user could change: ruff is never run.

use super::{finish, ok, strict, yes};
use autotool_tests::index::{Index, Wheel, sdist, sdist_marker};
use autotool_tests::locate;
use autotool_tests::serve::ServeHome;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The uid files are given to as root: another local user (`nobody`).
const PLANTER: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A directory as `/tmp` is: everyone may add to it, nobody may take what is another's.
fn sticky(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    chmod(path, 0o1777);
    path.to_path_buf()
}

/// A directory of the planter's, which everyone may write.
fn planter_dir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    if is_root() {
        std::os::unix::fs::chown(path, Some(PLANTER), Some(PLANTER)).unwrap();
    }
    chmod(path, 0o777);
    path.to_path_buf()
}

/// `text` written at `path` as the planter would leave it: as root, owned by `nobody`;
/// otherwise writable by everyone (a file this user cannot give away).
fn plant(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    if is_root() {
        std::os::unix::fs::chown(path, Some(PLANTER), Some(PLANTER)).unwrap();
        chmod(path, 0o644);
    } else {
        chmod(path, 0o666);
    }
}

const TOOL: &str = r#"from mcp.server.mcpserver import MCPServer
import feedish

REQUIRED_PACKAGES = ["feedish==1.0"]
mcp = MCPServer("genuine")

@mcp.tool()
def origin() -> str:
    """Where feedish came from."""
    return feedish.ORIGIN + " " + feedish.prefix()

if __name__ == "__main__":
    mcp.run()
"#;

fn feedish(origin: &str) -> Wheel {
    let code = format!(
        "from helperdep import PREFIX\nORIGIN = {origin:?}\n\ndef prefix():\n    return PREFIX\n"
    );
    Wheel::pure(
        "feedish",
        "1.0",
        &[("feedish/__init__.py", code.as_bytes())],
        &["helperdep>=2"],
    )
}

/// The user's own index: the genuine feedish and helperdep wheels.
fn users_index() -> Index {
    let index = Index::start().unwrap();
    index.add_wheel("feedish", &feedish("genuine"));
    index.add_wheel(
        "helperdep",
        &Wheel::pure(
            "helperdep",
            "2.0",
            &[("helperdep.py", b"PREFIX = 'feed:'\n")],
            &[],
        ),
    );
    index
}

/// The planter's index: an edited feedish 1.0, and helperdep 2.0 as an sdist only, whose
/// build script leaves [`sdist_marker`].
fn planters_index() -> (Index, PathBuf) {
    let index = Index::start().unwrap();
    index.add_wheel("feedish", &feedish("planted"));
    let (file, bytes) = sdist("helperdep", "2.0");
    index.add("helperdep", &file, bytes);
    (index, sdist_marker("helperdep", "2.0"))
}

/// Everything the planter leaves, in a directory standing for the system temp dir.
struct Plant {
    /// Sticky and world-writable, as `/tmp`; holds a `uv.toml`.
    root: tempfile::TempDir,
    /// Sticky and world-writable, inside `root`; holds a `pyproject.toml` with `[tool.uv]`.
    shared: PathBuf,
    /// `XDG_CONFIG_DIRS` the planter writes: `uv/uv.toml`, `pip/pip.conf`.
    xdg: PathBuf,
    /// A `uv.toml` for `UV_CONFIG_FILE`.
    config_file: PathBuf,
    /// The cache the plants point uv at.
    cache: PathBuf,
}

impl Plant {
    fn new(planter: &Index) -> Plant {
        let root = tempfile::Builder::new()
            .prefix("autotool-plant-")
            .tempdir()
            .unwrap();
        sticky(root.path());
        let shared = sticky(&root.path().join("shared"));
        let cache = planter_dir(&root.path().join("planter-cache"));
        let url = planter.url();
        let settings = format!(
            "index-url = \"{url}\"\nextra-index-url = [\"{url}\"]\ncache-dir = \"{}\"\n",
            cache.display()
        );
        plant(&root.path().join("uv.toml"), &settings);
        plant(
            &shared.join("pyproject.toml"),
            &format!("[project]\nname = \"planted\"\nversion = \"0\"\n\n[tool.uv]\n{settings}"),
        );
        let xdg = planter_dir(&root.path().join("xdg"));
        for sub in ["uv", "pip"] {
            planter_dir(&xdg.join(sub));
        }
        plant(&xdg.join("uv/uv.toml"), &settings);
        plant(
            &xdg.join("pip/pip.conf"),
            &format!("[global]\nindex-url = {url}\n"),
        );
        let config_file = root.path().join("uv-config.toml");
        plant(&config_file, &settings);
        Plant {
            root,
            shared,
            xdg,
            config_file,
            cache,
        }
    }

    fn cache_entries(&self) -> usize {
        std::fs::read_dir(&self.cache).unwrap().count()
    }
}

/// uv as autotool used to run it: its own configuration discovery on, in a working directory
/// `cwd`, with `env` on top of the test's environment (no index of its own).
fn plain_uv(cwd: &Path, args: &[&str], env: &[(&str, &Path)]) -> std::process::Output {
    let mut c = Command::new(locate::uv().unwrap());
    c.current_dir(cwd)
        .args(args)
        .arg("--python")
        .arg(locate::runtime().unwrap().python);
    for v in [
        "UV_DEFAULT_INDEX",
        "UV_INDEX_URL",
        "UV_INDEX",
        "UV_EXTRA_INDEX_URL",
        "UV_CACHE_DIR",
        "UV_NO_CONFIG",
        "UV_CONFIG_FILE",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().map(|(k, v)| (*k, *v)));
    c.output().unwrap()
}

#[test]
fn configuration_and_caches_other_users_plant_are_never_read() {
    let users = users_index();
    let (planter, marker) = planters_index();
    let plant = Plant::new(&planter);
    let home = ServeHome::in_dir(&plant.shared).unwrap();
    let Some(serve) = strict() else {
        return;
    };
    // The user's own settings: a uv.toml only they can write, naming their index.
    let own = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(own.path().join("uv")).unwrap();
    std::fs::write(
        own.path().join("uv/uv.toml"),
        format!("index-url = \"{}\"\n", users.url()),
    )
    .unwrap();
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let serve = serve
        .env("AUTOTOOL_UV", &path(&locate::uv().unwrap()))
        .env("TMPDIR", &path(plant.root.path()))
        .env("XDG_CONFIG_HOME", &path(own.path()))
        .env("XDG_CONFIG_DIRS", &path(&plant.xdg))
        .env("UV_CONFIG_FILE", &path(&plant.config_file))
        .env("UV_CACHE_DIR", &path(&plant.cache))
        .env("UV_FIND_LINKS", &planter.url());
    let mut server = serve.start(&home).unwrap();
    server.initialize_with(super::asking()).unwrap();
    let (outcome, asked) = server
        .call_answering(
            "create_tool",
            json!({"name": "genuine", "code": TOOL, "verify": "quick"}),
            yes,
        )
        .unwrap();
    ok(&outcome);
    let asked: Vec<&str> = asked.iter().filter_map(|q| q["message"].as_str()).collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(&format!("from the index {}?", users.url())),
        "{}",
        asked[0]
    );
    let said = server.call_text("genuine__origin", json!({})).unwrap();
    assert_eq!(said, "genuine feed:");
    assert_eq!(planter.pages(), 0, "the planter's index was asked");
    assert_eq!(planter.downloads(), 0);
    assert!(users.downloads() >= 2, "{}", users.downloads());
    assert!(!marker.exists(), "the planter's build script ran");
    assert_eq!(plant.cache_entries(), 0, "uv used the planter's cache");
    // The planted UV_CONFIG_FILE was seen and skipped, with the reason.
    let said = server.stderr();
    assert!(
        said.contains("not reading the package index settings in")
            && said.contains("uv-config.toml"),
        "{said}"
    );
    finish(server);

    // The controls: the same plants steer uv run as autotool used to run it.
    // A pyproject.toml in an ancestor of the working directory: the planter's index, the
    // planter's cache, the build script run, the edited code installed.
    let cwd = tempfile::tempdir_in(&plant.shared).unwrap();
    let target = cwd.path().join("t");
    let target_arg = path(&target);
    let out = plain_uv(
        cwd.path(),
        &["pip", "install", "--target", &target_arg, "feedish==1.0"],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = std::fs::read_to_string(target.join("feedish/__init__.py")).unwrap();
    assert!(installed.contains("planted"), "{installed}");
    assert!(marker.exists(), "the control did not run the build script");
    assert!(
        plant.cache_entries() > 0,
        "the control did not use the planted cache"
    );
    // A uv.toml in the temp dir, one in XDG_CONFIG_DIRS, one in UV_CONFIG_FILE: each sends
    // resolution to the planter's index.
    let outside = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir_in(plant.root.path()).unwrap();
    for (cwd, env) in [
        (elsewhere.path(), vec![]),
        (
            outside.path(),
            vec![("XDG_CONFIG_DIRS", plant.xdg.as_path())],
        ),
        (
            outside.path(),
            vec![("UV_CONFIG_FILE", plant.config_file.as_path())],
        ),
    ] {
        std::fs::write(cwd.join("r.in"), "feedish==1.0\n").unwrap();
        let before = planter.pages();
        let out = plain_uv(cwd, &["pip", "compile", "r.in", "--quiet"], &env);
        assert!(
            planter.pages() > before,
            "the control in {cwd:?} with {env:?} did not ask the planter's index: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_file(&marker);
}

fn cli_fails_with(home: &ServeHome, says: &str) {
    let (status, out, err) = home.cli(&["tools", "list"]).unwrap();
    assert!(!status.success(), "{out}{err}");
    assert!(
        err.contains("is not safe to use") && err.contains(says),
        "{err}"
    );
    assert_eq!(doctor_on_home(home)["status"], "fail");
}

/// `autotool doctor`'s check of the home.
fn doctor_on_home(home: &ServeHome) -> Value {
    let (_, out, _) = home.cli(&["doctor", "--json"]).unwrap();
    let report: Value = serde_json::from_str(&out).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "home")
        .unwrap_or_else(|| panic!("{out}"))
        .clone()
}

#[test]
fn a_home_other_users_could_replace_is_refused() {
    let open = tempfile::tempdir().unwrap();
    let home = ServeHome::in_dir(open.path()).unwrap();
    // Others may write where the home is, without the sticky bit: they could rename it away
    // and put their own (with their own runtime and ruff) in its place.
    chmod(open.path(), 0o777);
    cli_fails_with(&home, "writable by other users");
    // The control: with the sticky bit (as /tmp) the same home is used.
    chmod(open.path(), 0o1777);
    let (status, out, err) = home.cli(&["tools", "list"]).unwrap();
    assert!(status.success(), "{out}{err}");
    let check = doctor_on_home(&home);
    assert_eq!(check["status"], "ok", "{check}");
    // A home another user made (and so owns) is refused too; only root can give one away.
    if is_root() {
        std::os::unix::fs::chown(home.path(), Some(PLANTER), Some(PLANTER)).unwrap();
        cli_fails_with(&home, "belongs to uid 65534");
        std::os::unix::fs::chown(home.path(), Some(0), Some(0)).unwrap();
    }
    chmod(open.path(), 0o700);
}

/// A runtime whose interpreter and packages are the test runtime's and whose `ruff` is a
/// script leaving `marker`.
fn runtime_with_fake_ruff(dir: &Path, marker: &Path) {
    let real = locate::runtime().unwrap().venv;
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::copy(real.join("pyvenv.cfg"), dir.join("pyvenv.cfg")).unwrap();
    std::os::unix::fs::symlink(real.join("lib"), dir.join("lib")).unwrap();
    std::os::unix::fs::symlink(real.join("bin/python3"), dir.join("bin/python3")).unwrap();
    let ruff = dir.join("bin/ruff");
    std::fs::write(
        &ruff,
        format!("#!/bin/sh\necho ran >> '{}'\nexit 0\n", marker.display()),
    )
    .unwrap();
    chmod(&ruff, 0o755);
}

/// What creating a tool on `runtime` answered, and serve's stderr (serve may also refuse the
/// runtime at its start).
fn create_on(runtime: &Path, home: &ServeHome) -> (String, String) {
    let serve = strict()
        .unwrap()
        .env("AUTOTOOL_RUNTIME", &runtime.to_string_lossy());
    let mut server = serve.start(home).unwrap();
    let said = match server.initialize() {
        Ok(_) => {
            let r = server
                .call_result(
                    "create_tool",
                    json!({"name": "linted", "code": "x = 1\n", "verify": "quick"}),
                )
                .unwrap();
            r.text
        }
        Err(e) => format!("{e:#}"),
    };
    let stderr = server
        .finish(super::EXIT_BOUND)
        .map(|(_, stderr)| stderr)
        .unwrap_or_else(|e| format!("{e:#}"));
    (said, stderr)
}

#[test]
fn a_ruff_another_user_could_change_is_never_run() {
    if strict().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("runtime");
    let marker = dir.path().join("ruff-ran");
    runtime_with_fake_ruff(&runtime, &marker);
    // The planter's ruff: as root, a file of nobody's; otherwise a directory everyone may
    // write, in which anyone could have put it.
    if is_root() {
        std::os::unix::fs::chown(runtime.join("bin/ruff"), Some(PLANTER), Some(PLANTER)).unwrap();
    } else {
        chmod(&runtime.join("bin"), 0o777);
    }
    let home = ServeHome::new().unwrap();
    let (said, stderr) = create_on(&runtime, &home);
    assert!(
        said.contains("will not run") || stderr.contains("will not run"),
        "{said}\n{stderr}"
    );
    assert!(!marker.exists(), "the planted ruff ran");

    // The control: the same ruff, only this user's, is what the lint stage runs.
    if is_root() {
        std::os::unix::fs::chown(runtime.join("bin/ruff"), Some(0), Some(0)).unwrap();
    } else {
        chmod(&runtime.join("bin"), 0o755);
    }
    let (said, stderr) = create_on(&runtime, &home);
    assert!(
        marker.exists(),
        "the control did not run ruff: {said}\n{stderr}"
    );
}

/// Bytes of the regular files under `dir` now (what cannot be read is skipped: files come and
/// go while uv runs).
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

/// The most bytes under `dir` seen while `body` runs, sampled every 2 ms.
fn peak_while<T>(dir: &Path, body: impl FnOnce() -> T) -> (T, u64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let sampler = {
        let (dir, stop) = (dir.to_path_buf(), stop.clone());
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Ordering::SeqCst) {
                peak = peak.max(bytes_under(&dir));
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            peak.max(bytes_under(&dir))
        })
    };
    let out = body();
    stop.store(true, Ordering::SeqCst);
    (out, sampler.join().unwrap())
}

const MIB: u64 = 1 << 20;
/// How much a refused install may still write beyond the limit: the compressed wheels (the bomb
/// is about 64 KiB), pip's and uv's bookkeeping, the ledger's growth.
const MARGIN: u64 = MIB;

#[test]
fn a_zip_bomb_is_refused_before_it_is_unpacked() {
    let index = users_index();
    let bomb = Wheel::bomb("bombpkg", "1.0", 64);
    assert!(bomb.bytes.len() < 512 << 10, "{}", bomb.bytes.len());
    index.add_wheel("bombpkg", &bomb);
    let home = ServeHome::new().unwrap();
    let Some(serve) = strict() else {
        return;
    };
    let serve = serve
        .env("AUTOTOOL_UV", &locate::uv().unwrap().to_string_lossy())
        .env("UV_DEFAULT_INDEX", &index.url())
        .env("AUTOTOOL_PACKAGES_LIMIT", "8m");
    let mut server = serve.start(&home).unwrap();
    server.initialize_with(super::asking()).unwrap();
    let code = TOOL.replace("\"feedish==1.0\"", "\"bombpkg\"");
    let before = bytes_under(home.path());
    let ((outcome, asked), peak) = peak_while(home.path(), || {
        server
            .call_answering(
                "create_tool",
                json!({"name": "bombed", "code": code, "verify": "quick"}),
                yes,
            )
            .unwrap()
    });
    assert_eq!(asked.len(), 1, "{asked:?}");
    let r = super::refused(&outcome);
    assert!(r.text.contains("more than 8 MiB"), "{}", r.text);
    let grew = peak.saturating_sub(before);
    eprintln!("zip bomb of 64 MiB against an 8 MiB limit: the home grew by at most {grew} bytes");
    assert!(grew <= 8 * MIB + MARGIN, "the home grew by {grew} bytes");
    assert!(index.downloads() >= 1, "the bomb was never fetched");
    finish(server);

    // The control: uv, as autotool used to run it on the layer, writes the whole bomb (into
    // its cache and the target) before anything could look.
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("t");
    let (out, peak) = peak_while(work.path(), || {
        Command::new(locate::uv().unwrap())
            .args(["pip", "install", "--no-config", "--quiet", "--target"])
            .arg(&target)
            .arg("--python")
            .arg(locate::runtime().unwrap().python)
            .args([
                "--index-url",
                &index.url(),
                "--link-mode",
                "copy",
                "bombpkg",
            ])
            .env("UV_CACHE_DIR", work.path().join("cache"))
            .env_remove("UV_DEFAULT_INDEX")
            .output()
            .unwrap()
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("the control wrote {peak} bytes");
    assert!(peak >= 64 * MIB, "the control wrote only {peak} bytes");
}
