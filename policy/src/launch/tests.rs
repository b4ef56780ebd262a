//! Unit tests of the launch plan.
//!
//! The central test, [`representative_policy_plans_exactly`], compares the whole plan of a
//! realistic policy with one literal; the others check every refusal of [`LaunchPolicy::plan`],
//! the JSON form and [`tool_environment`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn map(v: &[(&str, &str)]) -> BTreeMap<String, String> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A policy as the supervisor sends it: defaults for system directories and `/etc`, a Python
/// prefix outside the system directories, the runtime (a virtual environment in a home under
/// `/tmp`), an egress listener, two kept descriptors, custom limits, and two directories of the
/// user's (listed out of order): one read-only, one writable.
fn representative() -> LaunchPolicy {
    let mut policy = LaunchPolicy::new(
        "/srv/tools/weather",
        "weather.py",
        "/tmp/ci/.autotool/runtime/bin/python3",
        vec![p("/opt/python")],
    );
    policy.runtime = Some(p("/tmp/ci/.autotool/runtime"));
    policy.env = map(&[
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/tool"),
        ("OPENAI_API_KEY", "sk-test"),
    ]);
    policy.limits = Limits {
        memory_bytes: 1 << 30,
        threads: 32,
        open_files: 128,
        file_size_bytes: 16 << 20,
        cpu_seconds: 600,
        tmp_bytes: 32 << 20,
    };
    policy.keep_fds = vec![9, 7, 9];
    policy.egress = Some(Egress {
        report_fd: 5,
        port: 3128,
    });
    policy.hostname = "weather".into();
    policy.user_dirs = vec![
        user_dir("/home/alice/notes", false),
        user_dir("/home/alice/exports", true),
    ];
    policy
}

/// A directory of the user's as the supervisor grants it (device and inode made up).
fn user_dir(path: &str, write: bool) -> UserDir {
    UserDir {
        path: p(path),
        write,
        dev: 2049,
        ino: 77 + path.len() as u64,
        home_link: None,
    }
}

/// Its mount in the plan.
fn user_mount(path: &str, write: bool) -> Mount {
    let d = user_dir(path, write);
    Mount::UserDir {
        path: d.path,
        write,
        dev: d.dev,
        ino: d.ino,
    }
}

/// A valid minimal policy to vary in the refusal tests.
fn base() -> LaunchPolicy {
    LaunchPolicy::new(
        "/srv/tools/t",
        "t.py",
        "/usr/bin/python3",
        vec![p("/opt/python")],
    )
}

fn bind(source: &str, target: &str, exec: bool, optional: bool) -> Mount {
    Mount::Bind {
        source: p(source),
        target: p(target),
        exec,
        optional,
    }
}

fn layer(source: &str, target: &str, exec: bool) -> Mount {
    Mount::Layer {
        source: p(source),
        target: p(target),
        exec,
    }
}

fn rule(path: &str, access: FsAccess) -> PathRule {
    PathRule {
        path: p(path),
        access,
    }
}

#[test]
fn representative_policy_plans_exactly() {
    let plan = representative().plan().unwrap();
    let expected = Plan {
        hostname: "weather".into(),
        mounts: vec![
            // System directories: a host symlink is recreated, otherwise an optional bind.
            Mount::HostSymlink { path: p("/usr") },
            bind("/usr", "/usr", true, true),
            Mount::HostSymlink { path: p("/lib") },
            bind("/lib", "/lib", true, true),
            Mount::HostSymlink { path: p("/lib64") },
            bind("/lib64", "/lib64", true, true),
            Mount::HostSymlink { path: p("/lib32") },
            bind("/lib32", "/lib32", true, true),
            Mount::HostSymlink { path: p("/libx32") },
            bind("/libx32", "/libx32", true, true),
            Mount::HostSymlink { path: p("/bin") },
            bind("/bin", "/bin", true, true),
            Mount::HostSymlink { path: p("/sbin") },
            bind("/sbin", "/sbin", true, true),
            // The Python prefix at its own path; the runtime at its fixed place, wherever it
            // lives on the host, its host path named nowhere. Both required, with exec.
            bind("/opt/python", "/opt/python", true, false),
            layer("/tmp/ci/.autotool/runtime", "/runtime", true),
            // Single entries of /etc: optional, noexec.
            bind("/etc/ld.so.cache", "/etc/ld.so.cache", false, true),
            bind("/etc/ld.so.conf", "/etc/ld.so.conf", false, true),
            bind("/etc/localtime", "/etc/localtime", false, true),
            bind("/etc/nsswitch.conf", "/etc/nsswitch.conf", false, true),
            bind("/etc/protocols", "/etc/protocols", false, true),
            bind("/etc/services", "/etc/services", false, true),
            bind("/etc/mime.types", "/etc/mime.types", false, true),
            bind("/etc/ssl/certs", "/etc/ssl/certs", false, true),
            bind("/etc/ssl/openssl.cnf", "/etc/ssl/openssl.cnf", false, true),
            bind(
                "/etc/ca-certificates.conf",
                "/etc/ca-certificates.conf",
                false,
                true,
            ),
            bind("/etc/pki/tls/certs", "/etc/pki/tls/certs", false, true),
            bind("/etc/alternatives", "/etc/alternatives", false, true),
            Mount::File {
                target: p("/etc/passwd"),
                contents: "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n\
                           tool:x:1000:1000:autotool tool:/home/tool:/usr/sbin/nologin\n\
                           nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                    .into(),
            },
            Mount::File {
                target: p("/etc/group"),
                contents: "root:x:0:\ntool:x:1000:\nnogroup:x:65534:\n".into(),
            },
            Mount::File {
                target: p("/etc/hosts"),
                contents: "127.0.0.1\tlocalhost weather\n\
                           ::1\tlocalhost ip6-localhost ip6-loopback\n"
                    .into(),
            },
            // The tool itself: required, noexec, under no host name.
            layer("/srv/tools/weather", "/tool", false),
            Mount::Tmpfs {
                target: p("/tmp"),
                size_bytes: 32 << 20,
                mode: 0o1777,
            },
            Mount::Tmpfs {
                target: p("/home/tool"),
                size_bytes: 32 << 20,
                mode: 0o700,
            },
            Mount::Proc { target: p("/proc") },
            // Host-wide /proc files and directories hidden, where the kernel has them.
            Mount::MaskFile {
                target: p("/proc/kallsyms"),
            },
            Mount::MaskFile {
                target: p("/proc/modules"),
            },
            Mount::MaskFile {
                target: p("/proc/config.gz"),
            },
            Mount::MaskFile {
                target: p("/proc/kcore"),
            },
            Mount::MaskFile {
                target: p("/proc/vmallocinfo"),
            },
            Mount::MaskFile {
                target: p("/proc/kpagecount"),
            },
            Mount::MaskFile {
                target: p("/proc/kpageflags"),
            },
            Mount::MaskFile {
                target: p("/proc/kpagecgroup"),
            },
            Mount::MaskFile {
                target: p("/proc/interrupts"),
            },
            Mount::MaskFile {
                target: p("/proc/softirqs"),
            },
            Mount::MaskFile {
                target: p("/proc/timer_list"),
            },
            Mount::MaskFile {
                target: p("/proc/sched_debug"),
            },
            Mount::MaskFile {
                target: p("/proc/schedstat"),
            },
            Mount::MaskFile {
                target: p("/proc/latency_stats"),
            },
            Mount::MaskFile {
                target: p("/proc/timer_stats"),
            },
            Mount::MaskFile {
                target: p("/proc/keys"),
            },
            Mount::MaskFile {
                target: p("/proc/key-users"),
            },
            Mount::MaskFile {
                target: p("/proc/locks"),
            },
            Mount::MaskFile {
                target: p("/proc/diskstats"),
            },
            Mount::MaskFile {
                target: p("/proc/kmsg"),
            },
            Mount::MaskFile {
                target: p("/proc/buddyinfo"),
            },
            Mount::MaskFile {
                target: p("/proc/pagetypeinfo"),
            },
            Mount::MaskFile {
                target: p("/proc/slabinfo"),
            },
            Mount::MaskFile {
                target: p("/proc/zoneinfo"),
            },
            Mount::MaskFile {
                target: p("/proc/iomem"),
            },
            Mount::MaskFile {
                target: p("/proc/ioports"),
            },
            Mount::MaskFile {
                target: p("/proc/mtrr"),
            },
            Mount::MaskFile {
                target: p("/proc/consoles"),
            },
            Mount::MaskFile {
                target: p("/proc/partitions"),
            },
            Mount::MaskFile {
                target: p("/proc/swaps"),
            },
            Mount::MaskFile {
                target: p("/proc/mdstat"),
            },
            Mount::MaskFile {
                target: p("/proc/cmdline"),
            },
            Mount::MaskFile {
                target: p("/proc/bootconfig"),
            },
            Mount::MaskFile {
                target: p("/proc/sys/kernel/random/boot_id"),
            },
            Mount::MaskFile {
                target: p("/proc/sysrq-trigger"),
            },
            Mount::MaskDir {
                target: p("/proc/acpi"),
            },
            Mount::MaskDir {
                target: p("/proc/asound"),
            },
            Mount::MaskDir {
                target: p("/proc/scsi"),
            },
            Mount::MaskDir {
                target: p("/proc/bus"),
            },
            Mount::MaskDir {
                target: p("/proc/driver"),
            },
            Mount::MaskDir {
                target: p("/proc/irq"),
            },
            Mount::MaskDir {
                target: p("/proc/fs"),
            },
            Mount::MaskDir {
                target: p("/proc/pressure"),
            },
            Mount::Dev {
                target: p("/dev"),
                nodes: strings(&["null", "zero", "random", "urandom"]),
            },
            // The user's directories last, sorted by path, at their own paths.
            user_mount("/home/alice/exports", true),
            user_mount("/home/alice/notes", false),
        ],
        landlock: vec![
            rule("/usr", FsAccess::ReadExec),
            rule("/lib", FsAccess::ReadExec),
            rule("/lib64", FsAccess::ReadExec),
            rule("/lib32", FsAccess::ReadExec),
            rule("/libx32", FsAccess::ReadExec),
            rule("/bin", FsAccess::ReadExec),
            rule("/sbin", FsAccess::ReadExec),
            rule("/opt/python", FsAccess::ReadExec),
            rule("/runtime", FsAccess::ReadExec),
            rule("/etc", FsAccess::Read),
            rule("/tool", FsAccess::Read),
            rule("/tmp", FsAccess::ReadWrite),
            rule("/home/tool", FsAccess::ReadWrite),
            rule("/proc", FsAccess::Read),
            rule("/dev", FsAccess::Read),
            rule("/dev/null", FsAccess::Device),
            rule("/dev/zero", FsAccess::Device),
            rule("/dev/random", FsAccess::Device),
            rule("/dev/urandom", FsAccess::Device),
            rule("/home/alice/exports", FsAccess::UserWrite),
            rule("/home/alice/notes", FsAccess::Read),
        ],
        connect_ports: vec![3128],
        min_landlock_abi: 6,
        rlimits: vec![
            Rlimit {
                resource: RlimitResource::AddressSpace,
                value: 1 << 30,
            },
            Rlimit {
                resource: RlimitResource::Threads,
                value: 32,
            },
            Rlimit {
                resource: RlimitResource::OpenFiles,
                value: 128,
            },
            Rlimit {
                resource: RlimitResource::FileSize,
                value: 16 << 20,
            },
            Rlimit {
                resource: RlimitResource::Cpu,
                value: 600,
            },
            Rlimit {
                resource: RlimitResource::Core,
                value: 0,
            },
        ],
        // Sorted by name (the policy holds a BTreeMap).
        env: vec![
            ("HOME".into(), "/home/tool".into()),
            ("OPENAI_API_KEY".into(), "sk-test".into()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ],
        // Sorted and deduplicated.
        keep_fds: vec![7, 9],
        egress: Some(Egress {
            report_fd: 5,
            port: 3128,
        }),
        // The interpreter below the runtime runs from the runtime's fixed place.
        exec_path: p("/runtime/bin/python3"),
        argv: strings(&["/runtime/bin/python3", "-I", "-B", "/tool/weather.py"]),
        working_dir: p("/tool"),
        uid: 1000,
        gid: 1000,
    };
    assert_eq!(plan, expected);
}

#[test]
fn minimal_plan_has_no_egress_no_ports_and_custom_argv() {
    let mut policy = LaunchPolicy::new("/t", "main.py", "/usr/bin/python3", vec![]);
    policy.system_dirs = vec![];
    policy.etc_files = vec![];
    policy.interpreter_args = strings(&["-X", "utf8"]);
    policy.min_landlock_abi = 7;
    let plan = policy.plan().unwrap();
    assert_eq!(plan.connect_ports, Vec::<u16>::new());
    assert_eq!(plan.egress, None);
    assert_eq!(plan.keep_fds, Vec::<i32>::new());
    assert_eq!(plan.env, Vec::<(String, String)>::new());
    assert_eq!(plan.min_landlock_abi, 7);
    assert_eq!(plan.hostname, "autotool");
    assert_eq!(
        plan.argv,
        strings(&["/usr/bin/python3", "-X", "utf8", "/tool/main.py"])
    );
    assert_eq!(plan.exec_path, p("/usr/bin/python3"));
    // Without system directories, runtime or /etc entries, only the fixed steps remain.
    let kinds: Vec<&str> = plan
        .mounts
        .iter()
        .map(|m| match m {
            Mount::Bind { .. } => "bind",
            Mount::Layer { .. } => "layer",
            Mount::Tmpfs { .. } => "tmpfs",
            Mount::Proc { .. } | Mount::WritableProc { .. } => "proc",
            Mount::MaskFile { .. } => "mask file",
            Mount::MaskDir { .. } => "mask dir",
            Mount::Dev { .. } => "dev",
            Mount::File { .. } => "file",
            Mount::HostSymlink { .. } => "symlink",
            Mount::UserDir { .. } => "user dir",
            Mount::Link { .. } => "link",
        })
        .collect();
    let mut expected = vec!["file", "file", "file", "layer", "tmpfs", "tmpfs", "proc"];
    expected.extend(["mask file"; PROC_MASKED_FILES.len()]);
    expected.extend(["mask dir"; PROC_MASKED_DIRS.len()]);
    expected.push("dev");
    assert_eq!(kinds, expected);
}

#[test]
fn plan_is_a_pure_function() {
    let policy = representative();
    assert_eq!(policy.plan().unwrap(), policy.plan().unwrap());
}

#[test]
fn defaults_match_constants() {
    let policy = base();
    assert_eq!(policy.interpreter_args, strings(&["-I", "-B"]));
    assert_eq!(policy.min_landlock_abi, MIN_LANDLOCK_ABI);
    assert_eq!(policy.hostname, "autotool");
    assert_eq!(
        policy.limits,
        Limits {
            memory_bytes: 2 << 30,
            threads: 64,
            open_files: 256,
            file_size_bytes: 64 << 20,
            cpu_seconds: 3600,
            tmp_bytes: 64 << 20,
        }
    );
    assert!(policy.plan().is_ok());
}

// ---------------------------------------------------------------------------------------------
// Refusals of `plan`
// ---------------------------------------------------------------------------------------------

fn refused(policy: &LaunchPolicy) -> PolicyError {
    match policy.plan() {
        Ok(plan) => panic!("policy was accepted: {policy:?}\nplan: {plan:?}"),
        Err(e) => e,
    }
}

fn not_absolute(what: &'static str, path: &str) -> PolicyError {
    PolicyError::NotAbsolute {
        what,
        path: p(path),
    }
}

fn reserved(what: &'static str, path: &str, reserved: &'static str) -> PolicyError {
    PolicyError::Reserved {
        what,
        path: p(path),
        reserved,
    }
}

const BAD_PATHS: [&str; 6] = [
    "relative/dir",
    "./dir",
    "",
    "/srv/../etc",
    "/srv/tools/..",
    "../srv",
];

#[test]
fn tool_dir_must_be_absolute_without_dotdot() {
    for bad in BAD_PATHS {
        let mut policy = base();
        policy.tool_dir = p(bad);
        assert_eq!(refused(&policy), not_absolute("tool_dir", bad), "{bad:?}");
    }
}

#[test]
fn interpreter_must_be_absolute_without_dotdot() {
    for bad in BAD_PATHS.iter().copied().chain(["python3"]) {
        let mut policy = base();
        policy.interpreter = p(bad);
        assert_eq!(
            refused(&policy),
            not_absolute("interpreter", bad),
            "{bad:?}"
        );
    }
}

#[test]
fn tool_file_must_be_a_plain_name() {
    for bad in ["", "a/b.py", "/t.py", "sub/", "..", ".", "t\0.py"] {
        let mut policy = base();
        policy.tool_file = bad.into();
        assert_eq!(
            refused(&policy),
            PolicyError::ToolFile(bad.into()),
            "{bad:?}"
        );
    }
    for good in ["t.py", "..t.py", "t..py", ".hidden.py", "main"] {
        let mut policy = base();
        policy.tool_file = good.into();
        let plan = policy.plan().unwrap();
        assert_eq!(plan.argv.last().unwrap(), &format!("/tool/{good}"));
    }
}

#[test]
fn runtime_and_system_dirs_must_be_absolute() {
    for bad in BAD_PATHS {
        let mut policy = base();
        policy.runtime_dirs = vec![p("/opt/ok"), p(bad)];
        assert_eq!(
            refused(&policy),
            not_absolute("runtime dir", bad),
            "{bad:?}"
        );

        let mut policy = base();
        policy.system_dirs = vec![p("/usr"), p(bad)];
        assert_eq!(refused(&policy), not_absolute("system dir", bad), "{bad:?}");
    }
}

/// (target, the reserved directory reported). A target is refused when it is, lies inside or
/// contains a reserved directory; `/` contains them all and `/proc` is checked first.
const RESERVED_TARGETS: [(&str, &str); 19] = [
    ("/", "/proc"),
    ("/proc", "/proc"),
    ("/proc/self", "/proc"),
    ("/dev", "/dev"),
    ("/dev/shm", "/dev"),
    ("/tmp", "/tmp"),
    ("/tmp/runtime", "/tmp"),
    ("/tool", "/tool"),
    ("/tool/lib", "/tool"),
    ("/home", "/home/tool"),
    ("/home/tool", "/home/tool"),
    ("/home/tool/.venv", "/home/tool"),
    ("/etc", "/etc"),
    ("/runtime", "/runtime"),
    ("/runtime/lib", "/runtime"),
    ("/packages", "/packages"),
    ("/packages/lxml", "/packages"),
    // `/.` is `/` once parsed into components.
    ("/.", "/proc"),
    ("//", "/proc"),
];

#[test]
fn runtime_dirs_cannot_hide_reserved_directories() {
    for (target, what) in RESERVED_TARGETS {
        let mut policy = base();
        policy.runtime_dirs = vec![p("/opt/python"), p(target)];
        assert_eq!(
            refused(&policy),
            reserved("runtime dir", target, what),
            "{target:?}"
        );
    }
}

#[test]
fn the_runtime_may_live_anywhere_on_the_host_and_always_appears_at_its_fixed_place() {
    for host in [
        "/tmp/home/.autotool/runtime",
        "/home/alice/.autotool/runtime",
        "/runtime",
        "/proc/../x",
    ] {
        let mut policy = base();
        policy.runtime = Some(p(host));
        if host.contains("..") {
            assert_eq!(refused(&policy), not_absolute("runtime", host));
            continue;
        }
        policy.interpreter = p(&format!("{host}/bin/python3"));
        let plan = policy.plan().unwrap();
        assert!(
            plan.mounts.contains(&layer(host, RUNTIME_MOUNT, true)),
            "{host}: {:?}",
            plan.mounts
        );
        assert!(
            plan.landlock
                .contains(&rule(RUNTIME_MOUNT, FsAccess::ReadExec))
        );
        assert_eq!(plan.exec_path, p("/runtime/bin/python3"), "{host}");
        assert_eq!(plan.argv[0], "/runtime/bin/python3");
    }
}

#[test]
fn an_interpreter_outside_the_runtime_keeps_its_path() {
    let mut policy = base();
    policy.runtime = Some(p("/srv/venv"));
    // `/srv/venvs` is not below `/srv/venv`: paths compare by component.
    for interpreter in ["/usr/bin/python3", "/srv/venvs/bin/python3"] {
        policy.interpreter = p(interpreter);
        let plan = policy.plan().unwrap();
        assert_eq!(plan.exec_path, p(interpreter));
    }
}

#[test]
fn the_runtime_cannot_be_the_host_root() {
    let mut policy = base();
    policy.runtime = Some(p("/"));
    assert_eq!(refused(&policy), PolicyError::RuntimeRoot(p("/")));
    policy.runtime = Some(p("relative/venv"));
    assert_eq!(refused(&policy), not_absolute("runtime", "relative/venv"));
}

#[test]
fn reserved_by_names_the_directory_a_path_would_hide() {
    assert_eq!(reserved_by(Path::new("/tmp/home/.pyenv")), Some("/tmp"));
    assert_eq!(reserved_by(Path::new("/etc/python")), Some("/etc"));
    assert_eq!(reserved_by(Path::new("/runtime")), Some("/runtime"));
    assert_eq!(reserved_by(Path::new("/home/alice/.pyenv")), None);
    assert_eq!(reserved_by(Path::new("/opt/python")), None);
}

#[test]
fn system_dirs_cannot_hide_reserved_directories() {
    for (target, what) in RESERVED_TARGETS {
        let mut policy = base();
        policy.system_dirs = vec![p("/usr"), p(target)];
        assert_eq!(
            refused(&policy),
            reserved("system dir", target, what),
            "{target:?}"
        );
    }
}

#[test]
fn near_misses_of_reserved_names_are_accepted() {
    for ok in [
        "/homework",
        // A user's own home holds the runtime (`~/.autotool/runtime`): only /home/tool is the
        // sandbox's.
        "/home/alice/.pyenv",
        "/home/alice/.autotool/runtime",
        "/tmpfiles",
        "/devtools",
        "/processes",
        "/tools",
        "/etcetera",
        "/opt/home",
        "/usr/lib/python3/tmp",
    ] {
        let mut policy = base();
        policy.runtime_dirs = vec![p(ok)];
        policy.system_dirs = vec![p(ok)];
        assert!(policy.plan().is_ok(), "{ok:?}");
    }
}

#[test]
fn etc_files_must_lie_below_etc() {
    let why = "/etc (only entries below it may be listed)";
    for bad in [
        "/etc",
        "/usr/share/zoneinfo",
        "/etcetera/x",
        "/",
        "/root/.netrc",
    ] {
        let mut policy = base();
        policy.etc_files = vec![p("/etc/localtime"), p(bad)];
        assert_eq!(refused(&policy), reserved("etc file", bad, why), "{bad:?}");
    }
    for bad in ["etc/hostname", "/etc/../root/.ssh", "/etc/ssl/.."] {
        let mut policy = base();
        policy.etc_files = vec![p(bad)];
        assert_eq!(refused(&policy), not_absolute("etc file", bad), "{bad:?}");
    }
}

#[test]
fn etc_files_cannot_shadow_the_synthesized_files() {
    for (bad, what) in [
        ("/etc/passwd", "/etc/passwd"),
        ("/etc/group", "/etc/group"),
        ("/etc/hosts", "/etc/hosts"),
        ("/etc/hosts/extra", "/etc/hosts"),
    ] {
        let mut policy = base();
        policy.etc_files = vec![p(bad)];
        assert_eq!(refused(&policy), reserved("etc file", bad, what), "{bad:?}");
    }
    // Names that merely start alike are other files.
    for ok in [
        "/etc/passwd-",
        "/etc/group.bak",
        "/etc/hosts.allow",
        "/etc/gshadow",
    ] {
        let mut policy = base();
        policy.etc_files = vec![p(ok)];
        assert!(policy.plan().is_ok(), "{ok:?}");
    }
}

#[test]
fn env_names_must_be_nonempty_without_equals_or_nul() {
    for bad in ["", "A=B", "=", "A\0B", "\0"] {
        let mut policy = base();
        policy.env = map(&[("GOOD", "1"), (bad, "v")]);
        assert_eq!(
            refused(&policy),
            PolicyError::EnvName(bad.into()),
            "{bad:?}"
        );
    }
}

#[test]
fn env_values_must_not_hold_nul() {
    let mut policy = base();
    policy.env = map(&[("GOOD", "1"), ("TOKEN", "abc\0def")]);
    assert_eq!(refused(&policy), PolicyError::EnvValue("TOKEN".into()));
    // Empty values, `=` and newlines are fine in a value.
    policy.env = map(&[("NO_PROXY", ""), ("A", "b=c"), ("M", "x\ny")]);
    assert!(policy.plan().is_ok());
}

#[test]
fn every_limit_must_be_nonzero() {
    type Set = fn(&mut Limits);
    let cases: [(&str, Set); 6] = [
        ("memory_bytes", |l| l.memory_bytes = 0),
        ("threads", |l| l.threads = 0),
        ("open_files", |l| l.open_files = 0),
        ("file_size_bytes", |l| l.file_size_bytes = 0),
        ("cpu_seconds", |l| l.cpu_seconds = 0),
        ("tmp_bytes", |l| l.tmp_bytes = 0),
    ];
    for (name, zero) in cases {
        let mut policy = base();
        zero(&mut policy.limits);
        assert_eq!(refused(&policy), PolicyError::ZeroLimit(name), "{name}");
    }
    let mut policy = base();
    policy.limits = Limits {
        memory_bytes: 1,
        threads: 1,
        open_files: 1,
        file_size_bytes: 1,
        cpu_seconds: 1,
        tmp_bytes: 1,
    };
    assert!(policy.plan().is_ok());
}

#[test]
fn keep_fds_cannot_be_stdio_or_the_egress_report_socket() {
    for bad in [-1, 0, 1, 2] {
        let mut policy = base();
        policy.keep_fds = vec![5, bad];
        assert_eq!(refused(&policy), PolicyError::KeepFd(bad), "{bad}");
    }
    let mut policy = base();
    policy.egress = Some(Egress {
        report_fd: 6,
        port: DEFAULT_EGRESS_PORT,
    });
    policy.keep_fds = vec![3, 6];
    assert_eq!(refused(&policy), PolicyError::KeepFd(6));
    policy.keep_fds = vec![3, 7];
    assert_eq!(policy.plan().unwrap().keep_fds, vec![3, 7]);
    // Without egress, the same descriptor may be kept.
    policy.egress = None;
    policy.keep_fds = vec![6];
    assert_eq!(policy.plan().unwrap().keep_fds, vec![6]);
}

#[test]
fn landlock_abi_below_six_is_refused() {
    for abi in 0..MIN_LANDLOCK_ABI {
        let mut policy = base();
        policy.min_landlock_abi = abi;
        assert_eq!(refused(&policy), PolicyError::LandlockAbi(abi), "{abi}");
    }
    for abi in [6, 7, 8] {
        let mut policy = base();
        policy.min_landlock_abi = abi;
        assert_eq!(policy.plan().unwrap().min_landlock_abi, abi);
    }
}

#[test]
fn bad_hostnames_are_refused() {
    let long = "a".repeat(65);
    for bad in [
        "",
        long.as_str(),
        "has space",
        "under_score",
        "slash/name",
        "ünicode",
        "new\nline",
        "nul\0",
    ] {
        let mut policy = base();
        policy.hostname = bad.into();
        assert_eq!(
            refused(&policy),
            PolicyError::Hostname(bad.into()),
            "{bad:?}"
        );
    }
    let longest = "b".repeat(64);
    for good in ["a", "tool-1", "weather.local", "UPPER", longest.as_str()] {
        let mut policy = base();
        policy.hostname = good.into();
        assert_eq!(policy.plan().unwrap().hostname, good);
    }
}

#[test]
fn egress_port_zero_is_refused() {
    let mut policy = base();
    policy.egress = Some(Egress {
        report_fd: 5,
        port: 0,
    });
    assert_eq!(refused(&policy), PolicyError::EgressPort);
    policy.egress = Some(Egress {
        report_fd: 5,
        port: 8080,
    });
    let plan = policy.plan().unwrap();
    assert_eq!(plan.connect_ports, vec![8080]);
}

#[test]
fn errors_say_what_is_wrong() {
    let mut policy = base();
    policy.runtime_dirs = vec![p("/tmp/venv")];
    assert_eq!(
        refused(&policy).to_string(),
        "runtime dir \"/tmp/venv\" would hide a directory the sandbox reserves (/tmp)"
    );
    assert_eq!(
        PolicyError::ZeroLimit("threads").to_string(),
        "limit threads must be greater than zero"
    );
}

/// The egress report socket is closed after use: 0-2 (the tool's stdio) or a negative number
/// are refused up front, like `keep_fds` 0-2.
#[test]
fn egress_report_fd_cannot_be_stdio() {
    for bad in [-1, 0, 1, 2] {
        let mut policy = base();
        policy.egress = Some(Egress {
            report_fd: bad,
            port: DEFAULT_EGRESS_PORT,
        });
        assert!(policy.plan().is_err(), "report_fd {bad} was accepted");
    }
}

/// An interpreter argument holding NUL is refused by `plan`, before any namespace or mount is
/// built.
#[test]
fn interpreter_args_cannot_hold_nul() {
    let mut policy = base();
    policy.interpreter_args = strings(&["-I", "-c\0import os"]);
    assert!(policy.plan().is_err());
}

/// Runtime and system directories may not shadow the synthesized `/etc/passwd`, `/etc/group`
/// and `/etc/hosts` (nor anything else below `/etc`), any more than `etc_files` may.
#[test]
fn runtime_and_system_dirs_cannot_shadow_synthesized_etc_files() {
    for target in ["/etc/passwd", "/etc/group", "/etc/hosts"] {
        let mut policy = base();
        policy.runtime_dirs = vec![p(target)];
        assert!(policy.plan().is_err(), "runtime dir {target}");
        let mut policy = base();
        policy.system_dirs = vec![p(target)];
        assert!(policy.plan().is_err(), "system dir {target}");
    }
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

#[test]
fn json_round_trip_keeps_every_field() {
    let mut policy = representative();
    policy.interpreter_args = strings(&["-I", "-X", "utf8"]);
    policy.system_dirs = vec![p("/usr")];
    policy.etc_files = vec![p("/etc/localtime")];
    policy.min_landlock_abi = 7;
    let json = policy.to_json();
    assert!(!json.is_empty());
    assert_eq!(LaunchPolicy::from_json(&json).unwrap(), policy);
    // The plan, too, survives serde unchanged.
    let plan = policy.plan().unwrap();
    let back: Plan = serde_json::from_slice(&serde_json::to_vec(&plan).unwrap()).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn json_defaults_fill_missing_fields() {
    let json = br#"{"tool_dir": "/srv/t", "tool_file": "t.py", "interpreter": "/usr/bin/python3"}"#;
    assert_eq!(
        LaunchPolicy::from_json(json).unwrap(),
        LaunchPolicy::new("/srv/t", "t.py", "/usr/bin/python3", vec![])
    );
}

#[test]
fn json_defaults_fill_missing_nested_fields() {
    let json = br#"{"tool_dir": "/srv/t", "tool_file": "t.py", "interpreter": "/usr/bin/python3",
        "limits": {"threads": 8}, "egress": {"report_fd": 4}}"#;
    let policy = LaunchPolicy::from_json(json).unwrap();
    assert_eq!(
        policy.limits,
        Limits {
            threads: 8,
            ..Limits::default()
        }
    );
    assert_eq!(
        policy.egress,
        Some(Egress {
            report_fd: 4,
            port: DEFAULT_EGRESS_PORT,
        })
    );
}

#[test]
fn json_unknown_fields_are_refused_at_every_level() {
    for json in [
        // Top level: a misspelt field must not be silently ignored.
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i", "envs": {}}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i", "network": true}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i", "limits": {"memory": 1}}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i",
            "egress": {"report_fd": 4, "host": "0.0.0.0"}}"#,
    ] {
        match LaunchPolicy::from_json(json.as_bytes()) {
            Err(PolicyError::Json(msg)) => assert!(msg.contains("unknown field"), "{msg}"),
            other => panic!("{json}: {other:?}"),
        }
    }
}

#[test]
fn json_missing_required_fields_and_garbage_are_refused() {
    for json in [
        r#"{"tool_file": "t.py", "interpreter": "/i"}"#,
        r#"{"tool_dir": "/t", "interpreter": "/i"}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py"}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i", "keep_fds": ["3"]}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i", "min_landlock_abi": 300}"#,
        "",
        "[]",
        "not json",
    ] {
        assert!(
            matches!(
                LaunchPolicy::from_json(json.as_bytes()),
                Err(PolicyError::Json(_))
            ),
            "{json}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// tool_environment
// ---------------------------------------------------------------------------------------------

const BASICS: [(&str, &str); 11] = [
    ("HOME", "/home/tool"),
    ("LANG", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("LOGNAME", "tool"),
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONUTF8", "1"),
    ("SSL_CERT_DIR", "/etc/ssl/certs"),
    ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
    ("TMPDIR", "/tmp"),
    ("USER", "tool"),
];

#[test]
fn environment_without_egress_is_exactly_the_basics_and_keys() {
    let keys = map(&[("OPENAI_API_KEY", "sk-1")]);
    let mut expected = map(&BASICS);
    expected.insert("OPENAI_API_KEY".into(), "sk-1".into());
    assert_eq!(tool_environment(&keys, &BTreeMap::new(), None), expected);
    assert_eq!(
        tool_environment(&BTreeMap::new(), &BTreeMap::new(), None),
        map(&BASICS)
    );
}

#[test]
fn environment_with_egress_points_every_proxy_at_the_listener() {
    let keys = map(&[("OPENAI_API_KEY", "sk-1")]);
    let api = map(&[("OPENAI_API_BASE", "https://api.example/v1")]);
    let expected = map(&[
        ("ALL_PROXY", "http://127.0.0.1:3128"),
        ("HOME", "/home/tool"),
        ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ("HTTP_PROXY", "http://127.0.0.1:3128"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("LOGNAME", "tool"),
        ("NO_PROXY", ""),
        ("OPENAI_API_BASE", "https://api.example/v1"),
        ("OPENAI_API_KEY", "sk-1"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONUTF8", "1"),
        ("SSL_CERT_DIR", "/etc/ssl/certs"),
        ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
        ("TMPDIR", "/tmp"),
        ("USER", "tool"),
        ("all_proxy", "http://127.0.0.1:3128"),
        ("http_proxy", "http://127.0.0.1:3128"),
        ("https_proxy", "http://127.0.0.1:3128"),
        ("no_proxy", ""),
    ]);
    assert_eq!(tool_environment(&keys, &api, Some(3128)), expected);
}

#[test]
fn environment_proxy_uses_the_given_port() {
    let env = tool_environment(&BTreeMap::new(), &BTreeMap::new(), Some(40123));
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        assert_eq!(env[k], "http://127.0.0.1:40123", "{k}");
    }
    assert_eq!(env["NO_PROXY"], "");
    assert_eq!(env["no_proxy"], "");
}

#[test]
fn only_names_ending_in_api_base_pass_through() {
    let api = map(&[
        ("ANTHROPIC_API_BASE", "https://a.example"),
        ("_API_BASE", "https://bare.example"),
        ("OPENAI_API_BASE_URL", "https://no.example"),
        ("API_BASE", "https://no.example"),
        ("openai_api_base", "https://no.example"),
        ("PATH", "/evil"),
        ("HTTP_PROXY", "http://evil.example"),
        ("LD_PRELOAD", "/tmp/evil.so"),
    ]);
    let mut expected = map(&BASICS);
    expected.insert("ANTHROPIC_API_BASE".into(), "https://a.example".into());
    expected.insert("_API_BASE".into(), "https://bare.example".into());
    assert_eq!(tool_environment(&BTreeMap::new(), &api, None), expected);
}

#[test]
fn keys_cannot_override_basics_proxies_or_api_bases() {
    let keys = map(&[
        ("PATH", "/evil/bin"),
        ("HOME", "/evil"),
        ("SSL_CERT_FILE", "/evil.pem"),
        ("HTTP_PROXY", "http://evil.example"),
        ("https_proxy", "http://evil.example"),
        ("NO_PROXY", "*"),
        ("no_proxy", "*"),
        ("OPENAI_API_BASE", "https://evil.example"),
        ("OPENAI_API_KEY", "sk-1"),
    ]);
    let api = map(&[("OPENAI_API_BASE", "https://api.example")]);
    let env = tool_environment(&keys, &api, Some(3128));
    assert_eq!(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(env["HOME"], "/home/tool");
    assert_eq!(env["SSL_CERT_FILE"], "/etc/ssl/certs/ca-certificates.crt");
    assert_eq!(env["HTTP_PROXY"], "http://127.0.0.1:3128");
    assert_eq!(env["https_proxy"], "http://127.0.0.1:3128");
    assert_eq!(env["NO_PROXY"], "");
    assert_eq!(env["no_proxy"], "");
    assert_eq!(env["OPENAI_API_BASE"], "https://api.example");
    assert_eq!(env["OPENAI_API_KEY"], "sk-1");
    // Nothing but the 11 basics, 8 proxy variables, one API base and one new key.
    assert_eq!(env.len(), 11 + 8 + 1 + 1);
}

#[test]
fn environment_feeds_a_valid_plan() {
    let mut policy = base();
    policy.env = tool_environment(
        &map(&[("OPENAI_API_KEY", "sk-1")]),
        &BTreeMap::new(),
        Some(DEFAULT_EGRESS_PORT),
    );
    policy.egress = Some(Egress {
        report_fd: 5,
        port: DEFAULT_EGRESS_PORT,
    });
    let plan = policy.plan().unwrap();
    assert_eq!(plan.env.len(), 11 + 8 + 1);
    assert!(plan.env.contains(&("NO_PROXY".into(), String::new())));
}

// ---------------------------------------------------------------------------------------------
// The packages layer
// ---------------------------------------------------------------------------------------------

const LAYER: &str = "/tmp/ci/.autotool/layers/5f2c";

#[test]
fn the_packages_layer_is_mounted_with_exec_next_to_the_runtime() {
    let mut policy = representative();
    policy.packages = Some(p(LAYER));
    let with = policy.plan().unwrap();
    let without = representative().plan().unwrap();

    // Exactly one mount more, right after the runtime's, required and with exec.
    let runtime_at = without
        .mounts
        .iter()
        .position(|m| m == &layer("/tmp/ci/.autotool/runtime", "/runtime", true))
        .unwrap();
    let mut expected_mounts = without.mounts.clone();
    expected_mounts.insert(runtime_at + 1, layer(LAYER, "/packages", true));
    assert_eq!(with.mounts, expected_mounts);

    // Exactly one Landlock rule more, read and execute, right after the runtime's.
    let rule_at = without
        .landlock
        .iter()
        .position(|r| r == &rule("/runtime", FsAccess::ReadExec))
        .unwrap();
    let mut expected_rules = without.landlock.clone();
    expected_rules.insert(rule_at + 1, rule("/packages", FsAccess::ReadExec));
    assert_eq!(with.landlock, expected_rules);

    // The tool runs through the bootstrap, which adds the layer at its place in the sandbox.
    assert_eq!(
        with.argv,
        vec![
            "/runtime/bin/python3".to_string(),
            "-I".into(),
            "-B".into(),
            "-c".into(),
            bootstrap("/packages"),
            "/tool/weather.py".into(),
        ]
    );
    // Nothing else changes.
    assert_eq!(
        Plan {
            mounts: without.mounts.clone(),
            landlock: without.landlock.clone(),
            argv: without.argv.clone(),
            ..with
        },
        without
    );
}

#[test]
fn without_packages_argv_is_exactly_as_before() {
    let plan = representative().plan().unwrap();
    assert_eq!(
        plan.argv,
        strings(&["/runtime/bin/python3", "-I", "-B", "/tool/weather.py"])
    );
    assert!(!plan.mounts.iter().any(|m| matches!(
        m,
        Mount::Bind { target, .. } | Mount::Layer { target, .. }
            if target == Path::new(PACKAGES_MOUNT)
    )));
    assert!(
        !plan
            .landlock
            .iter()
            .any(|r| r.path == Path::new(PACKAGES_MOUNT))
    );
}

#[test]
fn without_a_runtime_the_layer_follows_the_runtime_dirs() {
    let mut policy = base();
    policy.packages = Some(p("/srv/layers/abc"));
    let plan = policy.plan().unwrap();
    let python_at = plan
        .mounts
        .iter()
        .position(|m| m == &bind("/opt/python", "/opt/python", true, false))
        .unwrap();
    assert_eq!(
        plan.mounts[python_at + 1],
        layer("/srv/layers/abc", "/packages", true)
    );
    assert_eq!(
        plan.argv,
        vec![
            "/usr/bin/python3".to_string(),
            "-I".into(),
            "-B".into(),
            "-c".into(),
            bootstrap("/packages"),
            "/tool/t.py".into(),
        ]
    );
}

#[test]
fn the_packages_layer_must_be_absolute_without_dotdot() {
    for bad in BAD_PATHS {
        let mut policy = base();
        policy.packages = Some(p(bad));
        assert_eq!(refused(&policy), not_absolute("packages", bad), "{bad:?}");
    }
}

#[test]
fn the_packages_layer_cannot_be_the_host_root() {
    let mut policy = base();
    policy.packages = Some(p("/"));
    assert_eq!(refused(&policy), PolicyError::PackagesRoot(p("/")));
    assert!(refused(&policy).to_string().contains("below `/`"));
}

#[test]
fn the_packages_layer_cannot_overlap_the_noexec_tool_dir() {
    // The tool directory (`/srv/tools/t`) is mounted noexec; a layer that is it, lies in it or
    // holds it would make the tool's own files executable at /packages.
    for overlap in ["/srv/tools/t", "/srv/tools/t/site", "/srv/tools", "/srv"] {
        let mut policy = base();
        policy.packages = Some(p(overlap));
        assert_eq!(
            refused(&policy),
            PolicyError::PackagesInToolDir {
                packages: p(overlap),
                tool_dir: p("/srv/tools/t"),
            },
            "{overlap:?}"
        );
        assert!(refused(&policy).to_string().contains("noexec"));
    }
    // Control: a sibling of the tool directory is accepted.
    for ok in ["/srv/tools/t2", "/srv/tools/layers/t"] {
        let mut policy = base();
        policy.packages = Some(p(ok));
        assert!(policy.plan().is_ok(), "{ok:?}");
    }
}

#[test]
fn the_packages_layer_may_live_anywhere_on_the_host_and_always_appears_at_its_fixed_place() {
    // Like the runtime's, the host path is only a mount source: a home under /tmp (CI, a test's
    // temporary home) and even a host directory named like a reserved place work, and the
    // layer always appears at /packages.
    for host in [
        "/tmp/x",
        "/tmp/ci/.autotool/layers/5f2c",
        "/home/alice/.autotool/layers/5f2c",
        "/packages",
        "/runtime/layers/x",
    ] {
        let mut policy = base();
        policy.packages = Some(p(host));
        let plan = policy.plan().unwrap();
        assert!(
            plan.mounts.contains(&layer(host, "/packages", true)),
            "{host:?}"
        );
        assert!(
            plan.landlock
                .contains(&rule("/packages", FsAccess::ReadExec))
        );
    }
}

#[test]
fn runtime_and_system_dirs_cannot_hide_the_packages_mount() {
    for target in ["/packages", "/packages/lxml"] {
        let mut policy = base();
        policy.runtime_dirs = vec![p(target)];
        assert_eq!(
            refused(&policy),
            reserved("runtime dir", target, "/packages")
        );
    }
}

#[test]
fn a_policy_without_packages_still_deserialises() {
    let json = br#"{"tool_dir": "/srv/t", "tool_file": "t.py", "interpreter": "/usr/bin/python3"}"#;
    let policy = LaunchPolicy::from_json(json).unwrap();
    assert_eq!(policy.packages, None);
    let json = br#"{"tool_dir": "/srv/t", "tool_file": "t.py", "interpreter": "/usr/bin/python3",
        "packages": "/srv/layers/abc"}"#;
    let policy = LaunchPolicy::from_json(json).unwrap();
    assert_eq!(policy.packages, Some(p("/srv/layers/abc")));
    let mut policy = representative();
    policy.packages = Some(p(LAYER));
    assert_eq!(LaunchPolicy::from_json(&policy.to_json()).unwrap(), policy);
}

#[test]
fn bootstrap_appends_the_directory_and_runs_the_tool_as_main() {
    assert_eq!(
        bootstrap("/packages"),
        "import runpy, sys; sys.argv.pop(0); sys.path.append(\"/packages\"); \
         runpy.run_path(sys.argv[0], run_name='__main__')"
    );
}

#[test]
fn bootstrap_quotes_any_path_as_one_string_literal() {
    // A path that would break out of a naive `'...'` literal and run code.
    for (dir, literal) in [
        (
            "/h/o'); import os; os.system('x'); ('",
            r#""/h/o'); import os; os.system('x'); ('""#,
        ),
        (r#"/h/a"b\c"#, r#""/h/a\"b\\c""#),
        ("/h/new\nline\ttab", r#""/h/new\nline\ttab""#),
        ("/h/caf\u{e9}", "\"/h/caf\u{e9}\""),
    ] {
        let program = bootstrap(dir);
        assert!(
            program.contains(&format!("sys.path.append({literal});")),
            "{program}"
        );
        // The literal is exactly the one JSON string, so it reads back as the path.
        assert_eq!(serde_json::from_str::<String>(literal).unwrap(), dir);
        assert_eq!(program.matches("sys.path.append(").count(), 1);
    }
}

#[test]
fn a_tool_forks_from_a_template_only_on_the_same_runtime_and_below_a_shared_directory() {
    let template = LaunchPolicy::new(
        "/srv/tools",
        "template",
        "/venv/bin/python3",
        vec![p("/venv")],
    );
    let shares = [p("/srv/tools"), p("/srv/layers")];
    let tool = |dir: &str| LaunchPolicy::new(dir, "tool.py", "/venv/bin/python3", vec![p("/venv")]);
    assert_eq!(
        tool("/srv/tools/a/1").fork_mismatch(&template, &shares),
        None
    );
    let mut layered = tool("/srv/tools/a/1");
    layered.packages = Some(p("/srv/layers/abc"));
    assert_eq!(layered.fork_mismatch(&template, &shares), None);
    layered.packages = Some(p("/elsewhere/abc"));
    assert!(layered.fork_mismatch(&template, &shares).is_some());
    // The shared directory itself is not a tool's directory; a directory outside is not seen.
    assert!(
        tool("/srv/tools")
            .fork_mismatch(&template, &shares)
            .is_some()
    );
    assert!(
        tool("/home/u/t")
            .fork_mismatch(&template, &shares)
            .is_some()
    );
    let mut other_runtime = tool("/srv/tools/a/1");
    other_runtime.runtime_dirs.push(p("/opt/extra"));
    let why = other_runtime.fork_mismatch(&template, &shares);
    assert_eq!(
        why.as_deref(),
        Some("its runtime directories differ from the template's")
    );
    let mut other_args = tool("/srv/tools/a/1");
    other_args.interpreter_args.push("-X".into());
    assert!(other_args.fork_mismatch(&template, &shares).is_some());
}

#[test]
fn a_uses_channel_is_kept_open_and_the_tool_gets_its_module() {
    let mut policy = base();
    policy.uses_fd = Some(5);
    let plan = policy.plan().unwrap();
    assert_eq!(plan.keep_fds, vec![5]);
    assert_eq!(plan.argv.len(), 6, "{:?}", plan.argv);
    assert_eq!(plan.argv[3], "-c");
    let program = &plan.argv[4];
    assert!(
        program.contains("sys.modules['autotool_uses'] = m"),
        "{program}"
    );
    assert!(!program.contains("sys.path.append("), "{program}");
    // The module's source is one string literal that reads back whole.
    let start = program.find("compile(").unwrap() + "compile(".len();
    let end = program.find(", '<autotool_uses>'").unwrap();
    assert_eq!(
        serde_json::from_str::<String>(&program[start..end]).unwrap(),
        USES_MODULE
    );
    // With packages, both.
    let both = program_of(Some("/packages"), true);
    assert!(both.contains("sys.path.append(\"/packages\"); m = types.ModuleType"));
    assert_eq!(program_of(Some("/packages"), false), bootstrap("/packages"));
    assert_eq!(super::program(None, false), None);
    // Forked from a template like any tool: the template hands the channel on.
    let mut template = policy.clone();
    template.uses_fd = None;
    let mut forked = policy.clone();
    forked.tool_dir = p("/srv/tools/a/1");
    assert_eq!(forked.fork_mismatch(&template, &[p("/srv/tools")]), None);
}

fn program_of(packages: Option<&str>, uses: bool) -> String {
    super::program(packages, uses).unwrap_or_default()
}

#[test]
fn a_uses_descriptor_must_be_free() {
    for (fd, keep, report) in [(2, vec![], None), (7, vec![7], None), (4, vec![], Some(4))] {
        let mut policy = base();
        policy.uses_fd = Some(fd);
        policy.keep_fds = keep;
        policy.egress = report.map(|report_fd| Egress {
            report_fd,
            port: 3128,
        });
        assert_eq!(policy.plan(), Err(PolicyError::UsesFd(fd)));
    }
}

// ---------------------------------------------------------------------------------------------
// The user's directories
// ---------------------------------------------------------------------------------------------

fn with_dirs(dirs: &[(&str, bool)]) -> LaunchPolicy {
    let mut policy = base();
    policy.user_dirs = dirs.iter().map(|(d, w)| user_dir(d, *w)).collect();
    policy
}

fn user_dir_refused(path: &str, why: &str) -> PolicyError {
    PolicyError::UserDir {
        path: p(path),
        why: why.into(),
    }
}

#[test]
fn without_user_dirs_nothing_of_the_users_is_mounted() {
    let plan = base().plan().unwrap();
    assert!(
        !plan
            .mounts
            .iter()
            .any(|m| matches!(m, Mount::UserDir { .. }))
    );
    assert!(
        !plan
            .landlock
            .iter()
            .any(|r| r.access == FsAccess::UserWrite)
    );
}

#[test]
fn a_directory_granted_inside_another_is_mounted_after_it() {
    let plan = with_dirs(&[
        ("/srv/data/project/out", true),
        ("/srv/data/project", false),
        ("/srv/data/projects", true),
    ])
    .plan()
    .unwrap();
    let user: Vec<&Mount> = plan
        .mounts
        .iter()
        .filter(|m| matches!(m, Mount::UserDir { .. }))
        .collect();
    assert_eq!(
        user,
        [
            &user_mount("/srv/data/project", false),
            &user_mount("/srv/data/project/out", true),
            &user_mount("/srv/data/projects", true),
        ]
    );
    let rules: Vec<&PathRule> = plan.landlock.iter().rev().take(3).collect();
    assert_eq!(
        rules,
        [
            &rule("/srv/data/projects", FsAccess::UserWrite),
            &rule("/srv/data/project/out", FsAccess::UserWrite),
            &rule("/srv/data/project", FsAccess::Read),
        ]
    );
    // Every user directory comes after every mount the sandbox makes itself.
    let first = plan
        .mounts
        .iter()
        .position(|m| matches!(m, Mount::UserDir { .. }))
        .unwrap();
    assert_eq!(first, plan.mounts.len() - 3);
}

#[test]
fn user_dirs_must_be_absolute_without_dotdot() {
    for bad in BAD_PATHS {
        assert_eq!(
            refused(&with_dirs(&[(bad, false)])),
            not_absolute("user dir", bad),
            "{bad:?}"
        );
    }
}

#[test]
fn a_user_dir_cannot_be_the_root() {
    assert_eq!(
        refused(&with_dirs(&[("/", true)])),
        user_dir_refused("/", "is the host's root")
    );
}

#[test]
fn user_dirs_cannot_be_the_sandboxs_own_places() {
    for (path, place) in [
        ("/tmp", "/tmp"),
        ("/tmp/notes", "/tmp"),
        ("/tool", "/tool"),
        ("/runtime/x", "/runtime"),
        ("/packages", "/packages"),
        ("/home/tool", "/home/tool"),
        ("/home/tool/notes", "/home/tool"),
        // Holding the tool's home.
        ("/home", "/home/tool"),
        ("/proc", "/proc"),
        ("/proc/self/root", "/proc"),
        ("/dev/shm", "/dev"),
        ("/etc", "/etc"),
        ("/etc/ssh", "/etc"),
    ] {
        assert_eq!(
            refused(&with_dirs(&[(path, false)])),
            reserved("user dir", path, place),
            "{path}"
        );
    }
}

#[test]
fn user_dirs_cannot_overlap_the_system_or_runtime_directories() {
    for (path, other, what) in [
        ("/usr", "/usr", "system directory"),
        ("/usr/share", "/usr", "system directory"),
        ("/lib64/x", "/lib64", "system directory"),
        ("/opt/python", "/opt/python", "runtime directory"),
        ("/opt/python/lib", "/opt/python", "runtime directory"),
        // Holding one: it would be mounted over it, noexec.
        ("/opt", "/opt/python", "runtime directory"),
    ] {
        assert_eq!(
            refused(&with_dirs(&[(path, true)])),
            user_dir_refused(
                path,
                &format!("overlaps the {what} {other:?}, which the sandbox mounts itself")
            ),
            "{path}"
        );
    }
    // Near misses are fine.
    for path in ["/usrdata", "/opt/pythonic", "/opt/data"] {
        assert!(with_dirs(&[(path, true)]).plan().is_ok(), "{path}");
    }
}

#[test]
fn user_dirs_cannot_overlap_the_tools_own_directory_runtime_or_layer() {
    let mut policy = base();
    policy.runtime = Some(p("/srv/rt/venv"));
    policy.packages = Some(p("/srv/layers/abc"));
    for (path, why) in [
        (
            "/srv/tools/t",
            "overlaps the tool's own directory \"/srv/tools/t\"",
        ),
        (
            "/srv/tools/t/sub",
            "overlaps the tool's own directory \"/srv/tools/t\"",
        ),
        (
            "/srv/tools",
            "overlaps the tool's own directory \"/srv/tools/t\"",
        ),
        ("/srv/rt", "overlaps the tool runtime \"/srv/rt/venv\""),
        (
            "/srv/rt/venv/lib",
            "overlaps the tool runtime \"/srv/rt/venv\"",
        ),
        (
            "/srv/layers/abc",
            "overlaps the tool's packages layer \"/srv/layers/abc\"",
        ),
    ] {
        let mut policy = policy.clone();
        policy.user_dirs = vec![user_dir(path, true)];
        assert_eq!(refused(&policy), user_dir_refused(path, why), "{path}");
    }
    let mut policy = policy.clone();
    policy.user_dirs = vec![user_dir("/srv/data", true), user_dir("/srv/rt2", false)];
    assert!(policy.plan().is_ok());
}

#[test]
fn a_user_dir_is_listed_once() {
    assert_eq!(
        refused(&with_dirs(&[
            ("/srv/a", false),
            ("/srv/b", false),
            ("/srv/a", true)
        ])),
        user_dir_refused("/srv/a", "is listed twice")
    );
}

#[test]
fn user_dir_errors_name_the_directory() {
    let err = refused(&with_dirs(&[("/opt", true)]));
    assert_eq!(
        err.to_string(),
        "the granted directory \"/opt\" overlaps the runtime directory \"/opt/python\", which \
         the sandbox mounts itself"
    );
}

#[test]
fn a_tool_granted_directories_is_never_forked() {
    let template = LaunchPolicy::new(
        "/srv/tools",
        "template",
        "/usr/bin/python3",
        vec![p("/opt/python")],
    );
    let shares = [p("/srv/tools")];
    let plain = base();
    assert_eq!(plain.fork_mismatch(&template, &shares), None);
    for write in [false, true] {
        let granted = with_dirs(&[("/srv/data", write)]);
        assert_eq!(
            granted.fork_mismatch(&template, &shares).as_deref(),
            Some(
                "it was granted directories of the user's, which only a tool started by the \
                 launcher gets (in its own mount namespace)"
            )
        );
    }
}

#[test]
fn json_user_dirs_default_to_none_and_refuse_unknown_fields() {
    let json = br#"{"tool_dir": "/srv/t", "tool_file": "t.py", "interpreter": "/usr/bin/python3"}"#;
    assert_eq!(LaunchPolicy::from_json(json).unwrap().user_dirs, vec![]);
    let json = br#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i",
        "user_dirs": [{"path": "/srv/d", "write": true, "dev": 1, "ino": 2}]}"#;
    assert_eq!(
        LaunchPolicy::from_json(json).unwrap().user_dirs,
        vec![UserDir {
            path: p("/srv/d"),
            write: true,
            dev: 1,
            ino: 2,
            home_link: None,
        }]
    );
    for json in [
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i",
            "user_dirs": [{"path": "/srv/d", "write": true, "dev": 1, "ino": 2, "exec": true}]}"#,
        r#"{"tool_dir": "/t", "tool_file": "t.py", "interpreter": "/i",
            "user_dirs": [{"path": "/srv/d", "write": true}]}"#,
    ] {
        assert!(
            matches!(
                LaunchPolicy::from_json(json.as_bytes()),
                Err(PolicyError::Json(_))
            ),
            "{json}"
        );
    }
}

#[test]
fn a_grant_declared_below_the_home_gets_one_link_there_and_a_link_that_leaves_it_is_refused() {
    let mut p = base();
    let mut notes = user_dir("/srv/u/notes", false);
    notes.home_link = Some("notes".into());
    let mut inner = user_dir("/srv/u/notes/sub", true);
    inner.home_link = Some("notes/sub".into());
    p.user_dirs = vec![inner, notes];
    let plan = p.plan().unwrap();
    let links: Vec<&Mount> = plan
        .mounts
        .iter()
        .filter(|m| matches!(m, Mount::Link { .. }))
        .collect();
    assert_eq!(
        links,
        vec![&Mount::Link {
            path: PathBuf::from(HOME_MOUNT).join("notes"),
            target: PathBuf::from("/srv/u/notes"),
        }]
    );
    for bad in ["../x", "/etc", "a/../../b", ""] {
        let mut p = base();
        let mut d = user_dir("/srv/u/notes", false);
        d.home_link = Some(bad.into());
        p.user_dirs = vec![d];
        assert!(
            matches!(p.plan(), Err(PolicyError::UserDir { .. })),
            "{bad:?} was accepted"
        );
    }
}

/// An npm server: node (no runtime, no Python bootstrap) runs a script of the packages layer,
/// which is mounted read-only at its fixed place; the tool's own directory stays as it is.
fn node_server() -> LaunchPolicy {
    let mut policy = LaunchPolicy::new("/srv/tools/fs/1", "tool.py", "/usr/bin/node", vec![]);
    policy.interpreter_args = strings(&["--jitless"]);
    policy.packages = Some(p("/srv/layers/npm-abc"));
    policy.layer_program = Some(crate::LayerProgram {
        entry: p("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
        args: strings(&["/home/alice/notes", "--x"]),
    });
    policy
}

#[test]
fn a_layer_program_runs_from_the_packages_layer_without_the_bootstrap() {
    let plan = node_server().plan().unwrap();
    assert_eq!(
        plan.argv,
        strings(&[
            "/usr/bin/node",
            "--jitless",
            "/packages/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
            "/home/alice/notes",
            "--x",
        ])
    );
    assert_eq!(plan.exec_path, p("/usr/bin/node"));
    assert!(
        plan.mounts
            .contains(&layer("/srv/layers/npm-abc", "/packages", true))
    );
    assert!(
        plan.mounts
            .contains(&layer("/srv/tools/fs/1", "/tool", false))
    );
    assert!(
        plan.landlock
            .contains(&rule("/packages", FsAccess::ReadExec))
    );
    // Round trip through the launcher's JSON.
    let policy = node_server();
    assert_eq!(LaunchPolicy::from_json(&policy.to_json()).unwrap(), policy);
}

#[test]
fn a_layer_program_stays_inside_its_layer_and_never_forks() {
    for bad in ["../x.js", "/abs/x.js", "a/../../x.js", "./x.js", ""] {
        let mut policy = node_server();
        policy.layer_program.as_mut().unwrap().entry = p(bad);
        assert!(
            matches!(policy.plan(), Err(PolicyError::LayerProgram(_))),
            "{bad:?} was accepted"
        );
    }
    let mut policy = node_server();
    policy.layer_program.as_mut().unwrap().args = strings(&["a\0b"]);
    assert!(matches!(policy.plan(), Err(PolicyError::LayerProgram(_))));
    let mut policy = node_server();
    policy.packages = None;
    assert_eq!(policy.plan(), Err(PolicyError::LayerProgramAlone));
    let mut policy = node_server();
    policy.uses_fd = Some(7);
    assert_eq!(policy.plan(), Err(PolicyError::LayerProgramAlone));
    // Even a template on the same interpreter cannot fork it.
    let template = LaunchPolicy::new("/srv/tools", "template", "/usr/bin/node", vec![]);
    let shares = [p("/srv/tools"), p("/srv/layers")];
    assert!(
        node_server()
            .fork_mismatch(&template, &shares)
            .unwrap()
            .contains("npm server")
    );
}
