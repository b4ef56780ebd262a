//! What a tool can learn about the host: the host-wide files of `/proc` (through every name
//! that reaches them), and the mount table, which must not name the host paths behind the
//! tool's directory, the runtime or the packages layer.

use super::{attack_on, builder, skip};
use autotool_policy::launch::{PROC_MASKED_DIRS, PROC_MASKED_FILES};
use autotool_tests::{Mode, ToolProcess};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// What `peek` found at one path: bytes of a file, entries of a directory, or an error.
fn held(seen: &Value, path: &str) -> Option<u64> {
    let at = &seen[path];
    at["bytes"].as_u64().or_else(|| at["entries"].as_u64())
}

fn peek(tool: &mut ToolProcess, paths: &[String]) -> Value {
    let verdict = attack_on(tool, "peek", json!({ "paths": paths }));
    serde_json::from_str(verdict.trim_start_matches("WORKS: ")).unwrap()
}

/// How much the test itself finds at `path` on the host: bytes (up to 64 KiB) or entries.
/// Opened without blocking (`/proc/kmsg` would wait for the next kernel message).
fn host_holds(path: &str) -> Option<u64> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let p = Path::new(path);
    if p.is_dir() {
        return std::fs::read_dir(p).ok().map(|d| d.count() as u64);
    }
    let mut buf = Vec::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(p)
        .ok()?
        .take(65536)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf.len() as u64)
}

/// Every name of `/proc/<entry>` a tool could try: the plain path, and the same file reached
/// through its own process directory, its thread's and its root.
fn spellings(entry: &str) -> [String; 4] {
    [
        format!("/proc/{entry}"),
        format!("/proc/self/../{entry}"),
        format!("/proc/thread-self/../../../{entry}"),
        format!("/proc/self/root/proc/{entry}"),
    ]
}

#[test]
fn host_wide_proc_files_are_masked() {
    if skip() {
        return;
    }
    let entries: Vec<&str> = PROC_MASKED_FILES
        .iter()
        .chain(PROC_MASKED_DIRS.iter())
        .copied()
        .collect();
    let paths: Vec<String> = entries.iter().flat_map(|e| spellings(e)).collect();
    let mut confined = builder().start(Mode::Confined).unwrap();
    let inside = peek(&mut confined, &paths);
    let mut unconfined = builder().start(Mode::Control).unwrap();
    let control = peek(&mut unconfined, &paths);
    let mut shown = Vec::new();
    for entry in &entries {
        let plain = format!("/proc/{entry}");
        let host = host_holds(&plain).is_some_and(|n| n > 0);
        for path in spellings(entry) {
            // Confined: nothing there by any name, whether the kernel has it or not.
            assert!(
                held(&inside, &path).is_none_or(|n| n == 0),
                "{path} is not masked: {}",
                inside[&path]
            );
            // Control: where this user can read something on the host, so can the tool, by
            // every name.
            if host {
                assert!(
                    held(&control, &path).is_some_and(|n| n > 0),
                    "CONTROL {path}: the tool found nothing where the host has something: {}",
                    control[&path]
                );
            }
        }
        if host {
            shown.push(*entry);
        }
    }
    eprintln!("masked, with a control that reads them: {shown:?}");
    // Every Linux host has these, readable to anyone: the control cannot pass empty-handed.
    for always in [
        "interrupts",
        "kallsyms",
        "cmdline",
        "softirqs",
        "iomem",
        "zoneinfo",
        "buddyinfo",
        "sys/kernel/random/boot_id",
        "irq",
        "bus",
    ] {
        assert!(
            shown.contains(&always),
            "no control for /proc/{always}: {shown:?}"
        );
    }

    // The paths container runtimes mask below /sys do not arise: the sandbox has no /sys.
    let sys: Vec<String> = ["/sys", "/sys/firmware", "/sys/devices/virtual/powercap"]
        .iter()
        .map(|p| p.to_string())
        .collect();
    let inside = peek(&mut confined, &sys);
    for path in &sys {
        assert!(
            inside[path]["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("FileNotFoundError")),
            "{path}: {}",
            inside[path]
        );
    }
    // Control: unconfined, the tool lists the host's /sys.
    let outside = peek(&mut unconfined, &sys[..1]);
    assert!(
        held(&outside, "/sys").is_some_and(|n| n > 0),
        "CONTROL /sys: {}",
        outside["/sys"]
    );

    // What stays visible does (the C library, Python and its libraries read these), and
    // /proc is read-only as a whole.
    let visible: Vec<String> = [
        "meminfo",
        "stat",
        "cpuinfo",
        "uptime",
        "loadavg",
        "self/status",
        "sys/kernel/ostype",
        "sys/kernel/random/uuid",
    ]
    .iter()
    .map(|f| format!("/proc/{f}"))
    .collect();
    let seen = peek(&mut confined, &visible);
    for path in &visible {
        assert!(
            held(&seen, path).is_some_and(|n| n > 0),
            "{path}: {}",
            seen[path]
        );
    }
    let options = attack_on(&mut confined, "mount_options", json!({"path": "/proc"}));
    assert!(
        options.starts_with("WORKS: ro,"),
        "/proc is not read-only: {options}"
    );
}

/// The part of a host path that names it anywhere a mount table could print it: its last
/// component (a mount table prints a path relative to its file system's root).
fn name_of(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// Bind `source` in a mount namespace of its own made by `unshare` and return that namespace's
/// `mountinfo`: what the tool's mount table showed when its directories were bind mounts.
/// `None` where this user cannot make one (no user namespaces).
fn plain_bind_mountinfo(source: &Path) -> Option<String> {
    let target = tempfile::tempdir().unwrap();
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" && cat /proc/self/mountinfo"#)
        .args(["sh".as_ref(), source.as_os_str(), target.path().as_os_str()])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_mount_table_names_no_host_path() {
    if skip() {
        return;
    }
    // A packages layer too, with a name nothing else could print.
    let layer = tempfile::Builder::new()
        .prefix("autotool-layer-host-path-")
        .tempdir()
        .unwrap();
    let mut b = builder();
    let policy = b.policy_mut();
    // The runtime mounted at its fixed place, as the supervisor mounts it.
    let runtime = policy.runtime_dirs.remove(0);
    policy.runtime = Some(runtime.clone());
    policy.packages = Some(layer.path().to_path_buf());
    let hosts = [policy.tool_dir.clone(), runtime, layer.path().to_path_buf()];
    let mut tool = b.start(Mode::Confined).unwrap();
    let names: Vec<String> = hosts.iter().map(|h| name_of(h)).collect();

    let verdict = attack_on(&mut tool, "mount_tables", json!({}));
    let tables: Value = serde_json::from_str(verdict.trim_start_matches("WORKS: ")).unwrap();
    let tables = tables.as_object().unwrap();
    for (file, text) in tables {
        let text = text.as_str().unwrap();
        for (host, name) in hosts.iter().zip(&names) {
            assert!(
                !text.contains(name.as_str()),
                "{file} names the host path {host:?}:\n{text}"
            );
        }
    }
    // The tables were read, and show the three directories as overlays, by descriptor.
    let mountinfo = tables["/proc/self/mountinfo"].as_str().unwrap();
    for place in ["/tool", "/runtime", "/packages"] {
        let line = mountinfo
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(place))
            .unwrap_or_else(|| panic!("no mount at {place}:\n{mountinfo}"));
        assert!(
            line.contains(" - overlay overlay ro,lowerdir=/proc/self/fd/"),
            "{place}: {line}"
        );
    }
    for thread_view in [
        "/proc/thread-self/mountinfo",
        "/proc/self/task/TID/mountinfo",
        "/proc/TID/mountinfo",
    ] {
        assert!(
            tables[thread_view].as_str().unwrap().contains(" /runtime "),
            "{thread_view}: {}",
            tables[thread_view]
        );
    }
    eprintln!("confined /proc/self/mountinfo:\n{mountinfo}");

    // Control: a plain bind of the same directories names each host path.
    if autotool_tests::capabilities_mode() {
        autotool_tests::print_skip(
            "the_mount_table_names_no_host_path control",
            "needs user namespaces, which are switched off here (capabilities mode)",
        );
        return;
    }
    for (host, name) in hosts.iter().zip(&names) {
        let shown = plain_bind_mountinfo(host).expect("unshare with a user namespace");
        let line = shown.lines().find(|l| l.contains(name.as_str()));
        assert!(
            line.is_some(),
            "CONTROL: a plain bind of {host:?} does not name it:\n{shown}"
        );
        eprintln!("control, a plain bind of {host:?}: {}", line.unwrap_or(""));
    }
}
