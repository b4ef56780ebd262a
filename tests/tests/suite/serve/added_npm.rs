//! `autotool add NAME npm:PACKAGE`: MCP servers from npm behind the sandbox, end to end, against
//! an npm registry this test serves on loopback (`tests/tools/npm_registry.py`) over the real
//! packages `.ci/test` fetched (`@modelcontextprotocol/server-filesystem` and `server-memory`,
//! with their whole trees) and a package built here. Each guard with a control:
//! - the real filesystem server, told by its arguments that it may use all of `/`, reads and
//!   writes the directory it was granted (control), and gets nothing of another file of the
//!   user's: the kernel refuses (the file is not in its sandbox), not the server;
//! - the real memory server answers; a lost layer is installed again from the kept lockfile, and
//!   not when that lockfile changed since;
//! - a `.npmrc` planted in the user's home is not read by autotool's npm (control: npm run
//!   the ordinary way reads it and uses the cache it names);
//! - a package with install scripts is installed without running them (control: a plain
//!   `npm install` of the same tarball runs them).

use super::{finish, never, strict};
use autotool_tests::locate;
use autotool_tests::serve::{Serve, ServeHome};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const FS: &str = "npm:@modelcontextprotocol/server-filesystem@2026.8.31";
const MEMORY: &str = "npm:@modelcontextprotocol/server-memory@2026.8.31";
const EVERYTHING: &str = "npm:@modelcontextprotocol/server-everything@2026.8.31";

/// The loopback registry, killed on drop.
struct Registry {
    child: Child,
    url: String,
}

impl Registry {
    /// Serving the fetched servers and `extra` tarballs.
    fn start(extra: &[&Path]) -> Registry {
        let dir = locate::npm_servers().unwrap_or_else(|e| panic!("{e:#}"));
        let mut child = Command::new("python3")
            .arg(locate::tools_dir().join("npm_registry.py"))
            .arg("serve")
            .arg(&dir)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        Registry {
            child,
            url: format!("http://127.0.0.1:{port}/"),
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Fixture {
    registry: Registry,
    home: ServeHome,
    user: tempfile::TempDir,
}

impl Fixture {
    fn new(dirs: &[&str], extra: &[&Path]) -> Fixture {
        let user = autotool_tests::host::scratch_dir("autotool-added-npm-").unwrap();
        std::fs::set_permissions(user.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for d in dirs {
            let path = user.path().join(d);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        Fixture {
            registry: Registry::start(extra),
            home: ServeHome::new().unwrap(),
            user,
        }
    }

    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        self.cli_with(args, &[])
    }

    /// [`Self::cli`] with further variables (a key's value, for one).
    fn cli_with(&self, args: &[&str], vars: &[(&str, &str)]) -> (bool, String, String) {
        let mut env = vec![
            ("HOME", self.user.path().as_os_str()),
            (
                "npm_config_registry",
                std::ffi::OsStr::new(&self.registry.url),
            ),
        ];
        env.extend(vars.iter().map(|(k, v)| (*k, std::ffi::OsStr::new(*v))));
        let (status, out, err) = self.home.cli_with(args, &env).unwrap();
        (status.success(), out, err)
    }

    fn serve(&self, serve: Serve) -> Serve {
        serve
            .env("HOME", &self.user.path().to_string_lossy())
            .env("npm_config_registry", &self.registry.url)
    }

    /// npm run the ordinary way (the user's home, its `.npmrc`, scripts on) in `dir`.
    fn plain_npm(&self, dir: &Path, args: &[&str]) {
        let out = Command::new("/usr/bin/npm")
            .args(args)
            .args(["--registry", &self.registry.url, "--no-audit", "--no-fund"])
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.user.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn answer(server: &mut autotool_tests::serve::Server, name: &str, args: Value) -> (bool, String) {
    let (outcome, _) = server.call_answering(name, args, never).unwrap();
    match outcome {
        Ok(r) => (!r.is_error, r.text),
        Err(e) => (false, format!("{e:?}")),
    }
}

#[test]
fn the_filesystem_server_uses_the_directory_granted_and_the_kernel_refuses_the_rest() {
    let Some(serve) = strict() else { return };
    let f = Fixture::new(&["notes"], &[]);
    let notes = f.user.path().join("notes");
    let diary = f.user.path().join("diary.txt");
    std::fs::write(notes.join("a.md"), "the note").unwrap();
    std::fs::write(&diary, "dear diary").unwrap();
    std::fs::set_permissions(&diary, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Its arguments allow it everything; only the grant counts.
    let notes_arg = notes.to_string_lossy().into_owned();
    let (success, out, err) = f.cli(&[
        "add", "fs", FS, "--write", "~/notes", "--yes", "--", &notes_arg, "/",
    ]);
    assert!(success, "{out}{err}");
    assert!(
        out.contains("no install script runs") && out.contains("/usr/bin/node --jitless"),
        "the plan says how it is installed and run: {out}"
    );
    let mut server = f.serve(serve).start_initialized(&f.home).unwrap();
    let read = json!({"path": notes.join("a.md").to_string_lossy()});
    let (read_ok, text) = answer(&mut server, "fs__read_text_file", read);
    assert!(read_ok && text.contains("the note"), "control: {text}");
    let write = json!({"path": notes.join("new.md").to_string_lossy(), "content": "written"});
    let (wrote, text) = answer(&mut server, "fs__write_file", write);
    assert!(wrote, "{text}");
    assert_eq!(
        std::fs::read_to_string(notes.join("new.md")).unwrap(),
        "written"
    );
    // The server lets `/` through; the file is not in its sandbox.
    let (got, text) = answer(
        &mut server,
        "fs__read_text_file",
        json!({"path": diary.to_string_lossy()}),
    );
    assert!(!got && !text.contains("dear diary"), "{text}");
    // Landlock (EACCES) or the missing mount (ENOENT) refuses it: the kernel, not the server.
    assert!(
        text.contains("EACCES") || text.contains("ENOENT"),
        "refused by the kernel: {text}"
    );
    let (got, text) = answer(
        &mut server,
        "fs__read_text_file",
        json!({"path": "/etc/shadow"}),
    );
    assert!(!got, "{text}");
    // Unconfined the file is there: the sandbox is what refused.
    assert_eq!(std::fs::read_to_string(&diary).unwrap(), "dear diary");
    finish(server);
    let (_, shown, _) = f.cli(&["tools", "show", "fs"]);
    assert!(
        shown.contains("npm:@modelcontextprotocol/server-filesystem 2026.8.31"),
        "{shown}"
    );
}

#[test]
fn the_memory_server_answers_and_a_planted_npmrc_is_not_read() {
    let Some(serve) = strict() else { return };
    let f = Fixture::new(&[], &[]);
    let planted = f.user.path().join("planted-cache");
    std::fs::write(
        f.user.path().join(".npmrc"),
        format!("cache={}\n", planted.display()),
    )
    .unwrap();
    let (success, out, err) = f.cli(&["add", "mem", MEMORY, "--yes"]);
    assert!(success, "{out}{err}");
    assert!(
        !planted.exists(),
        "autotool's npm read the planted .npmrc: {planted:?} exists"
    );
    let mut server = f.serve(serve.clone()).start_initialized(&f.home).unwrap();
    let (answered, text) = answer(&mut server, "mem__read_graph", json!({}));
    assert!(answered && text.contains("entities"), "{text}");
    finish(server);
    // A lost layer is installed again from the kept lockfile, which must still hash to what the
    // tool's file names: changed, nothing is installed.
    let layers = f.home.path().join("layers");
    let layer = std::fs::read_dir(&layers)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("npm-"))
        .unwrap();
    let lock_hash = layer.file_name().unwrap().to_string_lossy()[4..].to_string();
    let remove = |dir: &Path| {
        assert!(
            Command::new("chmod")
                .arg("-R")
                .arg("u+w")
                .arg(dir)
                .status()
                .unwrap()
                .success()
        );
        std::fs::remove_dir_all(dir).unwrap();
    };
    remove(&layer);
    let kept = f.home.path().join(format!("npm/locks/{lock_hash}.json"));
    let original = std::fs::read(&kept).unwrap();
    std::fs::write(&kept, [original.as_slice(), b" "].concat()).unwrap();
    let mut server = f.serve(serve.clone()).start_initialized(&f.home).unwrap();
    let (answered, text) = answer(&mut server, "mem__read_graph", json!({}));
    assert!(!answered && text.contains("no longer matches"), "{text}");
    finish(server);
    assert!(!layer.exists());
    std::fs::write(&kept, &original).unwrap();
    let mut server = f.serve(serve).start_initialized(&f.home).unwrap();
    // The first call installs the layer again (`npm ci` from autotool's cache): on a loaded
    // machine that can outlast one request's wait, so ask again while serve goes on installing.
    let mut outcome = None;
    for _ in 0..4 {
        match server.call_answering("mem__read_graph", json!({}), never) {
            Ok((answer, _)) => {
                outcome = Some(answer);
                break;
            }
            Err(e) => eprintln!("the reinstall is slow here; asking again: {e:#}"),
        }
    }
    let text = match outcome.expect("no answer in four tries") {
        Ok(r) if !r.is_error => r.text,
        other => panic!("{other:?}"),
    };
    assert!(text.contains("entities"), "{text}");
    finish(server);
    assert!(layer.join("layer.json").is_file());
    // Control: npm run the ordinary way reads it.
    let project = tempfile::tempdir().unwrap();
    f.plain_npm(
        project.path(),
        &[
            "install",
            "--ignore-scripts",
            "@modelcontextprotocol/server-memory@2026.8.31",
        ],
    );
    assert!(
        planted.is_dir(),
        "control: plain npm used the planted cache"
    );
}

/// The official server-everything: its functions, whose names hold `-`, are mounted and answer
/// with each kind of content; its prompts and resources are relayed, redacted; what else it
/// offers is named as not relayed; a setting
/// (`--env`) reaches it and a key's value it prints reaches the agent redacted; a setting that
/// names what autotool sets is refused, and a setting holding a key's value too (control: the
/// same server added with a plain setting).
#[test]
fn the_everything_server_is_mounted_under_its_own_names_and_says_what_is_not_relayed() {
    let Some(serve) = strict() else { return };
    let f = Fixture::new(&[], &[]);
    const TOKEN: &str = "every-s3cr3t-value-41";
    let vars = [("EVERY_TOKEN", TOKEN)];
    let add = |setting: &str| {
        f.cli_with(
            &[
                "add",
                "every",
                EVERYTHING,
                "--key",
                "EVERY_TOKEN",
                "--env",
                setting,
                "--yes",
            ],
            &vars,
        )
    };
    for (setting, why) in [
        ("LD_PRELOAD=/x.so", "cannot be a setting"),
        ("NODE_OPTIONS=--require=/x.js", "cannot be a setting"),
        (
            "COPY=every-s3cr3t-value-41",
            "holds the value of a stored key",
        ),
    ] {
        let (success, out, err) = add(setting);
        assert!(!success && err.contains(why), "{setting}: {out}{err}");
        assert!(!err.contains(TOKEN), "{err}");
    }
    let (_, listed, _) = f.cli(&["tools", "list"]);
    assert!(!listed.contains("every"), "nothing was added: {listed}");
    let (success, out, err) = add("EVERY_GREETING=hello from a setting");
    assert!(success, "{out}{err}");
    assert!(
        out.contains("settings:  EVERY_GREETING=hello from a setting"),
        "the plan shows the setting: {out}"
    );
    assert!(
        out.contains("every__get-annotated-message") && out.contains("every__get-sum"),
        "{out}"
    );
    assert!(
        out.contains("not relayed: resource subscriptions, completions, log messages"),
        "the add says what is not relayed: {out}"
    );
    let mut server = f
        .serve(serve)
        .env("EVERY_TOKEN", TOKEN)
        .start_initialized(&f.home)
        .unwrap();
    let (ok, text) = answer(&mut server, "every__get-sum", json!({"a": 2, "b": 3}));
    assert!(ok && text.contains('5'), "{text}");
    let (ok, text) = answer(&mut server, "every__echo", json!({"message": "hi there"}));
    assert!(ok && text.contains("hi there"), "{text}");
    let (outcome, _) = server
        .call_answering("every__get-tiny-image", json!({}), never)
        .unwrap();
    let image = outcome.unwrap();
    // Its text, the image, its text again.
    assert!(!image.is_error && image.blocks == 3, "{image:?}");
    let (ok, text) = answer(&mut server, "every__get-env", json!({}));
    assert!(ok, "{text}");
    assert!(
        text.contains("hello from a setting"),
        "the setting reached it: {text}"
    );
    assert!(
        text.contains("[REDACTED:EVERY_TOKEN]") && !text.contains(TOKEN),
        "the key reached it, and the agent only its name: {text}"
    );
    // Its prompts and resources are relayed: listed as it listed them when verified, got and
    // read from it, and redacted as every answer (control: an argument that is no key's value
    // comes back as given).
    let prompts = server.request_ok("prompts/list", json!({})).unwrap();
    let names = prompts["prompts"].to_string();
    assert!(
        names.contains("every__simple-prompt") && names.contains("every__args-prompt"),
        "{prompts}"
    );
    let prompt = |server: &mut autotool_tests::serve::Server, city: &str| {
        let args = json!({"name": "every__args-prompt", "arguments": {"city": city}});
        server.request_ok("prompts/get", args).unwrap()["messages"].to_string()
    };
    let paris = prompt(&mut server, "Paris");
    assert!(paris.contains("Paris"), "control: {paris}");
    let echoed = prompt(&mut server, TOKEN);
    assert!(
        echoed.contains("[REDACTED:EVERY_TOKEN]") && !echoed.contains(TOKEN),
        "{echoed}"
    );
    let unknown = server
        .request("prompts/get", json!({"name": "every__no-such-prompt"}))
        .unwrap();
    assert!(unknown.is_err(), "{unknown:?}");
    let resources = server.request_ok("resources/list", json!({})).unwrap();
    let document = "demo://resource/static/document/architecture.md";
    assert!(resources.to_string().contains(document), "{resources}");
    let read = |server: &mut autotool_tests::serve::Server, uri: &str| {
        server
            .request("resources/read", json!({"uri": uri}))
            .unwrap()
    };
    let architecture = read(&mut server, document).unwrap().to_string();
    assert!(architecture.contains("Architecture"), "{architecture}");
    // A URI its template names, read from it; one nobody offers is not found.
    let dynamic = read(&mut server, "demo://resource/dynamic/text/7")
        .unwrap()
        .to_string();
    assert!(dynamic.contains("Resource 7"), "{dynamic}");
    assert!(read(&mut server, "demo://resource/none").is_err());
    finish(server);
}

/// A package whose install scripts leave `marker`, and whose bin is a tiny MCP server.
fn scripted_package(dir: &Path, marker: &Path) -> PathBuf {
    let package = dir.join("package");
    std::fs::create_dir_all(&package).unwrap();
    let leave = format!(
        "node -e \"require('fs').writeFileSync('{}', 'ran')\"",
        marker.display()
    );
    let manifest = json!({
        "name": "scripted-server",
        "version": "1.0.0",
        "bin": {"scripted-server": "server.js"},
        "scripts": {"preinstall": leave, "install": leave, "postinstall": leave},
    });
    std::fs::write(package.join("package.json"), manifest.to_string()).unwrap();
    std::fs::write(package.join("server.js"), SERVER_JS).unwrap();
    let tarball = dir.join("scripted-server-1.0.0.tgz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(dir)
        .arg("package")
        .status()
        .unwrap();
    assert!(status.success());
    tarball
}

/// An MCP server in plain node: one function, `ping`.
const SERVER_JS: &str = r#"const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  const result = {
    initialize: { protocolVersion: (m.params || {}).protocolVersion, capabilities: { tools: {} },
                  serverInfo: { name: "scripted", version: "1.0.0" } },
    "tools/list": { tools: [{ name: "ping", description: "Answer pong.",
                              inputSchema: { type: "object", properties: {} } }] },
    "tools/call": { content: [{ type: "text", text: "pong" }] },
  }[m.method];
  if (result) send({ jsonrpc: "2.0", id: m.id, result });
  else send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "no such method" } });
});
"#;

#[test]
fn a_packages_install_scripts_never_run() {
    let Some(serve) = strict() else { return };
    let build = autotool_tests::host::scratch_dir("autotool-npm-scripted-").unwrap();
    let marker = build.path().join("install-script-ran");
    let tarball = scripted_package(build.path(), &marker);
    let f = Fixture::new(&[], &[&tarball]);
    let (success, out, err) = f.cli(&["add", "scripted", "npm:scripted-server@1.0.0", "--yes"]);
    assert!(success, "{out}{err}");
    assert!(!marker.exists(), "an install script ran");
    let mut server = f.serve(serve).start_initialized(&f.home).unwrap();
    let (answered, text) = answer(&mut server, "scripted__ping", json!({}));
    assert!(answered && text == "pong", "{text}");
    finish(server);
    // Control: a plain npm install of the same package runs them.
    let project = tempfile::tempdir().unwrap();
    f.plain_npm(project.path(), &["install", "scripted-server@1.0.0"]);
    assert!(marker.exists(), "control: plain npm ran the install script");
}

/// A package whose tarball reaches out of the directory it is unpacked in, both ways: a member
/// named with `..` up to `outside`, and a symlink to `outside` with a member written through it.
fn traversal_package(dir: &Path, outside: &Path) -> PathBuf {
    let tarball = dir.join("traversal-server-1.0.0.tgz");
    let up = "../".repeat(24);
    let script = r#"
import io, json, sys, tarfile
out, up, outside, server = sys.argv[1:5]
manifest = {"name": "traversal-server", "version": "1.0.0", "bin": {"traversal-server": "server.js"}}
with tarfile.open(out, "w:gz") as t:
    def add(name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    add("package/package.json", json.dumps(manifest).encode())
    add("package/server.js", open(server, "rb").read())
    add("package/" + up + outside.lstrip("/") + "/dotdot.txt", b"escaped by ..")
    link = tarfile.TarInfo("package/link")
    link.type = tarfile.SYMTYPE
    link.linkname = outside
    t.addfile(link)
    add("package/link/through-link.txt", b"escaped through a symlink")
"#;
    let server = dir.join("server.js");
    std::fs::write(&server, SERVER_JS).unwrap();
    let status = Command::new("python3")
        .args(["-c", script])
        .arg(&tarball)
        .arg(&up)
        .arg(outside)
        .arg(&server)
        .status()
        .unwrap();
    assert!(status.success());
    tarball
}

/// A tarball with a `..` member and a member written through a symlink installs with neither
/// file leaving the layer (control: Python's `tarfile`, unfiltered, writes both outside).
#[test]
fn a_tarball_that_climbs_out_writes_nothing_outside_its_layer() {
    let Some(serve) = strict() else { return };
    let build = autotool_tests::host::scratch_dir("autotool-npm-traversal-").unwrap();
    let outside = build.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let tarball = traversal_package(build.path(), &outside);
    let f = Fixture::new(&[], &[&tarball]);
    let (success, out, err) = f.cli(&["add", "climber", "npm:traversal-server@1.0.0", "--yes"]);
    let escaped: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        escaped.is_empty(),
        "written outside: {escaped:?}\n{out}{err}"
    );
    if success {
        // Installed without what climbed: it runs, from its layer.
        let mut server = f.serve(serve).start_initialized(&f.home).unwrap();
        let (answered, text) = answer(&mut server, "climber__ping", json!({}));
        assert!(answered && text == "pong", "{text}");
        finish(server);
    }
    // Control: an extractor that follows the names as written puts both files outside.
    let unpack = build.path().join("unpack/a/b");
    std::fs::create_dir_all(&unpack).unwrap();
    let status = Command::new("python3")
        .args([
            "-c",
            "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])",
        ])
        .arg(&tarball)
        .arg(&unpack)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        outside.join("dotdot.txt").is_file(),
        "control: `..` climbed out"
    );
    assert!(
        outside.join("through-link.txt").is_file(),
        "control: the symlink let a member out"
    );
}
