//! Tools that declare packages (`REQUIRED_PACKAGES`), end to end through `autotool serve`,
//! against a PEP 503 index this test serves on loopback over wheels it builds (never a public
//! index):
//! - a pure-Python package with a dependency and a compiled extension, resolved, asked about,
//!   installed into a layer and imported by the confined tool from `/packages`, which it cannot
//!   write; `tools show` lists each package with its version and hash;
//! - the same set is not asked again; a changed set is, and a no installs nothing;
//! - wheels only: an sdist-only package is refused and its build script never runs (the control
//!   runs uv without the rule and the script does run); a requirement naming a URL is a lint
//!   failure and the index is never asked;
//! - two tools with one set share one layer, downloaded once;
//! - a layer over the size limit is refused and nothing is left behind (the control: the same
//!   set under the default limit is installed);
//! - a host that cannot ask gets the command; `tools approve --packages` answers it; and
//!   `--dangerously-allow-all-tools` covers packages as it covers keys.

use super::{finish, never, no, ok, refused, strict, yes};
use autotool_tests::index::{Index, Wheel, sdist, sdist_marker};
use autotool_tests::locate;
use autotool_tests::serve::{CallResult, RpcError, Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::path::PathBuf;

const FASTCALC_C: &str = r#"
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(6 * 7); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, "42"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastcalc", NULL, -1, methods};
PyMODINIT_FUNC PyInit_fastcalc(void) { return PyModule_Create(&module); }
"#;

/// A tool using `feedish` (pure, needing `helperdep`) and `fastcalc` (compiled).
const TOOL: &str = r#"from mcp.server.mcpserver import MCPServer
import feedish, fastcalc

REQUIRED_PACKAGES = ["feedish==1.0", "fastcalc"]
mcp = MCPServer("pkgs")

@mcp.tool()
def use(word: str) -> str:
    """Both packages at work."""
    return f"{feedish.shout(word)} {fastcalc.answer()} from {feedish.__file__}"

@mcp.tool()
def write(path: str) -> str:
    """Try to write a file."""
    try:
        with open(path, "w") as f:
            f.write("x")
        return "wrote " + path
    except OSError as e:
        return "refused: " + str(e.strerror)

if __name__ == "__main__":
    mcp.run()
"#;

fn feedish(version: &str) -> Wheel {
    let code = "from helperdep import PREFIX\n\ndef shout(w):\n    return PREFIX + w.upper()\n";
    Wheel::pure(
        "feedish",
        version,
        &[("feedish/__init__.py", code.as_bytes())],
        &["helperdep>=2"],
    )
}

fn helperdep() -> Wheel {
    Wheel::pure(
        "helperdep",
        "2.0",
        &[("helperdep.py", b"PREFIX = 'feed:'\n")],
        &[],
    )
}

/// An index holding feedish 1.0, helperdep 2.0 and fastcalc 1.0 built for the runtime.
fn index() -> Index {
    let index = Index::start().unwrap();
    index.add_wheel("feedish", &feedish("1.0"));
    index.add_wheel("helperdep", &helperdep());
    let python = locate::runtime().unwrap().python;
    let fastcalc = Wheel::compiled("fastcalc", "1.0", "fastcalc", FASTCALC_C, &python)
        .unwrap_or_else(|e| panic!("building the compiled wheel: {e:#}"));
    index.add_wheel("fastcalc", &fastcalc);
    index
}

/// `serve` with the test's uv, a uv cache of its own under `home`, and, when given, `index` as
/// the only package index (uv's setting).
fn with_uv(serve: Serve, index: Option<&Index>, home: &ServeHome) -> Serve {
    let uv = locate::uv().unwrap_or_else(|e| panic!("{e:#}"));
    let serve = serve.env("AUTOTOOL_UV", &uv.to_string_lossy()).env(
        "UV_CACHE_DIR",
        &home.path().join("uv-cache").to_string_lossy(),
    );
    match index {
        Some(index) => serve.env("UV_DEFAULT_INDEX", &index.url()),
        None => serve,
    }
}

/// A strict server taking packages from `index` only.
fn serve(index: &Index, home: &ServeHome) -> Option<Serve> {
    Some(with_uv(strict()?, Some(index), home))
}

/// [`TOOL`] without its `write` function (for tools the probes exercise).
fn use_only() -> String {
    let start = TOOL.find("@mcp.tool()\ndef write").unwrap();
    let end = TOOL.find("if __name__").unwrap();
    let code = TOOL.replace(&TOOL[start..end], "");
    assert!(!code.contains("def write"), "{code}");
    code
}

/// Whether `done` holds within `secs` seconds, asked every 100 ms.
fn within(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    true
}

fn asking(serve: &Serve, home: &ServeHome) -> Server {
    let mut server = serve.start(home).unwrap();
    server.initialize_with(super::asking()).unwrap();
    server
}

fn create(
    server: &mut Server,
    name: &str,
    code: &str,
    answer: fn(&Value) -> Value,
) -> (Result<CallResult, RpcError>, Vec<String>) {
    let (outcome, asked) = server
        .call_answering(
            "create_tool",
            json!({"name": name, "code": code, "verify": "quick"}),
            answer,
        )
        .unwrap();
    let asked = asked
        .iter()
        .map(|q| q["message"].as_str().unwrap_or("").to_string())
        .collect();
    (outcome, asked)
}

/// The complete layers under the home.
fn layers(home: &ServeHome) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(home.path().join("layers")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("layer.json").is_file())
        .collect();
    found.sort();
    found
}

/// Every entry of the layers directory but the build locks.
fn layer_entries(home: &ServeHome) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(home.path().join("layers")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    names.sort();
    names
}

#[test]
fn a_pure_and_a_compiled_package_are_installed_asked_about_and_imported_confined() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = asking(&serve, &home);

    // The control: without the declaration the packages are not there.
    let undeclared = TOOL.replace("REQUIRED_PACKAGES = [\"feedish==1.0\", \"fastcalc\"]\n", "");
    let (outcome, asked) = create(&mut server, "nopkgs", &undeclared, never);
    let r = refused(&outcome);
    assert!(r.text.contains("No module named 'feedish'"), "{}", r.text);
    assert!(asked.is_empty());
    assert_eq!(index.downloads(), 0);

    let (outcome, asked) = create(&mut server, "pkgs", TOOL, yes);
    let created = ok(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = &asked[0];
    assert!(
        q.contains("Allow the tool `pkgs` to install fastcalc 1.0, feedish 1.0 and helperdep 2.0 from the index http://127.0.0.1:"),
        "{q}"
    );
    assert!(q.contains("wheels only"), "{q}");
    assert_eq!(
        created.structured.as_ref().unwrap()["packages"],
        json!("fastcalc 1.0, feedish 1.0, helperdep 2.0")
    );
    let said = server
        .call_text("pkgs__use", json!({"word": "hello"}))
        .unwrap();
    assert!(
        said.contains("feed:HELLO 42 from /packages/feedish/__init__.py"),
        "{said}"
    );
    // The layer is read-only in the sandbox; the tool's /tmp is not (the control).
    let wrote = server
        .call_text("pkgs__write", json!({"path": "/packages/x"}))
        .unwrap();
    assert!(
        wrote.starts_with("refused: Read-only file system"),
        "{wrote}"
    );
    let control = server
        .call_text("pkgs__write", json!({"path": "/tmp/x"}))
        .unwrap();
    assert_eq!(control, "wrote /tmp/x");

    let (status, out, err) = home.cli(&["tools", "show", "pkgs"]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains(&format!(
            "  feedish 1.0  sha256:{}",
            feedish("1.0").sha256()
        )),
        "{out}"
    );
    assert!(out.contains("  fastcalc 1.0  sha256:"), "{out}");
    assert!(
        out.contains("packages: 3 from the index http://127.0.0.1:"),
        "{out}"
    );
    assert_eq!(layers(&home).len(), 1, "{:?}", layer_entries(&home));
    finish(server);
}

/// Create `pkgs` (its packages approved) and check it imports one of them from its layer.
fn create_and_import(server: &mut Server) {
    let (outcome, _) = create(server, "pkgs", TOOL, yes);
    ok(&outcome);
    let said = server
        .call_text("pkgs__use", json!({"word": "fork"}))
        .unwrap();
    assert!(
        said.contains("feed:FORK 42 from /packages/feedish/__init__.py"),
        "{said}"
    );
}

#[test]
fn a_tool_with_packages_is_forked_from_the_template_with_its_layer() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    if super::fork::skip_without_template() {
        return;
    }
    // The template starts before any layer exists; the tool's layer is made afterwards and
    // still reaches the forked child.
    let mut server = asking(&serve, &home);
    let template = super::fork::template_of(&mut server);
    create_and_import(&mut server);
    let (templates, tools) = super::fork::launchers(&server);
    assert_eq!(templates, vec![template], "{}", server.context());
    assert!(
        tools.is_empty(),
        "the tool with packages was started through a launcher: {tools:?}{}",
        server.context()
    );
    finish(server);

    // Control: forking off, the same tool has a launcher of its own.
    let home = ServeHome::new().unwrap();
    let serve = with_uv(
        strict().unwrap().env("AUTOTOOL_FORK_TOOLS", "off"),
        Some(&index),
        &home,
    );
    let mut server = asking(&serve, &home);
    create_and_import(&mut server);
    assert_eq!(
        super::fork::launchers(&server).1.len(),
        1,
        "{}",
        server.context()
    );
    finish(server);
}

#[test]
fn a_changed_set_is_asked_about_again_and_a_no_installs_nothing() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = asking(&serve, &home);
    let (outcome, asked) = create(&mut server, "pkgs", TOOL, yes);
    ok(&outcome);
    assert_eq!(asked.len(), 1);
    // New code, the same set: not asked again.
    let (outcome, asked) = create(&mut server, "pkgs", &format!("{TOOL}\n# v2\n"), never);
    assert!(ok(&outcome).text.contains("Created pkgs v2"));
    assert!(asked.is_empty(), "{asked:?}");
    let before = layer_entries(&home);

    // Another set: asked again, saying what changed; a no installs nothing.
    index.add_wheel("feedish", &feedish("1.1"));
    let v3 = TOOL.replace("feedish==1.0", "feedish==1.1");
    let (outcome, asked) = create(&mut server, "pkgs", &v3, no);
    let r = refused(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("install fastcalc 1.0, feedish 1.1 and helperdep 2.0"),
        "{}",
        asked[0]
    );
    assert!(
        asked[0].contains("Asked again: its packages changed (approved before: fastcalc 1.0, feedish 1.0, helperdep 2.0)"),
        "{}",
        asked[0]
    );
    assert!(r.text.contains("nothing was installed"), "{}", r.text);
    assert!(
        r.text.contains("autotool tools approve pkgs --packages"),
        "{}",
        r.text
    );
    assert_eq!(layer_entries(&home), before);
    // v2 still answers.
    let said = server.call_text("pkgs__use", json!({"word": "x"})).unwrap();
    assert!(said.starts_with("feed:X 42"), "{said}");
    finish(server);
}

#[test]
fn packages_come_as_wheels_only_and_never_from_where_the_tool_says() {
    let index = index();
    let (file, bytes) = sdist("buildme", "1.0");
    let marker = sdist_marker("buildme", "1.0");
    index.add("buildme", &file, bytes);
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = asking(&serve, &home);
    let code = TOOL.replace("\"feedish==1.0\", \"fastcalc\"", "\"buildme\"");
    let (outcome, asked) = create(&mut server, "sdist", &code, never);
    let r = refused(&outcome);
    assert!(
        r.text.contains("verification failed at packages"),
        "{}",
        r.text
    );
    assert!(r.text.contains("wheels only"), "{}", r.text);
    assert!(asked.is_empty());
    assert!(!marker.exists(), "the sdist's build script ran");

    // A requirement naming where it comes from is refused before anything is asked.
    let pages = index.pages();
    let code = TOOL.replace(
        "\"feedish==1.0\", \"fastcalc\"",
        &format!("\"feedish @ {}/../files/x.whl\"", index.url()),
    );
    let (outcome, _) = create(&mut server, "url", &code, never);
    let r = refused(&outcome);
    assert!(r.text.contains("verification failed at lint"), "{}", r.text);
    assert!(r.text.contains("REQUIRED_PACKAGES"), "{}", r.text);
    assert_eq!(index.pages(), pages, "the index was asked");
    finish(server);

    // The control: uv without the rule builds the sdist, running its build script.
    let work = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(locate::uv().unwrap())
        .args(["pip", "install", "--no-config", "--quiet", "--target"])
        .arg(work.path().join("t"))
        .arg("--python")
        .arg(locate::runtime().unwrap().python)
        .args(["--index-url", &index.url(), "buildme"])
        .env("UV_CACHE_DIR", work.path().join("cache"))
        .env_remove("UV_DEFAULT_INDEX")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(marker.exists(), "the control did not run the build script");
    let _ = std::fs::remove_file(&marker);
}

#[test]
fn two_tools_with_one_set_share_one_layer() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = asking(&serve, &home);
    ok(&create(&mut server, "first", TOOL, yes).0);
    let downloads = index.downloads();
    assert!(downloads >= 3, "{downloads}");
    ok(&create(&mut server, "second", TOOL, yes).0);
    assert_eq!(layers(&home).len(), 1, "{:?}", layer_entries(&home));
    assert_eq!(
        index.downloads(),
        downloads,
        "the second tool downloaded again"
    );
    for tool in ["first", "second"] {
        let said = server
            .call_text(&format!("{tool}__use"), json!({"word": "a"}))
            .unwrap();
        assert!(said.starts_with("feed:A 42"), "{said}");
    }
    finish(server);
}

fn big() -> Wheel {
    // 3 MiB that do not compress.
    let mut data = Vec::with_capacity(3 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while data.len() < 3 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    Wheel::pure(
        "bigpkg",
        "1.0",
        &[("bigpkg/data.bin", &data), ("bigpkg/__init__.py", b"")],
        &[],
    )
}

#[test]
fn a_layer_over_the_size_limit_is_refused_and_leaves_nothing() {
    let index = index();
    index.add_wheel("bigpkg", &big());
    let code = TOOL.replace(
        "\"feedish==1.0\", \"fastcalc\"",
        "\"bigpkg\", \"feedish\", \"fastcalc\"",
    );
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let limited = serve.clone().env("AUTOTOOL_PACKAGES_LIMIT", "1m");
    let mut server = asking(&limited, &home);
    let (outcome, asked) = create(&mut server, "big", &code, yes);
    assert_eq!(asked.len(), 1);
    let r = refused(&outcome);
    assert!(
        r.text.contains("verification failed at packages"),
        "{}",
        r.text
    );
    assert!(r.text.contains("more than 1 MiB"), "{}", r.text);
    assert_eq!(layer_entries(&home), Vec::<String>::new());
    finish(server);

    // The control: under the default limit the same set is installed.
    let mut server = asking(&serve, &home);
    let (outcome, _) = create(&mut server, "big", &code, never);
    ok(&outcome);
    assert_eq!(layers(&home).len(), 1);
    finish(server);
}

#[test]
fn a_host_that_cannot_ask_gets_the_command_and_allow_all_covers_packages() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = serve.start(&home).unwrap();
    server.initialize().unwrap();
    let call = json!({"name": "pkgs", "code": TOOL, "verify": "quick"});
    let r = server.call_result("create_tool", call.clone()).unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("autotool tools approve pkgs --packages"),
        "{}",
        r.text
    );
    assert!(
        layer_entries(&home).is_empty(),
        "{:?}",
        layer_entries(&home)
    );
    let (status, out, err) = home
        .cli(&["tools", "approve", "pkgs", "--packages"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains("may install fastcalc 1.0, feedish 1.0 and helperdep 2.0"),
        "{out}"
    );
    let r = server.call_result("create_tool", call).unwrap();
    assert!(!r.is_error, "{}", r.text);
    finish(server);

    let other = ServeHome::new().unwrap();
    let mut server = serve
        .clone()
        .arg("--dangerously-allow-all-tools")
        .start(&other)
        .unwrap();
    server.initialize().unwrap();
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "pkgs", "code": TOOL, "verify": "quick"}),
        )
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    finish(server);
}

#[test]
fn a_tool_placed_by_hand_waits_for_its_packages_to_be_approved() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = serve.start(&home).unwrap();
    server.initialize().unwrap();
    let code = use_only();
    let dir = home.path().join("tools/byhand");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tool.py"), &code).unwrap();
    let mounted = |server: &mut Server| {
        server
            .tool_names()
            .unwrap()
            .iter()
            .any(|n| n == "byhand__use")
    };
    // Nobody to ask: it waits, nothing installed.
    let waits = "consent needed: the tool `byhand` asks to install";
    assert!(
        within(20, || server.stderr().contains(waits)),
        "{}",
        server.context()
    );
    assert!(!mounted(&mut server));
    assert!(
        layer_entries(&home).is_empty(),
        "{:?}",
        layer_entries(&home)
    );
    // The user's yes: the next round verifies and mounts it.
    let (status, out, err) = home
        .cli(&["tools", "approve", "byhand", "--packages"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(within(30, || mounted(&mut server)), "{}", server.context());
    let said = server
        .call_text("byhand__use", json!({"word": "ok"}))
        .unwrap();
    assert!(said.starts_with("feed:OK 42"), "{said}");
    finish(server);
}

#[test]
fn unconfined_the_layer_is_used_where_it_lies() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let off = Serve::new(autotool_tests::serve::Sandbox::Off).arg("--dangerously-allow-all-tools");
    let mut server = with_uv(off, Some(&index), &home)
        .start_initialized(&home)
        .unwrap();
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "pkgs", "code": TOOL, "verify": "quick"}),
        )
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    let layer = layers(&home).pop().expect("a layer");
    let said = server
        .call_text("pkgs__use", json!({"word": "hi"}))
        .unwrap();
    let expected = format!(
        "feed:HI 42 from {}/site/feedish/__init__.py",
        layer.display()
    );
    assert_eq!(said, expected);
    finish(server);
}

#[test]
fn a_company_index_named_in_pip_conf_is_used_and_its_password_never_shown() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = strict() else {
        return;
    };
    // The index as pip is told of it, with credentials in its URL (the test index ignores
    // them); uv has no index setting of its own.
    let with_password = index
        .url()
        .replacen("http://", "http://alice:hunter2pw@", 1);
    let conf = home.path().join("pip.conf");
    std::fs::write(&conf, format!("[global]\nindex-url = {with_password}\n")).unwrap();
    let serve = with_uv(serve, None, &home).env("PIP_CONFIG_FILE", &conf.to_string_lossy());
    let mut server = asking(&serve, &home);
    let (outcome, asked) = create(&mut server, "pkgs", TOOL, yes);
    let created = ok(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(&format!("from the index {}?", index.url())),
        "{}",
        asked[0]
    );
    assert!(index.downloads() >= 3, "the index in pip.conf was not used");
    let (_, shown, _) = home.cli(&["tools", "show", "pkgs", "--json"]).unwrap();
    for text in [&asked[0], &created.text, &shown] {
        assert!(!text.contains("hunter2pw"), "{text}");
    }
    finish(server);
}

#[test]
fn each_resolution_failure_says_what_to_change_with_the_resolvers_words() {
    let index = index();
    // A wheel for another platform only.
    let win = Wheel::pure("winonly", "1.0", &[("winonly.py", b"X = 1\n")], &[]);
    index.add(
        "winonly",
        "winonly-1.0-cp311-cp311-win_amd64.whl",
        win.bytes,
    );
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = asking(&serve, &home);
    for (declared, says) in [
        ("\"nosuchpkg\"", "check the package's name and version"),
        ("\"winonly\"", "wheels only"),
        (
            "\"feedish==1.0\", \"helperdep<2\"",
            "the requirements conflict with each other or with the runtime's own packages",
        ),
        ("\"mcp==1.0\"", "the requirements conflict"),
    ] {
        let code = TOOL.replace("\"feedish==1.0\", \"fastcalc\"", declared);
        let (outcome, asked) = create(&mut server, "failing", &code, never);
        let r = refused(&outcome);
        assert!(
            r.text.contains("verification failed at packages"),
            "{declared}: {}",
            r.text
        );
        assert!(r.text.contains(says), "{declared}: {}", r.text);
        assert!(
            r.text.contains("The resolver said:"),
            "{declared}: {}",
            r.text
        );
        assert!(asked.is_empty(), "{declared}: {asked:?}");
    }
    assert!(
        layer_entries(&home).is_empty(),
        "{:?}",
        layer_entries(&home)
    );
    finish(server);
}

#[test]
fn a_changed_file_with_a_new_set_waits_for_its_approval_then_is_verified() {
    let index = index();
    let home = ServeHome::new().unwrap();
    let Some(serve) = serve(&index, &home) else {
        return;
    };
    let mut server = asking(&serve, &home);
    let code = use_only();
    ok(&create(&mut server, "pkgs", &code, yes).0);
    // The file of the mounted version, changed on disk to another set.
    index.add_wheel("feedish", &feedish("1.1"));
    let file = home.path().join("tools/pkgs/1/tool.py");
    std::fs::write(&file, code.replace("feedish==1.0", "feedish==1.1")).unwrap();
    let waits = "consent needed: the tool `pkgs` asks to install";
    assert!(
        within(30, || server.stderr().contains(waits)),
        "{}",
        server.context()
    );
    let (status, out, err) = home
        .cli(&["tools", "approve", "pkgs", "--packages"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("feedish 1.1"), "{out}");
    let mut shown = String::new();
    let verified = within(30, || {
        shown = home.cli(&["tools", "show", "pkgs"]).unwrap().1;
        shown.contains("current version: 2")
    });
    assert!(verified, "{shown}\n{}", server.context());
    assert!(shown.contains("  feedish 1.1  sha256:"), "{shown}");
    finish(server);
}
