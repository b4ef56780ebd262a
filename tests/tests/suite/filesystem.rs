//! Files: nothing of the host is readable unless it is part of the runtime, nothing outside the
//! private tmpfs is writable, and the tmpfs is size-limited.

use super::{assert_blocked, assert_escaped, attack, attack_on, builder, marker, skip, start};
use autotool_tests::{Mode, host};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Credential files an agent would go for, relative to a home directory.
const SECRETS: [&str; 7] = [
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".claude.json",
    ".cursor/mcp.json",
    ".codex/config.toml",
    ".autotool/autotool.db",
    ".autotool/credentials",
];

/// A fake home directory holding [`SECRETS`], each containing `marker`.
fn plant_secrets(marker: &str) -> (tempfile::TempDir, Vec<PathBuf>) {
    let home = host::scratch_dir("autotool-home-").unwrap();
    let mut paths = Vec::new();
    for secret in SECRETS {
        let path = home.path().join(secret);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{marker} {secret}\n")).unwrap();
        paths.push(path);
    }
    (home, paths)
}

#[test]
fn planted_secrets_are_unreadable() {
    if skip() {
        return;
    }
    let marker = marker("SECRET");
    let (_home, paths) = plant_secrets(&marker);
    let root = host::euid() == 0;
    for mode in [Mode::Confined, Mode::Control] {
        let mut tool = start(mode);
        for path in &paths {
            let path = path.to_str().unwrap();
            for function in ["read_file", "read_via_symlink"] {
                let args = if function == "read_file" {
                    json!({"path": path})
                } else {
                    json!({"target": path})
                };
                let verdict = attack_on(&mut tool, function, args);
                let what = format!("{function} {path}");
                match mode {
                    Mode::Confined => {
                        assert_blocked(&verdict, &what);
                        assert!(!verdict.contains(&marker), "{what} leaked: {verdict}");
                    }
                    Mode::Control => {
                        assert_escaped(&verdict, &what);
                        assert!(verdict.contains(&marker), "{what}: {verdict}");
                    }
                }
            }
        }
        let shadow = attack_on(&mut tool, "read_file", json!({"path": "/etc/shadow"}));
        match mode {
            Mode::Confined => assert_blocked(&shadow, "read /etc/shadow"),
            // Only root can read the host's /etc/shadow at all.
            Mode::Control if root => assert_escaped(&shadow, "read /etc/shadow"),
            Mode::Control => {}
        }
    }
}

#[test]
fn host_home_is_invisible() {
    if skip() {
        return;
    }
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        autotool_tests::print_skip("host_home_is_invisible", "HOME is not set");
        return;
    };
    if !home.is_dir() || home == Path::new("/") {
        autotool_tests::print_skip(
            "host_home_is_invisible",
            &format!("HOME {home:?} is not a directory"),
        );
        return;
    }
    let args = json!({"path": home});
    assert_blocked(
        &attack(Mode::Confined, "list_dir", args.clone()),
        "list the host home",
    );
    assert_escaped(
        &attack(Mode::Control, "list_dir", args),
        "list the host home",
    );
}

#[test]
fn host_system_paths_are_invisible() {
    if skip() {
        return;
    }
    // Host state a tool could learn from or act on; none of it is part of the sandbox.
    let paths = [
        "/sys/class/net",
        "/sys/fs/cgroup",
        "/run",
        "/var/log",
        "/etc/ssh",
        "/boot",
        "/dev/shm",
        "/dev/pts",
    ];
    let mut confined = start(Mode::Confined);
    let mut control = start(Mode::Control);
    for path in paths {
        let args = json!({"path": path});
        assert_blocked(&attack_on(&mut confined, "list_dir", args.clone()), path);
        if Path::new(path).is_dir() {
            assert_escaped(&attack_on(&mut control, "list_dir", args), path);
        }
    }
}

/// Write, rename and delete `file` (as the tool sees it); returns the three verdicts.
fn tamper(tool: &mut autotool_tests::ToolProcess, file: &Path) -> [String; 3] {
    let file = file.to_str().unwrap();
    let moved = format!("{file}.moved");
    let write = attack_on(tool, "write_file", json!({"path": file}));
    let rename = attack_on(
        tool,
        "rename_file",
        json!({"source": file, "destination": moved}),
    );
    if rename.starts_with("ESCAPED:") {
        // Put it back so the delete below has something to delete.
        attack_on(
            tool,
            "rename_file",
            json!({"source": moved, "destination": file}),
        );
    }
    let delete = attack_on(tool, "delete_file", json!({"path": file}));
    [write, rename, delete]
}

#[test]
fn own_source_is_read_only() {
    if skip() {
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        let mut tool = start(mode);
        let host_file = tool.host_tool_dir().join(autotool_tests::ATTACK_TOOL);
        let before = std::fs::read(&host_file).unwrap();
        let path = tool.tool_path();
        let verdicts = tamper(&mut tool, &path);
        for (verdict, action) in verdicts.iter().zip(["write", "rename", "delete"]) {
            let what = format!("{action} own source {path:?}");
            match mode {
                Mode::Confined => assert_blocked(verdict, &what),
                Mode::Control => assert_escaped(verdict, &what),
            }
        }
        if mode == Mode::Confined {
            assert_eq!(std::fs::read(&host_file).unwrap(), before, "source changed");
        }
    }
}

#[test]
fn host_directory_is_untouchable() {
    if skip() {
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        let dir = host::scratch_dir("autotool-hostdir-").unwrap();
        let existing = dir.path().join("existing.txt");
        std::fs::write(&existing, "original\n").unwrap();
        let mut tool = start(mode);
        let fresh = dir.path().join("planted.txt");
        let create = attack_on(&mut tool, "write_file", json!({"path": fresh}));
        let verdicts = tamper(&mut tool, &existing);
        let all = [
            create,
            verdicts[0].clone(),
            verdicts[1].clone(),
            verdicts[2].clone(),
        ];
        for (verdict, action) in all.iter().zip(["create", "append", "rename", "delete"]) {
            let what = format!("{action} in host dir {:?}", dir.path());
            match mode {
                Mode::Confined => assert_blocked(verdict, &what),
                Mode::Control => assert_escaped(verdict, &what),
            }
        }
        if mode == Mode::Confined {
            assert_eq!(std::fs::read_to_string(&existing).unwrap(), "original\n");
            assert!(!fresh.exists(), "the tool created {fresh:?}");
        }
    }
}

#[test]
fn runtime_directory_is_read_only() {
    if skip() {
        return;
    }
    let dir = host::scratch_dir("autotool-runtime-").unwrap();
    if dir.path().starts_with("/tmp") {
        // /tmp is the tool's own tmpfs: a runtime directory there is refused by the policy.
        autotool_tests::print_skip(
            "runtime_directory_is_read_only",
            "no scratch directory outside /tmp (set AUTOTOOL_TEST_SCRATCH)",
        );
        return;
    }
    let existing = dir.path().join("module.py");
    std::fs::write(&existing, "VALUE = 1\n").unwrap();
    for mode in [Mode::Confined, Mode::Control] {
        let mut b = builder();
        b.policy_mut().runtime_dirs.push(dir.path().to_path_buf());
        let mut tool = b.start(mode).unwrap();
        // Reading the runtime is what it is there for.
        let read = attack_on(&mut tool, "read_file", json!({"path": existing}));
        assert!(read.contains("VALUE = 1"), "{mode:?}: {read}");
        let fresh = dir.path().join("sitecustomize.py");
        let create = attack_on(&mut tool, "write_file", json!({"path": fresh}));
        let verdicts = tamper(&mut tool, &existing);
        let all = [
            create,
            verdicts[0].clone(),
            verdicts[1].clone(),
            verdicts[2].clone(),
        ];
        for (verdict, action) in all.iter().zip(["create", "append", "rename", "delete"]) {
            let what = format!("{action} in runtime dir {:?}", dir.path());
            match mode {
                Mode::Confined => assert_blocked(verdict, &what),
                Mode::Control => assert_escaped(verdict, &what),
            }
        }
        if mode == Mode::Confined {
            assert_eq!(std::fs::read_to_string(&existing).unwrap(), "VALUE = 1\n");
            assert!(!fresh.exists());
        } else {
            let _ = std::fs::remove_file(&fresh);
            std::fs::write(&existing, "VALUE = 1\n").unwrap();
        }
    }
}

#[test]
fn dev_shm_is_not_writable() {
    if skip() {
        return;
    }
    if !Path::new("/dev/shm").is_dir() {
        autotool_tests::print_skip("dev_shm_is_not_writable", "the host has no /dev/shm");
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        let path = PathBuf::from(format!("/dev/shm/{}", marker("SHM")));
        let verdict = attack(mode, "write_file", json!({"path": path}));
        let existed = path.exists();
        let _ = std::fs::remove_file(&path);
        match mode {
            Mode::Confined => {
                assert_blocked(&verdict, "write /dev/shm");
                assert!(!existed, "{path:?} appeared on the host");
            }
            Mode::Control => assert_escaped(&verdict, "write /dev/shm"),
        }
    }
}

#[test]
fn private_tmp_and_home_are_writable() {
    if skip() {
        return;
    }
    for mode in [Mode::Confined, Mode::Control] {
        let verdict = attack(mode, "private_dirs_roundtrip", json!({}));
        assert!(verdict.starts_with("WORKS:"), "{mode:?}: {verdict}");
    }
}

#[test]
fn tmp_is_size_limited() {
    if skip() {
        return;
    }
    const TMP_MIB: u64 = 8;
    let mut b = builder();
    b.policy_mut().limits.tmp_bytes = TMP_MIB << 20;
    let mut tool = b.start(Mode::Confined).unwrap();
    let small = attack_on(&mut tool, "fill_tmp", json!({"mib": TMP_MIB / 2}));
    assert!(
        small.starts_with("ESCAPED:"),
        "a small file must fit: {small}"
    );
    for place in ["tmp", "home"] {
        let verdict = attack_on(
            &mut tool,
            "fill_tmp",
            json!({"mib": TMP_MIB * 2, "where": place}),
        );
        assert_blocked(&verdict, &format!("fill {place} past {TMP_MIB} MiB"));
        assert!(
            verdict.contains("ENOSPC") || verdict.contains("EFBIG"),
            "{place}: {verdict}"
        );
    }
    let control = attack(Mode::Control, "fill_tmp", json!({"mib": TMP_MIB * 2}));
    assert_escaped(&control, "fill tmp");
}

#[test]
fn file_size_is_limited() {
    if skip() {
        return;
    }
    const FILE_MIB: u64 = 2;
    let mut b = builder();
    b.policy_mut().limits.file_size_bytes = FILE_MIB << 20;
    let mut tool = b.start(Mode::Confined).unwrap();
    let verdict = attack_on(&mut tool, "fill_tmp", json!({"mib": FILE_MIB * 2}));
    assert_blocked(&verdict, &format!("write a file past {FILE_MIB} MiB"));
    assert!(verdict.contains("EFBIG"), "{verdict}");
    let control = attack(Mode::Control, "fill_tmp", json!({"mib": FILE_MIB * 2}));
    assert_escaped(&control, "write a large file");
}

#[test]
fn private_dirs_are_private_to_each_tool() {
    if skip() {
        return;
    }
    // Confined only: two unconfined tools share whatever directories they are given, so a
    // control would show nothing but the test's own setup.
    let mut first = start(Mode::Confined);
    let name = marker("PRIVATE");
    let paths = [format!("/tmp/{name}"), format!("/home/tool/{name}")];
    for path in &paths {
        let wrote = attack_on(&mut first, "write_file", json!({"path": path}));
        assert!(wrote.starts_with("ESCAPED: wrote"), "{wrote}");
    }
    // A second tool, while the first still runs, and a third after it is gone.
    let mut second = start(Mode::Confined);
    for path in &paths {
        assert_blocked(
            &attack_on(&mut second, "read_file", json!({"path": path})),
            "read another tool's file",
        );
    }
    drop(first);
    let mut third = start(Mode::Confined);
    for path in &paths {
        assert_blocked(
            &attack_on(&mut third, "read_file", json!({"path": path})),
            "read a file left by an earlier tool",
        );
    }
}

/// A device node's modification and change times, to the nanosecond.
fn node_times(path: &str) -> (i64, i64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
}

#[test]
fn device_nodes_are_the_hosts_but_their_timestamps_cannot_be_changed() {
    if skip() {
        return;
    }
    let mut tool = start(Mode::Confined);
    for node in ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"] {
        let before = node_times(node);
        let verdict = attack_on(&mut tool, "touch_device", json!({"path": node}));
        assert_blocked(&verdict, &format!("utime {node}"));
        assert!(
            verdict.contains("Read-only file system"),
            "{node} was refused, but not by its read-only bind: {verdict}"
        );
        assert_eq!(node_times(node), before, "the host's {node} changed");
        // The bind is read-only as the kernel sees it.
        let options = attack_on(&mut tool, "mount_options", json!({"path": node}));
        assert!(
            options.starts_with("WORKS: ro,"),
            "{node} is not a read-only mount: {options}"
        );
    }
    // The nodes still work: /dev/null takes writes, /dev/urandom gives bytes.
    let written = attack_on(
        &mut tool,
        "write_file",
        json!({"path": "/dev/null", "content": "discarded"}),
    );
    assert!(
        written.starts_with("ESCAPED: wrote"),
        "/dev/null: {written}"
    );
    let random = attack_on(
        &mut tool,
        "peek",
        json!({"paths": ["/dev/urandom", "/dev/zero"]}),
    );
    assert!(
        random.contains(r#""/dev/urandom": {"bytes": 65536}"#)
            && random.contains(r#""/dev/zero": {"bytes": 65536}"#),
        "{random}"
    );

    // Control: unconfined, the same call moves the host's /dev/null to now. As root the test
    // puts the old times back; an unprivileged user cannot (only the owner may set a time
    // other than now), and a touched /dev/null is harmless.
    let node = "/dev/null";
    let before_meta = std::fs::metadata(node).unwrap();
    let before = node_times(node);
    let verdict = attack(Mode::Control, "touch_device", json!({"path": node}));
    let after = node_times(node);
    if host::euid() == 0 {
        use std::os::unix::fs::MetadataExt;
        let ts = |s: i64, ns: i64| rustix::fs::Timespec {
            tv_sec: s,
            tv_nsec: ns,
        };
        let times = rustix::fs::Timestamps {
            last_access: ts(before_meta.atime(), before_meta.atime_nsec()),
            last_modification: ts(before_meta.mtime(), before_meta.mtime_nsec()),
        };
        rustix::fs::utimensat(rustix::fs::CWD, node, &times, rustix::fs::AtFlags::empty()).unwrap();
        let restored = node_times(node);
        assert_eq!(
            (restored.0, restored.1),
            (before.0, before.1),
            "mtime not restored"
        );
    } else {
        eprintln!(
            "note: the control set the host's {node} times to now (unprivileged: cannot restore)"
        );
    }
    assert_escaped(&verdict, "utime /dev/null");
    assert_ne!(
        after, before,
        "CONTROL: utime did not change the host's {node}"
    );
}
