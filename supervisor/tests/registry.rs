//! The registry and ledger against real temp homes: stage → commit, versions, removal, the
//! generation counter, calls, concurrent commits from threads and from processes, `kill -9`
//! in the middle of commits, leftovers cleaned at open, hand-placed tools, and
//! `autotool tools` reading the same home from another process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::home::Home;
use autotool::ledger::{CallKind, CallRecord, Event, State};
use autotool::registry::{
    DEFAULT_CODE_LIMIT as MAX_CODE_BYTES, FunctionSpec, Manifest, Registry, RegistryError,
};
use autotool_policy::names::{KeyName, ToolName};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};

const CHILD_HOME: &str = "AUTOTOOL_TEST_CHILD_HOME";
const CHILD_COUNT: &str = "AUTOTOOL_TEST_CHILD_COUNT";
const CHILD_TAG: &str = "AUTOTOOL_TEST_CHILD_TAG";

fn tn(name: &str) -> ToolName {
    ToolName::parse(name).unwrap()
}

fn temp_home() -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::at(dir.path().join("home"));
    (dir, home)
}

fn function(name: &str) -> FunctionSpec {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"]
    });
    FunctionSpec {
        name: name.to_string(),
        title: None,
        description: Some(format!("{name} does a thing")),
        input_schema: schema.as_object().unwrap().clone(),
        output_schema: None,
        annotations: None,
    }
}

fn manifest(fns: &[&str], keys: &[&str]) -> Manifest {
    Manifest {
        description: "a test tool".to_string(),
        required_env: keys.iter().map(|k| KeyName::parse(k).unwrap()).collect(),
        functions: fns.iter().map(|f| function(f)).collect(),
        packages: None,
        uses: Vec::new(),
        reach: Default::default(),
    }
}

fn code(tag: &str) -> String {
    format!("from mcp.server.mcpserver import MCPServer\n# {tag}\nmcp = MCPServer('t')\n")
}

fn create(reg: &Registry, name: &str, tag: &str) -> autotool::registry::Version {
    let staged = reg.stage(&tn(name), &code(tag)).unwrap();
    reg.commit(staged, manifest(&["run"], &["DEMO_API_KEY"]))
        .unwrap()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn entries(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn age(path: &Path, by: Duration) {
    File::open(path)
        .unwrap()
        .set_modified(SystemTime::now() - by)
        .unwrap();
}

/// Every row has its directory (code matching its hash, a manifest) and every version
/// directory has its row.
fn assert_consistent(reg: &Registry, name: &str) -> Vec<u32> {
    let versions = reg.versions(name).unwrap();
    for v in &versions {
        let code = fs::read(reg.file_of(v)).unwrap_or_else(|e| panic!("{:?}: {e}", reg.dir_of(v)));
        assert_eq!(
            autotool::registry::code_hash(&code),
            v.code_hash,
            "{:?}",
            reg.dir_of(v)
        );
        let m: serde_json::Value =
            serde_json::from_slice(&fs::read(reg.dir_of(v).join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(m["version"], v.version);
        assert_eq!(m["code_hash"], v.code_hash.as_str());
    }
    let nums: Vec<u32> = versions.iter().map(|v| v.version).collect();
    let on_disk: BTreeSet<u32> = entries(&reg.home().tools_dir().join(name))
        .iter()
        .filter_map(|e| e.parse().ok())
        .collect();
    assert_eq!(on_disk, nums.iter().copied().collect::<BTreeSet<_>>());
    nums
}

#[test]
fn stage_commit_get_and_current_sorted() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    assert_eq!(mode(home.root()), 0o700);
    assert_eq!(mode(&home.tools_dir()), 0o755);
    for d in [home.runtime_dir(), home.log_dir()] {
        assert!(d.is_dir(), "{d:?}");
    }
    assert!(home.db_path().is_file());

    for name in ["zeta", "alpha", "mid_tool"] {
        let staged = reg.stage(&tn(name), &code(name)).unwrap();
        assert!(staged.dir().starts_with(home.tools_dir().join(name)));
        assert_eq!(fs::read_to_string(staged.tool_file()).unwrap(), code(name));
        let tv = reg
            .commit(staged, manifest(&["forecast", "now"], &["WEATHER_KEY"]))
            .unwrap();
        assert_eq!(tv.version, 1);
        assert_eq!(reg.dir_of(&tv), home.tools_dir().join(name).join("1"));
    }
    let names: Vec<String> = reg
        .current()
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["alpha", "mid_tool", "zeta"]);

    let alpha = reg.get("alpha").unwrap().unwrap();
    assert_eq!(alpha.required_env, ["WEATHER_KEY"]);
    assert_eq!(alpha.state, State::Probation);
    assert_eq!(alpha.functions.names()[0], "forecast");
    assert_eq!(
        alpha.code_hash,
        autotool::registry::code_hash(code("alpha").as_bytes())
    );
    assert_eq!(
        fs::read_to_string(reg.file_of(&alpha)).unwrap(),
        code("alpha")
    );
    // Readable by the confined tool's uid: directories 0755, files 0644.
    assert_eq!(mode(&reg.dir_of(&alpha)), 0o755);
    assert_eq!(mode(&home.tools_dir().join("alpha")), 0o755);
    assert_eq!(mode(&reg.file_of(&alpha)), 0o644);
    assert_eq!(mode(&reg.dir_of(&alpha).join("manifest.json")), 0o644);

    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(reg.dir_of(&alpha).join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["name"], "alpha");
    assert_eq!(m["version"], 1);
    assert_eq!(m["description"], "a test tool");
    assert_eq!(m["required_env"], serde_json::json!(["WEATHER_KEY"]));
    assert_eq!(m["code_hash"], alpha.code_hash.as_str());
    assert_eq!(m["functions"][1]["name"], "now");
    assert_eq!(m["functions"][0]["input_schema"]["required"][0], "city");
    assert!(m["created_at"].as_str().unwrap().ends_with('Z'));

    // Nothing but the version directory is left in the tool's directory.
    assert_eq!(
        entries(&home.tools_dir().join("alpha")),
        ["1".to_string()].into()
    );
    assert!(reg.get("nope").unwrap().is_none());

    let events = reg.events(Some("alpha"), 10).unwrap();
    assert_eq!(events[0].kind, Event::Created);

    // Another connection sees the same.
    let again = Registry::open(&home).unwrap();
    assert_eq!(again.current().unwrap().len(), 3);
}

#[test]
fn versions_increase() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    for i in 1..=3 {
        let tv = create(&reg, "weather", &format!("v{i}"));
        assert_eq!(tv.version, i);
    }
    let cur = reg.get("weather").unwrap().unwrap();
    assert_eq!(cur.version, 3);
    assert_eq!(fs::read_to_string(reg.file_of(&cur)).unwrap(), code("v3"));
    assert_eq!(assert_consistent(&reg, "weather"), [1, 2, 3]);
    assert_eq!(
        fs::read_to_string(reg.file_of(&reg.get_version("weather", 1).unwrap().unwrap())).unwrap(),
        code("v1")
    );
    assert_eq!(reg.current().unwrap().len(), 1);
}

#[test]
fn invalid_names_and_oversized_code_refused() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    // Names are typed (`ToolName`, tested in the policy crate): what reaches the registry
    // has passed the rule, and the longest valid name works.
    reg.stage(&tn(&"a".repeat(40)), "x = 1\n").unwrap();

    let big = "#".repeat(MAX_CODE_BYTES + 1);
    match reg.stage(&tn("big"), &big) {
        Err(e @ RegistryError::CodeTooLarge { .. }) => {
            assert!(
                e.to_string()
                    .contains(&format!("at most {MAX_CODE_BYTES} bytes")),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    let at_limit = reg.stage(&tn("big"), &"#".repeat(MAX_CODE_BYTES)).unwrap();
    reg.discard(at_limit).unwrap();
    // The `max_code_bytes` setting is the limit, lowered or raised: one rule, in one place.
    let raised = Registry::open(&home).unwrap().with_code_limit(512 << 10);
    let staged = raised.stage(&tn("big"), &big).unwrap();
    raised.discard(staged).unwrap();
    let lowered = Registry::open(&home).unwrap().with_code_limit(4 << 10);
    assert!(matches!(
        lowered.stage(&tn("big"), &"#".repeat(5 << 10)),
        Err(RegistryError::CodeTooLarge { limit: 4096, .. })
    ));
    assert!(entries(&home.tools_dir().join("big")).is_empty());

    // A dropped, uncommitted stage leaves nothing behind.
    drop(reg.stage(&tn("dropped"), "x = 1\n").unwrap());
    assert!(entries(&home.tools_dir().join("dropped")).is_empty());

    // A manifest naming a function no host could call is refused before anything is
    // committed.
    let staged = reg.stage(&tn("functions"), "x = 1\n").unwrap();
    let err = reg
        .commit(staged, manifest(&["bad.name"], &[]))
        .unwrap_err();
    assert!(matches!(err, RegistryError::Name(_)), "{err}");
    assert!(reg.versions("functions").unwrap().is_empty());

    // A file that is not text.
    let bin = home.root().join("bin.py");
    fs::write(&bin, [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        reg.stage_from_file(&tn("binary"), &bin),
        Err(RegistryError::NotText(_))
    ));
}

#[test]
fn code_changed_after_staging_is_refused() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    let staged = reg.stage(&tn("sneaky"), &code("a")).unwrap();
    fs::write(staged.tool_file(), code("b")).unwrap();
    let err = reg.commit(staged, manifest(&["f"], &[])).unwrap_err();
    assert!(matches!(err, RegistryError::CodeChanged { .. }), "{err}");
    assert!(reg.get("sneaky").unwrap().is_none());
    assert!(entries(&home.tools_dir().join("sneaky")).is_empty());
}

#[test]
fn remove_keeps_history() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    create(&reg, "weather", "v2");
    create(&reg, "other", "o1");
    reg.record_call(&call("weather", 2, CallKind::Ok, None))
        .unwrap();

    assert!(reg.remove("weather").unwrap());
    assert!(reg.get("weather").unwrap().is_none());
    let names: Vec<String> = reg
        .current()
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["other"]);
    assert_eq!(assert_consistent(&reg, "weather"), [1, 2]);
    assert!(reg.tool("weather").unwrap().unwrap().removed_at.is_some());
    assert_eq!(reg.stats("weather").unwrap().calls, 1);
    assert_eq!(
        reg.events(Some("weather"), 1).unwrap()[0].kind,
        Event::Removed
    );

    assert!(!reg.remove("weather").unwrap(), "already removed");
    assert!(matches!(
        reg.remove("never_was"),
        Err(RegistryError::NotFound(_))
    ));

    // The same name again continues the numbering and is live again.
    let tv = create(&reg, "weather", "v3");
    assert_eq!(tv.version, 3);
    assert_eq!(reg.get("weather").unwrap().unwrap().version, 3);
    assert!(reg.tool("weather").unwrap().unwrap().removed_at.is_none());
}

#[test]
fn generation_bumps_on_every_change_to_tools() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    let watcher = Registry::open(&home).unwrap();
    let g0 = reg.generation().unwrap();
    create(&reg, "a", "1");
    assert_eq!(watcher.generation().unwrap(), g0 + 1);
    create(&reg, "a", "2");
    assert_eq!(watcher.generation().unwrap(), g0 + 2);
    reg.remove("a").unwrap();
    assert_eq!(watcher.generation().unwrap(), g0 + 3);
    assert!(
        reg.ledger()
            .set_state("a", 2, State::Quarantined, "test")
            .unwrap()
    );
    assert_eq!(watcher.generation().unwrap(), g0 + 4);
    assert_eq!(
        reg.get_version("a", 2).unwrap().unwrap().state,
        State::Quarantined
    );

    // Calls, events, staging and failed commits are not changes to the tool list.
    reg.record_call(&call("a", 2, CallKind::Ok, None)).unwrap();
    reg.event(Some("a"), Event::Verified, "ok").unwrap();
    reg.discard(reg.stage(&tn("b"), "x = 1\n").unwrap())
        .unwrap();
    assert!(reg.remove("nothing").is_err());
    assert_eq!(watcher.generation().unwrap(), g0 + 4);
}

fn call(tool: &str, version: u32, outcome: CallKind, error: Option<&str>) -> CallRecord {
    CallRecord {
        tool: tool.to_string(),
        version,
        function: "run".to_string(),
        started_at: SystemTime::now(),
        duration: Duration::from_millis(12),
        outcome,
        error: error.map(str::to_string),
    }
}

#[test]
fn record_call_and_stats() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    assert_eq!(reg.stats("weather").unwrap().calls, 0);
    assert_eq!(reg.stats("weather").unwrap().last_error, None);

    reg.record_call(&call("weather", 1, CallKind::Ok, None))
        .unwrap();
    reg.record_call(&call(
        "weather",
        1,
        CallKind::ToolError,
        Some("no such city"),
    ))
    .unwrap();
    reg.record_call(&call(
        "weather",
        1,
        CallKind::Failure,
        Some("Traceback (most recent call last): ..."),
    ))
    .unwrap();
    reg.record_call(&call("weather", 1, CallKind::Ok, None))
        .unwrap();
    reg.record_call(&call("other", 1, CallKind::Failure, Some("elsewhere")))
        .unwrap();

    let s = reg.stats("weather").unwrap();
    assert_eq!(s.calls, 4);
    assert_eq!(s.failures, 2);
    assert_eq!(
        s.last_error.as_deref(),
        Some("Traceback (most recent call last): ...")
    );
    assert!(s.last_call_at.is_some());

    let recent = reg.recent_calls("weather", 2).unwrap();
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0].outcome, CallKind::Ok);
    assert_eq!(recent[1].outcome, CallKind::Failure);
    assert_eq!(recent[1].duration_ms, 12);

    // Huge error text is cut before it is stored.
    let huge = "x".repeat(100_000);
    reg.record_call(&call("weather", 1, CallKind::Failure, Some(&huge)))
        .unwrap();
    let last = reg.stats("weather").unwrap().last_error.unwrap();
    assert!(last.len() < 5000 && last.ends_with("more bytes not kept]"));
}

#[test]
fn eight_threads_commit_the_same_name() {
    let (_t, home) = temp_home();
    Registry::open(&home).unwrap();
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let home = home.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                // Each thread its own connection, as separate processes would have.
                let reg = Registry::open(&home).unwrap();
                let staged = reg
                    .stage(&tn("shared"), &code(&format!("thread {i}")))
                    .unwrap();
                barrier.wait();
                let tv = reg.commit(staged, manifest(&["run"], &[])).unwrap();
                (i, tv.version)
            })
        })
        .collect();
    let results: Vec<(usize, u32)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let versions: BTreeSet<u32> = results.iter().map(|r| r.1).collect();
    assert_eq!(versions, (1..=8).collect());

    let reg = Registry::open(&home).unwrap();
    assert_eq!(
        assert_consistent(&reg, "shared"),
        (1..=8).collect::<Vec<_>>()
    );
    for (i, v) in results {
        let tv = reg.get_version("shared", v).unwrap().unwrap();
        assert_eq!(
            fs::read_to_string(reg.file_of(&tv)).unwrap(),
            code(&format!("thread {i}"))
        );
    }
    assert_eq!(reg.get("shared").unwrap().unwrap().version, 8);
    assert_eq!(reg.generation().unwrap(), 8);
}

/// Helper run in a child process (the test binary itself): commits versions of `crashy` into
/// `$AUTOTOOL_TEST_CHILD_HOME`, `$AUTOTOOL_TEST_CHILD_COUNT` of them (0: until killed, at most
/// 20 s). Does nothing in a normal test run.
#[test]
fn child_commit_loop() {
    let Some(home) = std::env::var_os(CHILD_HOME) else {
        return;
    };
    let count: u32 = std::env::var(CHILD_COUNT).unwrap().parse().unwrap();
    let tag = std::env::var(CHILD_TAG).unwrap_or_default();
    let reg = Registry::open(&Home::at(PathBuf::from(home))).unwrap();
    let start = Instant::now();
    let mut i = 0;
    while (count == 0 || i < count) && start.elapsed() < Duration::from_secs(20) {
        let staged = reg
            .stage(&tn("crashy"), &code(&format!("{tag} {i}")))
            .unwrap();
        reg.commit(staged, manifest(&["run"], &[])).unwrap();
        i += 1;
    }
}

fn spawn_child(home: &Home, count: u32, tag: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_commit_loop",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_HOME, home.root())
        .env(CHILD_COUNT, count.to_string())
        .env(CHILD_TAG, tag)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn two_processes_commit_the_same_name() {
    let (_t, home) = temp_home();
    Registry::open(&home).unwrap();
    let children: Vec<_> = ["p1", "p2"]
        .into_iter()
        .map(|tag| spawn_child(&home, 10, tag))
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let reg = Registry::open(&home).unwrap();
    assert_eq!(
        assert_consistent(&reg, "crashy"),
        (1..=20).collect::<Vec<_>>()
    );
    let codes: BTreeSet<String> = reg
        .versions("crashy")
        .unwrap()
        .iter()
        .map(|v| fs::read_to_string(reg.file_of(v)).unwrap())
        .collect();
    assert_eq!(codes.len(), 20, "no commit lost or duplicated");
}

#[test]
fn kill_9_during_commits_leaves_a_consistent_registry() {
    let (_t, home) = temp_home();
    Registry::open(&home).unwrap();
    let mut last = 0;
    for round in 0..10u64 {
        let mut child = spawn_child(&home, 0, &format!("round {round}"));
        // Let it get going (opening the registry takes a moment), then kill it somewhere in
        // the middle of a commit, at a different point each round.
        let reg = Registry::open(&home).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while reg.versions("crashy").unwrap().len() <= last && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(3 + round * 7));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let reg = Registry::open(&home).unwrap();
        let versions = assert_consistent(&reg, "crashy");
        assert_eq!(versions, (1..=versions.len() as u32).collect::<Vec<_>>());
        assert!(versions.len() > last, "round {round} committed nothing");
        last = versions.len();
        assert_eq!(reg.get("crashy").unwrap().unwrap().version, last as u32);
        assert_eq!(reg.generation().unwrap(), last as u64);
    }
    // A staging directory the killed child left is unlocked; once stale it is swept.
    let tool_dir = home.tools_dir().join("crashy");
    for e in entries(&tool_dir) {
        if e.starts_with(".staging-") {
            age(&tool_dir.join(&e), Duration::from_secs(120));
        }
    }
    Registry::open(&home).unwrap();
    assert!(
        !entries(&tool_dir)
            .iter()
            .any(|e| e.starts_with(".staging-")),
        "{:?}",
        entries(&tool_dir)
    );
}

#[test]
fn crash_leftovers_are_cleaned_at_open() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    create(&reg, "weather", "v1");
    let dir = home.tools_dir().join("weather");

    // A crash before the rename: a staging directory, old and unlocked.
    let stale = dir.join(".staging-deadbeef");
    fs::create_dir(&stale).unwrap();
    fs::write(stale.join("tool.py"), "x = 1\n").unwrap();
    age(&stale, Duration::from_secs(120));
    // A staging directory just made (the window before its creator locks it): kept.
    let young = dir.join(".staging-young");
    fs::create_dir(&young).unwrap();
    // An old staging directory a live process still holds (a long verification): kept.
    let live = reg.stage(&tn("weather"), &code("verifying")).unwrap();
    age(live.dir(), Duration::from_secs(600));
    // A crash after the rename, before the commit: a version directory with no row.
    let orphan = dir.join("2");
    fs::create_dir(&orphan).unwrap();
    fs::write(orphan.join("tool.py"), "half done\n").unwrap();

    let reg2 = Registry::open(&home).unwrap();
    let after = entries(&dir);
    assert!(!after.contains(".staging-deadbeef"), "{after:?}");
    assert!(after.contains(".staging-young"), "{after:?}");
    assert!(live.dir().is_dir());
    assert!(!after.contains("2"), "{after:?}");
    let moved: Vec<&String> = after
        .iter()
        .filter(|e| e.starts_with(".orphan-2-"))
        .collect();
    assert_eq!(moved.len(), 1, "{after:?}");
    assert_eq!(
        fs::read_to_string(dir.join(moved[0]).join("tool.py")).unwrap(),
        "half done\n",
        "moved aside, not deleted"
    );
    assert!(
        reg2.events(None, 5)
            .unwrap()
            .iter()
            .any(|e| e.kind == Event::Recovered)
    );

    // The live stage still commits, as version 2.
    let tv = reg2.commit(live, manifest(&["run"], &[])).unwrap();
    assert_eq!(tv.version, 2);

    // An orphan appearing while the registry is open is moved aside by the next commit.
    fs::create_dir(dir.join("3")).unwrap();
    fs::write(dir.join("3").join("tool.py"), "another crash\n").unwrap();
    assert_eq!(create(&reg, "weather", "v3").version, 3);
    assert_eq!(
        fs::read_to_string(dir.join("3").join("tool.py")).unwrap(),
        code("v3")
    );
    assert_eq!(assert_consistent(&reg, "weather"), [1, 2, 3]);
}

#[test]
fn hand_placed_files_are_listed_until_committed() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    assert!(reg.hand_placed().unwrap().is_empty());

    for name in ["zebra", "apple"] {
        fs::create_dir_all(home.tools_dir().join(name)).unwrap();
        fs::write(home.tools_dir().join(name).join("tool.py"), code(name)).unwrap();
    }
    // Not listed: invalid names (one shaped like a mounted name, which would mount as a
    // function of `foo`), a file not named tool.py, a symlink.
    for bad in ["Bad-Name", "foo__bar", "trailing_"] {
        fs::create_dir_all(home.tools_dir().join(bad)).unwrap();
        fs::write(home.tools_dir().join(bad).join("tool.py"), "x\n").unwrap();
    }
    fs::write(home.tools_dir().join("apple").join("other.py"), "x\n").unwrap();
    fs::create_dir_all(home.tools_dir().join("linked")).unwrap();
    std::os::unix::fs::symlink(
        "/etc/passwd",
        home.tools_dir().join("linked").join("tool.py"),
    )
    .unwrap();

    let found = reg.hand_placed().unwrap();
    assert_eq!(
        found,
        [
            (tn("apple"), home.tools_dir().join("apple/tool.py")),
            (tn("zebra"), home.tools_dir().join("zebra/tool.py")),
        ]
    );

    // Verified like any other tool: staged from the file (a copy), committed.
    let staged = reg.stage_from_file(&tn("apple"), &found[0].1).unwrap();
    assert_eq!(
        fs::read_to_string(staged.tool_file()).unwrap(),
        code("apple")
    );
    reg.commit(staged, manifest(&["run"], &[])).unwrap();
    assert!(found[0].1.is_file(), "the user's file stays");
    let names: Vec<String> = reg
        .hand_placed()
        .unwrap()
        .into_iter()
        .map(|h| h.0.to_string())
        .collect();
    assert_eq!(names, ["zebra"]);

    // Editing the file makes it new code: listed again.
    fs::write(&found[0].1, code("apple edited")).unwrap();
    let names: Vec<String> = reg
        .hand_placed()
        .unwrap()
        .into_iter()
        .map(|h| h.0.to_string())
        .collect();
    assert_eq!(names, ["apple", "zebra"]);
}

fn autotool(home: &Home, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(args)
        .env("AUTOTOOL_HOME", home.root())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn cli_in_another_process_reads_and_removes() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();

    let out = autotool(&home, &["tools", "list"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("No tools yet"));

    create(&reg, "weather", "v1");
    create(&reg, "weather", "v2");
    create(&reg, "alpha", "a1");
    reg.record_call(&call("weather", 2, CallKind::Ok, None))
        .unwrap();
    reg.record_call(&call(
        "weather",
        2,
        CallKind::ToolError,
        Some("no such city"),
    ))
    .unwrap();

    let out = autotool(&home, &["tools", "list", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["name"], "alpha");
    let w = &list[1];
    assert_eq!(w["name"], "weather");
    assert_eq!(w["version"], 2);
    assert_eq!(w["versions"], serde_json::json!([1, 2]));
    assert_eq!(w["functions"], serde_json::json!(["run"]));
    assert_eq!(w["keys"], serde_json::json!(["DEMO_API_KEY"]));
    assert_eq!(w["calls"], 2);
    assert_eq!(w["failures"], 1);
    assert_eq!(w["last_error"], "no such city");

    let out = autotool(&home, &["tools", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("weather  v2 (2 versions, probation)"),
        "{text}"
    );
    assert!(text.contains("last error: no such city"), "{text}");

    let out = autotool(&home, &["tools", "show", "weather", "--json"]);
    assert!(out.status.success());
    let show: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(show["current"]["version"], 2);
    assert_eq!(show["versions"].as_array().unwrap().len(), 2);
    assert_eq!(show["recent_calls"].as_array().unwrap().len(), 2);
    assert_eq!(show["recent_events"][0]["kind"], "created");
    let out = autotool(&home, &["tools", "show", "weather"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("current version: 2"), "{text}");
    assert!(text.contains("recent calls:"), "{text}");

    // A removal in another process is seen here through the generation.
    let g = reg.generation().unwrap();
    let out = autotool(&home, &["tools", "remove", "weather"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Removed weather"));
    assert_eq!(reg.generation().unwrap(), g + 1);
    assert!(reg.get("weather").unwrap().is_none());
    assert_eq!(reg.versions("weather").unwrap().len(), 2);

    let out = autotool(&home, &["tools", "show", "weather"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed"));

    for args in [
        &["tools", "remove", "nothing"][..],
        &["tools", "show", "nothing"][..],
    ] {
        let out = autotool(&home, args);
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no tool named \"nothing\""), "{err}");
    }
}

#[test]
fn home_comes_from_the_environment() {
    let h = Home::from_vars(Some("/x/y".into()), Some("/home/u".into())).unwrap();
    assert_eq!(h.root(), Path::new("/x/y"));
    let h = Home::from_vars(None, Some("/home/u".into())).unwrap();
    assert_eq!(h.root(), Path::new("/home/u/.autotool"));
    assert_eq!(h.db_path(), Path::new("/home/u/.autotool/autotool.db"));
    let h = Home::from_vars(Some("".into()), Some("/home/u".into())).unwrap();
    assert_eq!(h.root(), Path::new("/home/u/.autotool"));
    assert!(Home::from_vars(None, None).is_err());
    let rel = Home::from_vars(Some("rel".into()), None).unwrap();
    assert!(rel.root().is_absolute());
}

#[test]
fn handles_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Registry>();
    send_sync::<autotool::registry::Staged>();
}

#[test]
fn key_names_are_upper_case_in_a_manifest_as_everywhere_else() {
    // One rule for a key name (`KeyName`): a manifest naming a lower- or mixed-case key does
    // not read, as `REQUIRED_ENV` and the key store refuse such a name.
    let manifest =
        |key: &str| serde_json::json!({"description": "d", "required_env": [key], "functions": []});
    let read: Manifest = serde_json::from_value(manifest("WEATHER_KEY")).unwrap();
    assert_eq!(read.required_env, [KeyName::parse("WEATHER_KEY").unwrap()]);
    for bad in ["weather_key", "Weather_Key", "1KEY", "WEATHER-KEY"] {
        assert!(
            serde_json::from_value::<Manifest>(manifest(bad)).is_err(),
            "{bad}"
        );
        assert!(
            autotool::verify::required_env(&format!("REQUIRED_ENV = [{bad:?}]\n")).is_err(),
            "{bad}"
        );
        assert!(KeyName::parse(bad).is_err(), "{bad}");
    }
}

/// A package set whose layer is `layer`.
fn package_set(layer: &str) -> autotool::packages::PackageSet {
    let lock = autotool_policy::packages::Lock::parse(&format!(
        "feedish==1.0 --hash=sha256:{}\n",
        "ab".repeat(32)
    ))
    .unwrap();
    autotool::packages::PackageSet {
        declared: vec!["feedish".into()],
        layer_lock: lock.clone(),
        lock,
        digest: "cd".repeat(32),
        layer: Some(layer.to_string()),
        source: "PyPI".into(),
    }
}

#[test]
fn a_versions_packages_are_kept_and_its_layer_is_in_use_while_the_tool_lives() {
    let (_t, home) = temp_home();
    let reg = Registry::open(&home).unwrap();
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    for (name, layer) in [("one", &a), ("two", &b)] {
        let staged = reg.stage(&tn(name), &code(name)).unwrap();
        let mut m = manifest(&["forecast"], &[]);
        m.packages = Some(package_set(layer));
        reg.commit(staged, m).unwrap();
    }
    let one = reg.get("one").unwrap().unwrap();
    assert_eq!(one.packages.as_deref(), Some(&package_set(&a)));
    let manifest_json = fs::read_to_string(reg.dir_of(&one).join("manifest.json")).unwrap();
    assert!(
        manifest_json.contains(&format!("\"layer\": \"{a}\"")),
        "{manifest_json}"
    );
    let in_use = reg.ledger().layers_in_use().unwrap();
    assert_eq!(in_use, BTreeSet::from([a.clone(), b.clone()]));
    // Removing a tool frees its layer (an older version of a live tool would keep it).
    assert!(reg.remove("two").unwrap());
    assert_eq!(reg.ledger().layers_in_use().unwrap(), BTreeSet::from([a]));
}
