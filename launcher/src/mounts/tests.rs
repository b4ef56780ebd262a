//! Unit tests of the mount stage, through the recording [`crate::sys::Sys`].
//!
//! Plans come from real policies ([`LaunchPolicy::plan`]); the host is faked with
//! [`HostSources::fake`], and [`Recorder`] writes down every call [`build_root`] makes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::sys::{Op, Recorder};
use autotool_policy::{LaunchPolicy, Limits};

/// The root tmpfs, `/tmp`, `/home/tool`, `/proc` and `/dev` before sealing.
const SEALED: Attrs = Attrs {
    read_only: false,
    noexec: true,
    nosuid: true,
    nodev: true,
};
/// The root and `/dev` once sealed.
const SEALED_RO: Attrs = Attrs {
    read_only: true,
    noexec: true,
    nosuid: true,
    nodev: true,
};
/// System and runtime binds.
const RO_EXEC: Attrs = Attrs {
    read_only: true,
    noexec: false,
    nosuid: true,
    nodev: true,
};
/// The tool directory and `/etc` entries.
const RO_NOEXEC: Attrs = Attrs {
    read_only: true,
    noexec: true,
    nosuid: true,
    nodev: true,
};
/// Device nodes and masks over `/proc` files: read-only, device access kept.
const DEVICE: Attrs = Attrs {
    read_only: true,
    noexec: true,
    nosuid: true,
    nodev: false,
};
/// The fresh `/proc` and the tmpfs over masked directories.
const PROC_RO: Attrs = SEALED_RO;

const PASSWD: &str = "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n\
                      tool:x:1000:1000:autotool tool:/home/tool:/usr/sbin/nologin\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str = "root:x:0:\ntool:x:1000:\nnogroup:x:65534:\n";

const DEV_FILES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"];

fn policy() -> LaunchPolicy {
    let mut policy = LaunchPolicy::new(
        "/srv/tools/weather",
        "weather.py",
        "/opt/python/bin/python3",
        vec![PathBuf::from("/opt/python")],
    );
    policy.limits = Limits {
        tmp_bytes: 12 << 20,
        ..Limits::default()
    };
    policy.hostname = "weather".into();
    policy
}

fn run(policy: &LaunchPolicy, sources: &HostSources) -> (Result<(), LaunchError>, Vec<Op>) {
    let plan = policy.plan().unwrap();
    let mut rec = Recorder::default();
    let result = build_root(&plan, sources, &mut rec);
    (result, rec.ops)
}

fn ok_ops(policy: &LaunchPolicy, sources: &HostSources) -> Vec<Op> {
    let (result, ops) = run(policy, sources);
    result.unwrap();
    ops
}

/// A host with every required source and the device nodes, nothing else.
fn bare_host() -> HostSources {
    let mut files = DEV_FILES.to_vec();
    files.push("/etc/localtime");
    HostSources::fake(&["/usr", "/opt/python", "/srv/tools/weather"], &files, &[])
}

fn mkdir(p: &str) -> Op {
    Op::MkdirAll(p.into())
}
fn create(path: &str, contents: &str) -> Op {
    Op::CreateFile {
        path: path.into(),
        contents: contents.into(),
    }
}
fn symlink(target: &str, link: &str) -> Op {
    Op::Symlink {
        target: target.into(),
        link: link.into(),
    }
}
fn bind(source: &str, target: &str) -> Op {
    Op::Bind {
        source: source.into(),
        target: target.into(),
    }
}
fn overlay(source: &str, target: &str, attrs: Attrs) -> Op {
    Op::Overlay {
        source: source.into(),
        target: target.into(),
        attrs,
    }
}
fn attrs(target: &str, attrs: Attrs, recursive: bool) -> Op {
    Op::SetAttrs {
        target: target.into(),
        attrs,
        recursive,
    }
}
fn tmpfs(target: &str, size_bytes: u64, mode: u32) -> Op {
    Op::Mount {
        fs: Fs::Tmpfs { size_bytes, mode },
        target: target.into(),
        attrs: SEALED,
    }
}

/// What hides the host-wide files and directories of `/proc`, in the plan's order, when the
/// kernel has every one of them.
fn proc_masks() -> Vec<Op> {
    let mut ops = Vec::new();
    for file in autotool_policy::launch::PROC_MASKED_FILES {
        let t = format!("/tmp/proc/{file}");
        ops.push(bind("/dev/null", &t));
        ops.push(attrs(&t, DEVICE, false));
    }
    for dir in autotool_policy::launch::PROC_MASKED_DIRS {
        ops.push(Op::Mount {
            fs: Fs::Tmpfs {
                size_bytes: 4096,
                mode: 0o555,
            },
            target: format!("/tmp/proc/{dir}"),
            attrs: PROC_RO,
        });
    }
    ops
}

fn proc_mount() -> Op {
    Op::Mount {
        fs: Fs::Proc,
        target: "/tmp/proc".into(),
        attrs: PROC_RO,
    }
}

/// A merged-/usr host: `/bin`, `/lib`, `/lib64` and `/sbin` are symlinks into `/usr` (and open
/// as directories, as the real [`HostSources::open`] would find them), no `/lib32` or
/// `/libx32`; some `/etc` entries are missing.
#[test]
fn merged_usr_host_builds_exactly() {
    let sources = HostSources::fake(
        &[
            "/usr",
            "/bin",
            "/lib",
            "/lib64",
            "/sbin",
            "/opt/python",
            "/srv/tools/weather",
            "/etc/ssl/certs",
            "/etc/alternatives",
        ],
        &[
            "/etc/ld.so.cache",
            "/etc/localtime",
            "/etc/nsswitch.conf",
            "/etc/protocols",
            "/etc/services",
            "/etc/ssl/openssl.cnf",
            "/etc/ca-certificates.conf",
            "/dev/null",
            "/dev/zero",
            "/dev/random",
            "/dev/urandom",
        ],
        &[
            ("/bin", "usr/bin"),
            ("/lib", "usr/lib"),
            ("/lib64", "usr/lib64"),
            ("/sbin", "usr/sbin"),
        ],
    );
    let ops = ok_ops(&policy(), &sources);
    let tmp = 12 << 20;
    let mut expected = vec![
        Op::MakePrivate,
        tmpfs("/tmp", 1 << 20, 0o755),
        // /usr is a directory: bound with exec.
        mkdir("/tmp/usr"),
        bind("/usr", "/tmp/usr"),
        attrs("/tmp/usr", RO_EXEC, true),
        // The others are recreated as links; /lib32 and /libx32 do not exist.
        symlink("usr/lib", "/tmp/lib"),
        symlink("usr/lib64", "/tmp/lib64"),
        symlink("usr/bin", "/tmp/bin"),
        symlink("usr/sbin", "/tmp/sbin"),
        // Runtime, with exec.
        mkdir("/tmp/opt/python"),
        bind("/opt/python", "/tmp/opt/python"),
        attrs("/tmp/opt/python", RO_EXEC, true),
        // /etc entries that exist: files get an empty file as mount point, directories a
        // directory; /etc/ld.so.conf, /etc/mime.types and /etc/pki/tls/certs are missing.
        create("/tmp/etc/ld.so.cache", ""),
        bind("/etc/ld.so.cache", "/tmp/etc/ld.so.cache"),
        attrs("/tmp/etc/ld.so.cache", RO_NOEXEC, true),
        create("/tmp/etc/localtime", ""),
        bind("/etc/localtime", "/tmp/etc/localtime"),
        attrs("/tmp/etc/localtime", RO_NOEXEC, true),
        create("/tmp/etc/nsswitch.conf", ""),
        bind("/etc/nsswitch.conf", "/tmp/etc/nsswitch.conf"),
        attrs("/tmp/etc/nsswitch.conf", RO_NOEXEC, true),
        create("/tmp/etc/protocols", ""),
        bind("/etc/protocols", "/tmp/etc/protocols"),
        attrs("/tmp/etc/protocols", RO_NOEXEC, true),
        create("/tmp/etc/services", ""),
        bind("/etc/services", "/tmp/etc/services"),
        attrs("/tmp/etc/services", RO_NOEXEC, true),
        mkdir("/tmp/etc/ssl/certs"),
        bind("/etc/ssl/certs", "/tmp/etc/ssl/certs"),
        attrs("/tmp/etc/ssl/certs", RO_NOEXEC, true),
        create("/tmp/etc/ssl/openssl.cnf", ""),
        bind("/etc/ssl/openssl.cnf", "/tmp/etc/ssl/openssl.cnf"),
        attrs("/tmp/etc/ssl/openssl.cnf", RO_NOEXEC, true),
        create("/tmp/etc/ca-certificates.conf", ""),
        bind("/etc/ca-certificates.conf", "/tmp/etc/ca-certificates.conf"),
        attrs("/tmp/etc/ca-certificates.conf", RO_NOEXEC, true),
        mkdir("/tmp/etc/alternatives"),
        bind("/etc/alternatives", "/tmp/etc/alternatives"),
        attrs("/tmp/etc/alternatives", RO_NOEXEC, true),
        // Synthesized files.
        create("/tmp/etc/passwd", PASSWD),
        create("/tmp/etc/group", GROUP),
        create(
            "/tmp/etc/hosts",
            "127.0.0.1\tlocalhost weather\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        ),
        // The tool, noexec, an overlay that names no host path.
        mkdir("/tmp/tool"),
        overlay("/srv/tools/weather", "/tmp/tool", RO_NOEXEC),
        // Private tmpfs, sized by the policy.
        mkdir("/tmp/tmp"),
        tmpfs("/tmp/tmp", tmp, 0o1777),
        mkdir("/tmp/home/tool"),
        tmpfs("/tmp/home/tool", tmp, 0o700),
        // A fresh /proc, read-only.
        mkdir("/tmp/proc"),
        proc_mount(),
    ];
    // Host-wide files and directories of it hidden (this host has them all).
    expected.extend(proc_masks());
    expected.extend([
        // /dev: a small tmpfs, the four nodes bound in read-only with device access, links, then
        // sealed.
        mkdir("/tmp/dev"),
        tmpfs("/tmp/dev", 64 << 10, 0o755),
        create("/tmp/dev/null", ""),
        bind("/dev/null", "/tmp/dev/null"),
        attrs("/tmp/dev/null", DEVICE, false),
        create("/tmp/dev/zero", ""),
        bind("/dev/zero", "/tmp/dev/zero"),
        attrs("/tmp/dev/zero", DEVICE, false),
        create("/tmp/dev/random", ""),
        bind("/dev/random", "/tmp/dev/random"),
        attrs("/tmp/dev/random", DEVICE, false),
        create("/tmp/dev/urandom", ""),
        bind("/dev/urandom", "/tmp/dev/urandom"),
        attrs("/tmp/dev/urandom", DEVICE, false),
        symlink("/proc/self/fd", "/tmp/dev/fd"),
        symlink("/proc/self/fd/0", "/tmp/dev/stdin"),
        symlink("/proc/self/fd/1", "/tmp/dev/stdout"),
        symlink("/proc/self/fd/2", "/tmp/dev/stderr"),
        attrs("/tmp/dev", SEALED_RO, false),
        // Seal the root and enter it.
        attrs("/tmp", SEALED_RO, false),
        Op::PivotRoot("/tmp".into()),
    ]);
    assert_eq!(ops, expected);
}

#[test]
fn split_usr_host_binds_every_system_dir() {
    let sources = HostSources::fake(
        &[
            "/usr",
            "/bin",
            "/lib",
            "/lib64",
            "/sbin",
            "/opt/python",
            "/srv/tools/weather",
        ],
        &DEV_FILES,
        &[],
    );
    let ops = ok_ops(&policy(), &sources);
    let system_binds: Vec<&Op> = ops
        .iter()
        .filter(|op| {
            matches!(op, Op::Bind { source, .. } if !source.starts_with("/dev")
            && !source.starts_with("/opt") && !source.starts_with("/srv"))
        })
        .collect();
    assert_eq!(
        system_binds,
        [
            &bind("/usr", "/tmp/usr"),
            &bind("/lib", "/tmp/lib"),
            &bind("/lib64", "/tmp/lib64"),
            &bind("/bin", "/tmp/bin"),
            &bind("/sbin", "/tmp/sbin"),
        ]
    );
    assert!(!ops.iter().any(|op| matches!(op, Op::Symlink { link, .. }
        if !link.starts_with("/tmp/dev/"))));
}

fn open_source_path(result: Result<(), LaunchError>) -> PathBuf {
    match result {
        Err(LaunchError::OpenSource { path, source }) => {
            assert_eq!(source.kind(), io::ErrorKind::NotFound);
            path
        }
        other => panic!("expected OpenSource, got {other:?}"),
    }
}

#[test]
fn missing_runtime_dir_is_an_error() {
    let sources = HostSources::fake(&["/usr", "/srv/tools/weather"], &DEV_FILES, &[]);
    let (result, ops) = run(&policy(), &sources);
    assert_eq!(open_source_path(result), PathBuf::from("/opt/python"));
    // Stopped before anything was mounted for it, and never pivoted.
    assert!(!ops.iter().any(|op| *op == mkdir("/tmp/opt/python")));
    assert!(!ops.iter().any(|op| matches!(op, Op::PivotRoot(_))));
}

#[test]
fn missing_tool_dir_is_an_error() {
    let sources = HostSources::fake(&["/usr", "/opt/python"], &DEV_FILES, &[]);
    let (result, ops) = run(&policy(), &sources);
    assert_eq!(
        open_source_path(result),
        PathBuf::from("/srv/tools/weather")
    );
    assert!(!ops.iter().any(|op| matches!(op, Op::PivotRoot(_))));
}

#[test]
fn missing_device_node_is_an_error() {
    for missing in DEV_FILES {
        let files: Vec<&str> = DEV_FILES
            .iter()
            .copied()
            .filter(|f| *f != missing)
            .collect();
        let sources =
            HostSources::fake(&["/usr", "/opt/python", "/srv/tools/weather"], &files, &[]);
        let (result, ops) = run(&policy(), &sources);
        assert_eq!(open_source_path(result), PathBuf::from(missing));
        assert!(!ops.iter().any(|op| matches!(op, Op::PivotRoot(_))));
    }
}

#[test]
fn missing_optional_sources_are_skipped() {
    // Only /usr of the system dirs and only /etc/localtime of the /etc entries exist.
    let ops = ok_ops(&policy(), &bare_host());
    for op in &ops {
        let paths: Vec<&str> = match op {
            Op::MkdirAll(p) => vec![p],
            Op::CreateFile { path, .. } => vec![path],
            Op::Bind { source, target } => vec![source, target],
            Op::SetAttrs { target, .. } => vec![target],
            _ => vec![],
        };
        for p in paths {
            for absent in [
                "/lib",
                "/lib64",
                "/lib32",
                "/libx32",
                "/bin",
                "/sbin",
                "/etc/ld.so.cache",
                "/etc/ssl",
                "/etc/pki",
                "/etc/alternatives",
            ] {
                assert!(
                    !p.ends_with(absent) && !p.contains(&format!("{absent}/")),
                    "{absent} is missing on the host but {op:?} was made"
                );
            }
        }
    }
    assert!(ops.contains(&bind("/etc/localtime", "/tmp/etc/localtime")));
    assert_eq!(ops.last(), Some(&Op::PivotRoot("/tmp".into())));
}

#[test]
fn symlinked_system_dir_is_linked_not_bound() {
    let mut policy = policy();
    policy.system_dirs = vec![PathBuf::from("/usr"), PathBuf::from("/lib64")];
    // /lib64 opens as a directory (through the link), but the link wins.
    let sources = HostSources::fake(
        &["/usr", "/lib64", "/opt/python", "/srv/tools/weather"],
        &DEV_FILES,
        &[("/lib64", "/usr/lib/x86_64-linux-gnu")],
    );
    let ops = ok_ops(&policy, &sources);
    let about_lib64: Vec<&Op> = ops
        .iter()
        .filter(|op| format!("{op:?}").contains("lib64"))
        .collect();
    assert_eq!(
        about_lib64,
        [&symlink("/usr/lib/x86_64-linux-gnu", "/tmp/lib64")]
    );
}

#[test]
fn a_link_with_no_host_source_still_links() {
    let mut policy = policy();
    policy.system_dirs = vec![PathBuf::from("/usr"), PathBuf::from("/bin")];
    let sources = HostSources::fake(
        &["/usr", "/opt/python", "/srv/tools/weather"],
        &DEV_FILES,
        &[("/bin", "usr/bin")],
    );
    let ops = ok_ops(&policy, &sources);
    assert!(ops.contains(&symlink("usr/bin", "/tmp/bin")));
    assert!(
        !ops.iter()
            .any(|op| matches!(op, Op::Bind { source, .. } if source == "/bin"))
    );
}

#[test]
fn every_bind_is_sealed_read_only_recursively_with_noexec_unless_exec() {
    let mut policy = policy();
    policy
        .runtime_dirs
        .push(PathBuf::from("/srv/venvs/weather"));
    let sources = HostSources::fake(
        &[
            "/usr",
            "/opt/python",
            "/srv/venvs/weather",
            "/srv/tools/weather",
            "/etc/ssl/certs",
        ],
        &[
            "/etc/localtime",
            "/dev/null",
            "/dev/zero",
            "/dev/random",
            "/dev/urandom",
        ],
        &[],
    );
    let plan = policy.plan().unwrap();
    let mut rec = Recorder::default();
    build_root(&plan, &sources, &mut rec).unwrap();
    let ops = rec.ops;

    let sealed = |exec: bool| Attrs {
        read_only: true,
        noexec: !exec,
        nosuid: true,
        nodev: true,
    };
    let exec_of = |source: &str| match source {
        "/usr" | "/opt/python" | "/srv/venvs/weather" => true,
        "/srv/tools/weather" | "/etc/ssl/certs" | "/etc/localtime" => false,
        other => panic!("unexpected mount of {other}"),
    };
    let mut seen = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Bind { source, .. } if source.starts_with("/dev/") => {}
            // A bind is sealed by the next call, recursively.
            Op::Bind { source, target } => {
                assert_eq!(
                    ops.get(i + 1),
                    Some(&Op::SetAttrs {
                        target: target.clone(),
                        attrs: sealed(exec_of(source)),
                        recursive: true,
                    }),
                    "after the bind of {source}"
                );
                seen.push(source.as_str());
            }
            // An overlay is mounted sealed.
            Op::Overlay { source, attrs, .. } => {
                assert_eq!(*attrs, sealed(exec_of(source)), "overlay of {source}");
                seen.push(source.as_str());
            }
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            "/usr",
            "/opt/python",
            "/srv/venvs/weather",
            "/etc/localtime",
            "/etc/ssl/certs",
            "/srv/tools/weather",
        ]
    );
    // The plan agrees: the tool is the one noexec directory that is required, shown under no
    // host name.
    assert!(plan.mounts.contains(&Mount::Layer {
        source: "/srv/tools/weather".into(),
        target: "/tool".into(),
        exec: false,
    }));
}

#[test]
fn tmpfs_mounts_carry_size_and_mode_from_the_policy() {
    for tmp_bytes in [1, 4096, 12 << 20, 1 << 33] {
        let mut policy = policy();
        policy.limits.tmp_bytes = tmp_bytes;
        let ops = ok_ops(&policy, &bare_host());
        let mounts: Vec<&Op> = ops
            .iter()
            .filter(
                |op| matches!(op, Op::Mount { target, .. } if !target.starts_with("/tmp/proc/")),
            )
            .collect();
        assert_eq!(
            mounts,
            [
                &tmpfs("/tmp", 1 << 20, 0o755),
                &tmpfs("/tmp/tmp", tmp_bytes, 0o1777),
                &tmpfs("/tmp/home/tool", tmp_bytes, 0o700),
                &proc_mount(),
                &tmpfs("/tmp/dev", 64 << 10, 0o755),
            ]
        );
        // Each mount point is made just before its mount.
        for target in ["/tmp/tmp", "/tmp/home/tool", "/tmp/proc", "/tmp/dev"] {
            let at = ops
                .iter()
                .position(|op| matches!(op, Op::Mount { target: t, .. } if t == target))
                .unwrap();
            assert_eq!(ops[at - 1], mkdir(target));
        }
    }
}

#[test]
fn root_is_private_first_then_sealed_non_recursively_and_pivoted_last() {
    let ops = ok_ops(&policy(), &bare_host());
    assert_eq!(ops[0], Op::MakePrivate);
    assert_eq!(ops[1], tmpfs("/tmp", 1 << 20, 0o755));
    assert_eq!(
        ops[ops.len() - 2..],
        [
            attrs("/tmp", SEALED_RO, false),
            Op::PivotRoot("/tmp".into())
        ]
    );
    // The root is made read-only once, non-recursively: the private tmpfs stay writable.
    let root_attrs: Vec<&Op> = ops
        .iter()
        .filter(|op| matches!(op, Op::SetAttrs { target, .. } if target == "/tmp"))
        .collect();
    assert_eq!(root_attrs, [&attrs("/tmp", SEALED_RO, false)]);
    for private in ["/tmp/tmp", "/tmp/home/tool", "/tmp/proc"] {
        assert!(
            !ops.iter()
                .any(|op| matches!(op, Op::SetAttrs { target, .. } if target == private)),
            "{private} must stay as mounted"
        );
    }
}

#[test]
fn device_nodes_are_read_only_binds_that_keep_dev() {
    let ops = ok_ops(&policy(), &bare_host());
    let dev_ops: Vec<&Op> = ops
        .iter()
        .filter(|op| format!("{op:?}").contains("/tmp/dev"))
        .collect();
    let mut expected = vec![mkdir("/tmp/dev"), tmpfs("/tmp/dev", 64 << 10, 0o755)];
    for node in ["null", "zero", "random", "urandom"] {
        let n = format!("/tmp/dev/{node}");
        expected.push(create(&n, ""));
        expected.push(bind(&format!("/dev/{node}"), &n));
        expected.push(attrs(&n, DEVICE, false));
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        expected.push(symlink(to, &format!("/tmp/dev/{name}")));
    }
    expected.push(attrs("/tmp/dev", SEALED_RO, false));
    // The seal of /dev is the last thing done to it.
    assert_eq!(dev_ops, expected.iter().collect::<Vec<_>>());
}

#[test]
fn synthesized_files_follow_the_etc_binds_and_use_the_hostname() {
    let mut policy = policy();
    policy.hostname = "box-7.local".into();
    let ops = ok_ops(&policy, &bare_host());
    let localtime = ops
        .iter()
        .position(|op| *op == bind("/etc/localtime", "/tmp/etc/localtime"))
        .unwrap();
    let passwd = ops
        .iter()
        .position(|op| *op == create("/tmp/etc/passwd", PASSWD))
        .unwrap();
    assert!(localtime < passwd);
    assert_eq!(ops[passwd + 1], create("/tmp/etc/group", GROUP));
    assert_eq!(
        ops[passwd + 2],
        create(
            "/tmp/etc/hosts",
            "127.0.0.1\tlocalhost box-7.local\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        )
    );
}

#[test]
fn a_failing_call_stops_the_stage_with_its_step() {
    for (fail, step, reported) in [
        ("/tmp/opt/python", "bind", "/opt/python"),
        ("/tmp/dev/zero", "device bind", "/dev/zero"),
        ("/tmp/proc/kallsyms", "mask", "/proc/kallsyms"),
    ] {
        let plan = policy().plan().unwrap();
        let mut rec = Recorder::default().fail_when(
            move |op| matches!(op, Op::Bind { target, .. } if target == fail),
            libc::EPERM,
        );
        match build_root(&plan, &bare_host(), &mut rec) {
            Err(LaunchError::Mount {
                step: s,
                target,
                source,
            }) => {
                assert_eq!(s, step);
                assert_eq!(target, PathBuf::from(reported));
                assert_eq!(source.raw_os_error(), Some(libc::EPERM));
            }
            other => panic!("expected a Mount error, got {other:?}"),
        }
        // The failed bind was the last call: nothing sealed over it, never pivoted.
        assert!(
            matches!(rec.ops.last(), Some(Op::Bind { target, .. }) if target == fail),
            "{:?}",
            rec.ops.last()
        );
    }
}

#[test]
fn a_failing_overlay_stops_the_stage_and_names_overlayfs() {
    let plan = policy().plan().unwrap();
    let mut rec = Recorder::default().fail_when(
        |op| matches!(op, Op::Overlay { target, .. } if target == "/tmp/tool"),
        libc::ENODEV,
    );
    let err = build_root(&plan, &bare_host(), &mut rec).unwrap_err();
    let LaunchError::Overlay {
        path,
        target,
        source,
    } = &err
    else {
        panic!("expected an Overlay error, got {err:?}");
    };
    assert_eq!(path, &PathBuf::from("/srv/tools/weather"));
    assert_eq!(target, &PathBuf::from("/tool"));
    assert_eq!(source.raw_os_error(), Some(libc::ENODEV));
    assert!(err.to_string().contains("modprobe overlay"), "{err}");
    assert!(matches!(rec.ops.last(), Some(Op::Overlay { .. })));
}

#[test]
fn a_layer_source_that_is_not_a_directory_is_refused() {
    let sources = HostSources::fake(&["/usr", "/opt/python"], &["/srv/tools/weather"], &[]);
    let (result, _) = run(&policy(), &sources);
    match result {
        Err(LaunchError::OpenSource { path, source }) => {
            assert_eq!(path, PathBuf::from("/srv/tools/weather"));
            assert_eq!(source.raw_os_error(), Some(libc::ENOTDIR));
        }
        other => panic!("expected OpenSource, got {other:?}"),
    }
}

#[test]
fn masks_the_kernel_lacks_are_skipped_and_the_rest_applied() {
    // This kernel has no sched_debug and no asound: mounting on them finds nothing.
    let lacking = ["/tmp/proc/sched_debug", "/tmp/proc/asound"];
    let mut rec = Recorder::default().fail_when(
        move |op| match op {
            Op::Bind { target, .. } | Op::Mount { target, .. } => {
                lacking.contains(&target.as_str())
            }
            _ => false,
        },
        libc::ENOENT,
    );
    build_root(&policy().plan().unwrap(), &bare_host(), &mut rec).unwrap();
    let masks: Vec<Op> = rec
        .ops
        .iter()
        .filter(|op| format!("{op:?}").contains("/tmp/proc/"))
        .cloned()
        .collect();
    // Each lacking target was tried once, nothing was sealed over it, and every other mask is
    // there as usual.
    let mut expected = Vec::new();
    for op in proc_masks() {
        match &op {
            Op::SetAttrs { target, .. } if lacking.contains(&target.as_str()) => {}
            _ => expected.push(op),
        }
    }
    assert_eq!(masks, expected);
    assert_eq!(rec.ops.last(), Some(&Op::PivotRoot("/tmp".into())));
}

#[test]
fn a_mask_failing_for_another_reason_fails_closed() {
    let mut rec = Recorder::default().fail_when(
        |op| matches!(op, Op::Mount { target, .. } if target == "/tmp/proc/acpi"),
        libc::EPERM,
    );
    match build_root(&policy().plan().unwrap(), &bare_host(), &mut rec) {
        Err(LaunchError::Mount { step, target, .. }) => {
            assert_eq!((step, target), ("mask", PathBuf::from("/proc/acpi")));
        }
        other => panic!("expected a Mount error, got {other:?}"),
    }
    assert!(!rec.ops.iter().any(|op| matches!(op, Op::PivotRoot(_))));
}

#[test]
fn masks_need_the_hosts_dev_null() {
    // A plan that masks /proc files but whose /dev lists no null (a policy cannot say so today;
    // the launcher must not bind a mask from nowhere if one ever does).
    let mut plan = policy().plan().unwrap();
    for m in &mut plan.mounts {
        if let Mount::Dev { nodes, .. } = m {
            nodes.retain(|n| n != "null");
        }
    }
    let files: Vec<&str> = DEV_FILES
        .iter()
        .copied()
        .filter(|f| *f != "/dev/null")
        .collect();
    let sources = HostSources::fake(&["/usr", "/opt/python", "/srv/tools/weather"], &files, &[]);
    let mut rec = Recorder::default();
    assert_eq!(
        open_source_path(build_root(&plan, &sources, &mut rec)),
        PathBuf::from("/dev/null")
    );
    assert!(!rec.ops.iter().any(|op| matches!(op, Op::PivotRoot(_))));
}

/// A small read-only file is copied into the root (one write, no mount) and the root tmpfs grows
/// by its size; a directory next to it is still bound.
#[test]
fn small_files_are_copied_not_bound() {
    let zone = b"TZif2 fake zone data";
    let sources = HostSources::fake(
        &[
            "/usr",
            "/opt/python",
            "/srv/tools/weather",
            "/etc/ssl/certs",
        ],
        &DEV_FILES,
        &[],
    )
    .with_contents("/etc/localtime", zone);
    let ops = ok_ops(&policy(), &sources);
    assert_eq!(ops[1], tmpfs("/tmp", (1 << 20) + zone.len() as u64, 0o755));
    let zone_ops: Vec<&Op> = ops
        .iter()
        .filter(|op| format!("{op:?}").contains("localtime"))
        .collect();
    assert_eq!(
        zone_ops,
        vec![&create("/tmp/etc/localtime", "TZif2 fake zone data")]
    );
    assert!(ops.contains(&bind("/etc/ssl/certs", "/tmp/etc/ssl/certs")));
}

#[test]
fn a_runtime_under_the_hosts_tmp_is_mounted_at_its_fixed_place_read_only_with_exec() {
    // The host's /tmp is where the root is staged and, inside, the tool's private tmpfs: the
    // runtime is mounted through the descriptor opened before either exists, at /runtime.
    let mut policy = policy();
    policy.runtime = Some(PathBuf::from("/tmp/ci-home/.autotool/runtime"));
    policy.interpreter = PathBuf::from("/tmp/ci-home/.autotool/runtime/bin/python3");
    let mut dirs = vec!["/usr", "/opt/python", "/srv/tools/weather"];
    dirs.push("/tmp/ci-home/.autotool/runtime");
    let sources = HostSources::fake(&dirs, &DEV_FILES, &[]);
    let ops = ok_ops(&policy, &sources);
    let at = ops
        .iter()
        .position(|op| *op == overlay("/tmp/ci-home/.autotool/runtime", "/tmp/runtime", RO_EXEC))
        .unwrap_or_else(|| panic!("no overlay of the runtime at /runtime: {ops:#?}"));
    assert_eq!(ops[at - 1], mkdir("/tmp/runtime"));
    // Nothing is mounted at the runtime's host path inside the root.
    assert!(
        !ops.iter()
            .any(|op| matches!(op, Op::MkdirAll(p) if p.starts_with("/tmp/tmp/ci-home"))),
        "{ops:#?}"
    );
}

#[test]
fn a_missing_runtime_stops_the_launch() {
    let mut policy = policy();
    policy.runtime = Some(PathBuf::from("/home/alice/.autotool/runtime"));
    let (result, _) = run(&policy, &bare_host());
    match result {
        Err(LaunchError::OpenSource { path, .. }) => {
            assert_eq!(path, PathBuf::from("/home/alice/.autotool/runtime"))
        }
        other => panic!("expected OpenSource, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The user's granted directories
// ---------------------------------------------------------------------------------------------

fn granted(dirs: &[(&str, bool)]) -> LaunchPolicy {
    let mut policy = policy();
    policy.user_dirs = dirs
        .iter()
        .map(|(path, write)| autotool_policy::UserDir {
            path: PathBuf::from(path),
            write: *write,
            dev: 1,
            ino: 2,
        })
        .collect();
    policy
}

fn bind_one(source: &str, target: &str) -> Op {
    Op::BindOne {
        source: source.into(),
        target: target.into(),
    }
}

/// A granted directory granted for writing: writable, never exec, suid or devices.
const USER_RW: Attrs = Attrs {
    read_only: false,
    noexec: true,
    nosuid: true,
    nodev: true,
};

#[test]
fn granted_directories_are_bound_alone_last_read_only_unless_written_and_always_noexec() {
    let with = granted(&[("/srv/data/out", true), ("/srv/data/notes", false)]);
    let sources = bare_host()
        .with_user_dir("/srv/data/notes")
        .with_user_dir("/srv/data/out");
    let ops = ok_ops(&with, &sources);
    let without = ok_ops(&policy(), &bare_host());
    // Everything the sandbox mounts itself comes first, unchanged; then the user's directories
    // (sorted by path), then the root is sealed and entered.
    let (before, after) = ops.split_at(without.len() - 2);
    assert_eq!(before, &without[..without.len() - 2]);
    assert_eq!(
        after,
        [
            mkdir("/tmp/srv/data/notes"),
            bind_one("/srv/data/notes", "/tmp/srv/data/notes"),
            attrs("/tmp/srv/data/notes", RO_NOEXEC, false),
            mkdir("/tmp/srv/data/out"),
            bind_one("/srv/data/out", "/tmp/srv/data/out"),
            attrs("/tmp/srv/data/out", USER_RW, false),
            attrs("/tmp", SEALED_RO, false),
            Op::PivotRoot("/tmp".into()),
        ]
    );
}

#[test]
fn a_user_directory_that_cannot_be_bound_stops_the_launch_with_a_hint() {
    let policy = granted(&[("/srv/data", false)]);
    let plan = policy.plan().unwrap();
    let sources = bare_host().with_user_dir("/srv/data");
    for (errno, hint) in [
        (libc::EINVAL, "mounted below it"),
        (libc::EPERM, "user namespaces"),
    ] {
        let mut rec = Recorder::default().fail_when(|op| matches!(op, Op::BindOne { .. }), errno);
        let err = build_root(&plan, &sources, &mut rec).unwrap_err();
        let LaunchError::UserDirMount { path, step, source } = &err else {
            panic!("expected UserDirMount, got {err:?}");
        };
        assert_eq!(
            (path.as_path(), *step, source.raw_os_error()),
            (Path::new("/srv/data"), "bind", Some(errno))
        );
        assert!(err.hint().unwrap().contains(hint), "{:?}", err.hint());
        // Nothing after the failed bind: never sealed, never pivoted.
        assert!(matches!(rec.ops.last(), Some(Op::BindOne { .. })));
    }
}

#[test]
fn a_user_directory_that_was_not_opened_is_never_mounted() {
    let plan = granted(&[("/srv/data", true)]).plan().unwrap();
    let mut rec = Recorder::default();
    let err = build_root(&plan, &bare_host(), &mut rec).unwrap_err();
    assert!(
        matches!(&err, LaunchError::UserDirMount { step: "open", .. }),
        "{err:?}"
    );
    assert!(!rec.ops.iter().any(|op| matches!(op, Op::BindOne { .. })));
}

/// A scratch directory outside `/tmp` for the real opens below, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch() -> (Scratch, PathBuf) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::env::var_os("AUTOTOOL_TEST_SCRATCH").unwrap_or("/var/tmp".into());
    let dir = Path::new(&base).join(format!(
        "autotool-userdir-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = std::fs::canonicalize(&dir).unwrap();
    (Scratch(dir), root)
}

fn id(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.dev(), m.ino())
}

fn changed(result: Result<OwnedFd, LaunchError>) -> &'static str {
    match result {
        Err(LaunchError::UserDirChanged { why, .. }) => why,
        other => panic!("expected UserDirChanged, got {other:?}"),
    }
}

#[test]
fn the_granted_directory_opens_when_it_is_still_the_one_granted() {
    let (_keep, root) = scratch();
    let dir = root.join("notes");
    std::fs::create_dir(&dir).unwrap();
    let (dev, ino) = id(&dir);
    let fd = open_user_dir(&dir, dev, ino).unwrap();
    assert_eq!(identity(&fd).unwrap(), (dev, ino));
}

#[test]
fn a_granted_directory_swapped_for_a_symlink_or_another_directory_is_refused() {
    let (_keep, root) = scratch();
    let dir = root.join("notes");
    let secret = root.join("secret");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&secret).unwrap();
    let (dev, ino) = id(&dir);
    // Swapped for a symlink to another directory after the grant.
    std::fs::rename(&dir, root.join("notes.old")).unwrap();
    std::os::unix::fs::symlink(&secret, &dir).unwrap();
    assert_eq!(
        changed(open_user_dir(&dir, dev, ino)),
        "a part of its path is a symbolic link now"
    );
    // Swapped for another directory moved into its place.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&secret, &dir).unwrap();
    assert_eq!(
        changed(open_user_dir(&dir, dev, ino)),
        "its path names another directory now (device and inode differ)"
    );
    // Gone, or a file now.
    std::fs::remove_dir(&dir).unwrap();
    assert_eq!(
        changed(open_user_dir(&dir, dev, ino)),
        "it no longer exists"
    );
    std::fs::write(&dir, "x").unwrap();
    assert_eq!(
        changed(open_user_dir(&dir, dev, ino)),
        "it, or a part of its path, is no longer a directory"
    );
}

#[test]
fn a_symlink_anywhere_on_the_granted_path_is_refused() {
    let (_keep, root) = scratch();
    std::fs::create_dir_all(root.join("real/notes")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
    let (dev, ino) = id(&root.join("real/notes"));
    assert_eq!(
        changed(open_user_dir(&root.join("link/notes"), dev, ino)),
        "a part of its path is a symbolic link now"
    );
    // Through /proc/self/root: /proc/self is itself a symlink.
    let via_proc =
        Path::new("/proc/self/root").join(root.join("real/notes").strip_prefix("/").unwrap());
    assert_eq!(
        changed(open_user_dir(&via_proc, dev, ino)),
        "a part of its path is a symbolic link now"
    );
    // And the plain path still opens.
    open_user_dir(&root.join("real/notes"), dev, ino).unwrap();
}

#[test]
fn host_sources_open_checks_every_granted_directory() {
    let (_keep, root) = scratch();
    let dir = root.join("notes");
    std::fs::create_dir(&dir).unwrap();
    let (dev, ino) = id(&dir);
    let mut policy = policy();
    policy.user_dirs = vec![autotool_policy::UserDir {
        path: dir.clone(),
        write: false,
        dev,
        ino: ino + 1,
    }];
    let plan = policy.plan().unwrap();
    let mut user_only = plan.clone();
    user_only
        .mounts
        .retain(|m| matches!(m, Mount::UserDir { .. }));
    let err = HostSources::open(&user_only).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "the directory {dir:?} changed since it was granted (its path names another \
             directory now"
        )),
        "{err}"
    );
    assert!(err.hint().unwrap().contains("grant it to the tool again"));
    policy.user_dirs[0].ino = ino;
    let mut user_only = policy.plan().unwrap();
    user_only
        .mounts
        .retain(|m| matches!(m, Mount::UserDir { .. }));
    let sources = HostSources::open(&user_only).unwrap();
    assert!(sources.user_dirs.contains_key(&dir));
}
