//! Tools forked from a template: nothing one does reaches its template or a sibling forked from
//! the same template. Each attack runs from a forked tool against the template and a sibling
//! (blocked), and as a control between two unconfined tools (it works).

use super::{assert_blocked, assert_escaped, attack_on, builder, start};
use autotool_tests::host;
use autotool_tests::template;
use autotool_tests::{Mode, ToolProcess};
use serde_json::json;
use std::os::unix::net::UnixStream;

/// Whether to skip: nothing can be confined, or no template can be made here (it says why).
fn skip() -> bool {
    if super::skip() {
        return true;
    }
    let Some(why) = template::available_or_why() else {
        return false;
    };
    let name = std::thread::current()
        .name()
        .unwrap_or("template test")
        .to_string();
    autotool_tests::print_skip(&name, why);
    true
}

/// A confined attack tool forked from the shared template.
fn forked() -> ToolProcess {
    builder()
        .forked()
        .and_then(|b| b.start(Mode::Confined))
        .unwrap_or_else(|e| panic!("forking the attack tool: {e:#}"))
}

/// The host pid of the Python process running the tool (the deepest of the started
/// process's descendants), or of the control itself.
fn tool_pid(tool: &ToolProcess) -> u32 {
    host::descendants(tool.pid())
        .into_iter()
        .filter(|&p| host::cmdline(p).contains("python"))
        .max()
        .unwrap_or(tool.pid())
}

/// The host pid of the shared template's Python process.
fn template_pid() -> u32 {
    let t = template::shared().expect("starting the template");
    host::descendants(t.launcher_pid)
        .into_iter()
        .find(|&p| host::cmdline(p).contains("autotool template"))
        .expect("the template's Python process among the launcher's descendants")
}

#[test]
fn a_forked_tool_runs_in_its_own_namespaces_below_the_template() {
    if skip() {
        return;
    }
    let a = forked();
    let b = forked();
    let (pa, pb) = (tool_pid(&a), tool_pid(&b));
    assert!(
        host::descendants(template::shared().unwrap().launcher_pid).contains(&pa),
        "the forked tool {pa} is not below the template"
    );
    for ns in ["net", "mnt", "pid", "ipc", "uts", "user", "cgroup"] {
        let link = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
        let own = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        assert_ne!(
            link(pa),
            link(pb),
            "two forked tools share their {ns} namespace"
        );
        assert_ne!(
            link(pa),
            own,
            "a forked tool shares the host's {ns} namespace"
        );
    }
}

#[test]
fn a_forked_tool_cannot_signal_trace_or_read_its_template_or_a_sibling() {
    if skip() {
        return;
    }
    let template = template_pid();
    let mut a = forked();
    let b = forked();
    let sibling = tool_pid(&b);
    for target in [template, sibling, b.pid()] {
        for attack in ["signal_pid", "ptrace_attack", "read_memory"] {
            let verdict = attack_on(&mut a, attack, json!({"pid": target}));
            assert_blocked(&verdict, &format!("{attack} on {target}"));
        }
    }
    // Its own init is the template's code too: not dumpable, out of its Landlock domain.
    for attack in ["signal_pid", "ptrace_attack", "read_memory"] {
        let verdict = attack_on(&mut a, attack, json!({"pid": 1}));
        assert!(
            !verdict.starts_with("ESCAPED:"),
            "{attack} on the forked tool's init: {verdict}"
        );
    }
    let mut c = start(Mode::Control);
    let d = start(Mode::Control);
    let target = d.pid();
    for attack in ["signal_pid", "ptrace_attack", "read_memory"] {
        let verdict = attack_on(&mut c, attack, json!({"pid": target}));
        assert_escaped(&verdict, &format!("{attack} between two unconfined tools"));
    }
}

#[test]
fn forked_siblings_draw_different_random_numbers() {
    if skip() {
        return;
    }
    let draws = |tool: &mut ToolProcess| -> (u64, Option<u64>) {
        let text = attack_on(tool, "random_draws", json!({}));
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (v["mine"].as_u64().unwrap(), v["forked_child"].as_u64())
    };
    let (a, _) = draws(&mut forked());
    let (b, _) = draws(&mut forked());
    assert_ne!(
        a, b,
        "two tools forked from one template drew the same number"
    );
    // Control: a fork without a reseed repeats its parent's draws (shown in an unconfined tool,
    // which may fork), so siblings forked from one template would draw the same numbers but for
    // the reseed each child gets.
    let (parent, child) = draws(&mut start(Mode::Control));
    assert_eq!(
        Some(parent),
        child,
        "a plain fork did not repeat its parent's draw"
    );
}

#[test]
fn a_forked_tool_shares_no_memory_with_a_sibling() {
    if skip() {
        return;
    }
    let key = 0x5eed_0000 + (std::process::id() & 0xffff) as i64;
    let mut a = forked();
    let mut b = forked();
    let made = attack_on(&mut a, "shm_share", json!({"key": key, "create": true}));
    assert_blocked(&made, "shared memory made by a forked tool");
    let found = attack_on(&mut b, "shm_share", json!({"key": key, "create": false}));
    assert_blocked(&found, "shared memory found by its sibling");
    let mut c = start(Mode::Control);
    let mut d = start(Mode::Control);
    let made = attack_on(&mut c, "shm_share", json!({"key": key, "create": true}));
    let found = attack_on(&mut d, "shm_share", json!({"key": key, "create": false}));
    attack_on(&mut c, "shm_remove", json!({"key": key}));
    assert_escaped(&made, "shared memory between two unconfined tools (made)");
    assert_escaped(&found, "shared memory between two unconfined tools (found)");
}

#[test]
fn a_forked_tool_holds_no_descriptor_of_its_template() {
    if skip() {
        return;
    }
    let mut a = forked();
    let verdict = attack_on(&mut a, "write_sockets", json!({}));
    assert_blocked(&verdict, "writing to a socket the tool started with");
    // The template still serves: a start after the attack works.
    let mut b = forked();
    assert_eq!(attack_on(&mut b, "ping", json!({})), "WORKS: pong");
    // Control: an unconfined tool that did inherit a socket writes to it.
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut control = builder()
        .with_inherited_fd(theirs.into(), 7)
        .start(Mode::Control)
        .unwrap();
    let verdict = attack_on(&mut control, "write_sockets", json!({}));
    assert_escaped(&verdict, "writing to an inherited socket");
    drop(ours);
}

/// Run the exiting fixture to its end; its exit code and what it said on stderr.
fn exit_of(builder: autotool_tests::ToolBuilder) -> (Option<i32>, Vec<String>) {
    let mut tool = builder
        .spawn(Mode::Confined)
        .unwrap_or_else(|e| panic!("starting the exiting tool: {e:#}"));
    tool.close_stdin();
    let status = tool
        .wait_exit(std::time::Duration::from_secs(30))
        .unwrap()
        .unwrap_or_else(|| panic!("the exiting tool did not exit{}", tool.context()));
    let said = tool
        .stderr()
        .lines()
        .filter(|l| ["main done", "thread finished", "atexit ran"].contains(l))
        .map(String::from)
        .collect();
    (status.code(), said)
}

#[test]
fn a_forked_tool_ends_as_a_launched_one_does() {
    if skip() {
        return;
    }
    let fixture = || autotool_tests::ToolBuilder::new("exiting_tool.py").unwrap();
    // Control: a launched tool is a fresh interpreter; at `sys.exit` it waits for its
    // non-daemon thread, then runs its atexit functions.
    let launched = exit_of(fixture().launched());
    assert_eq!(
        launched,
        (
            Some(3),
            vec![
                "main done".to_string(),
                "thread finished".to_string(),
                "atexit ran".to_string()
            ]
        ),
        "a launched interpreter ends otherwise than this test expects"
    );
    let forked = exit_of(fixture().forked().unwrap());
    assert_eq!(forked, launched, "a forked tool ends unlike a launched one");
}

/// The template script's first line: in the memory of the template, and so of every tool forked
/// from it.
const TEMPLATE_LINE: &str =
    "# autotool template: imports the SDK once, then forks one confined tool per request.";

/// A key value of `len` printable bytes, different in every run.
fn secret(len: usize) -> String {
    use sha2::{Digest as _, Sha256};
    let seed = format!(
        "{}-{:?}-{len}",
        std::process::id(),
        std::time::SystemTime::now()
    );
    let mut out = String::new();
    let mut i = 0u32;
    while out.len() < len {
        let block = Sha256::digest(format!("{seed}-{i}").as_bytes());
        out.extend(block.iter().map(|b| format!("{b:02x}")));
        i += 1;
    }
    out.truncate(len);
    out
}

/// What `scan_memory` searches for: the value's first 16 bytes and the digest of all of it.
fn needle(value: &str) -> serde_json::Value {
    use sha2::{Digest as _, Sha256};
    let digest: String = Sha256::digest(value.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"prefix": &value[..16], "sha256": digest, "length": value.len()})
}

#[test]
fn a_keyless_tool_forked_after_keyed_ones_finds_none_of_their_keys_in_its_memory() {
    if skip() {
        return;
    }
    // Keys of the sizes that survived in freed template memory (and a short one).
    let keys: Vec<String> = [48, 280, 400, 900].into_iter().map(secret).collect();
    let mut keyed = Vec::new();
    for (i, value) in keys.iter().enumerate() {
        let mut b = builder().forked().unwrap();
        b.policy_mut()
            .env
            .insert(format!("VICTIM_KEY_{i}"), value.clone());
        let mut tool = b.start(Mode::Confined).unwrap();
        // Control: the scan finds a key that is in memory (the tool's own).
        let verdict = attack_on(&mut tool, "scan_memory", needle(value));
        assert_escaped(
            &verdict,
            &format!("a keyed tool scanning for its own key {i}"),
        );
        keyed.push(tool);
    }
    // Keyless siblings forked after them, and one launched, hold none of those keys: not at
    // import, before the SDK has allocated anything (what a thief's module-level code sees),
    // nor once serving.
    let needles = serde_json::Value::Array(keys.iter().map(|k| needle(k)).collect());
    let thieves = [
        ("forked", builder().forked().unwrap()),
        ("forked again", builder().forked().unwrap()),
        ("launched", builder().launched()),
    ];
    for (how, mut b) in thieves {
        b.policy_mut()
            .env
            .insert("SCAN_AT_IMPORT".into(), needles.to_string());
        let mut thief = b.start(Mode::Confined).unwrap();
        // Control: what the template does hold (its own script) is in a forked tool's memory,
        // and found by the same search; a key held there would be found the same way.
        let inherited = attack_on(&mut thief, "scan_memory", needle(TEMPLATE_LINE));
        if how == "launched" {
            assert_blocked(
                &inherited,
                "a launched tool searching for the template's script",
            );
        } else {
            assert_escaped(
                &inherited,
                "a forked tool searching for the template's script",
            );
        }
        let at_import = attack_on(&mut thief, "scanned_at_import", json!({}));
        let verdicts: Vec<&str> = at_import.lines().collect();
        assert_eq!(verdicts.len(), keys.len(), "{at_import}");
        for (i, verdict) in verdicts.iter().enumerate() {
            assert_blocked(
                verdict,
                &format!("a keyless {how} tool searching at import for a sibling's key {i}"),
            );
        }
        for (i, value) in keys.iter().enumerate() {
            let verdict = attack_on(&mut thief, "scan_memory", needle(value));
            assert_blocked(
                &verdict,
                &format!(
                    "a keyless {how} tool scanning for a sibling's {}-byte key {i}",
                    value.len()
                ),
            );
        }
    }
    drop(keyed);
}

#[test]
fn a_forked_tool_finds_nothing_of_its_start_in_the_frames_above_it() {
    if skip() {
        return;
    }
    for (how, b) in [
        ("forked", builder().forked().unwrap()),
        ("launched", builder().launched()),
    ] {
        let mut b = b;
        b.policy_mut().env.insert("FRAME_KEY".into(), secret(64));
        let host_dir = b.tool_dir().to_string_lossy().into_owned();
        let root = template::tools_root()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut tool = b.start(Mode::Confined).unwrap();
        // Control: the walk reads the frames (it finds what the tool's own module planted).
        let planted = attack_on(
            &mut tool,
            "frames_hold",
            json!({"needles": ["planted-marker-of-the-module-itself"]}),
        );
        assert_escaped(
            &planted,
            &format!("{how}: the walk finding its own module's text"),
        );
        // Nothing of the launch policy: the host paths of its mounts, the policy's own words.
        let verdict = attack_on(
            &mut tool,
            "frames_hold",
            json!({"needles": [host_dir, root, "\"tool_dir\"", "report_fd", "interpreter_args"]}),
        );
        assert_blocked(&verdict, &format!("{how}: the frames above the tool"));
    }
}

#[test]
fn a_forked_tool_reads_its_own_proc_files_as_a_launched_one_does() {
    if skip() {
        return;
    }
    let launched = attack_on(
        &mut builder().launched().start(Mode::Confined).unwrap(),
        "read_own_proc",
        json!({}),
    );
    assert!(
        launched.starts_with("WORKS:"),
        "a launched tool cannot read its own /proc files: {launched}"
    );
    let forked = attack_on(&mut forked(), "read_own_proc", json!({}));
    assert!(
        forked.starts_with("WORKS:"),
        "a forked tool cannot read its own /proc files where a launched one can ({launched}): \
         {forked}"
    );
}
