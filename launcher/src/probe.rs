//! `autotool-launcher --probe`: what this kernel and this launcher can do, as one JSON object on
//! stdout, for `autotool doctor`. Every probe runs in a throw-away child process, so nothing
//! here changes the launcher itself.

use crate::process;
use crate::sys::{Forked, RealSys, Sys};

/// Run `f` in a forked child; `Ok(())` when it exits 0, else the errno it exited with.
fn in_child(f: impl FnOnce() -> Result<(), i32>) -> Result<(), String> {
    match RealSys.fork() {
        Err(e) => Err(e.to_string()),
        Ok(Forked::Child) => process::exit_now(match f() {
            Ok(()) => 0,
            Err(errno) => errno.clamp(1, 255),
        }),
        Ok(Forked::Parent(pid)) => {
            let status = RealSys.wait(pid).map_err(|e| e.to_string())?;
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else if libc::WIFEXITED(status) {
                Err(std::io::Error::from_raw_os_error(libc::WEXITSTATUS(status)).to_string())
            } else {
                Err(format!("probe child died (status {status})"))
            }
        }
    }
}

fn unshare(flags: libc::c_int) -> Result<(), i32> {
    RealSys
        .unshare(flags)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

fn outcome(r: &Result<(), String>) -> serde_json::Value {
    match r {
        Ok(()) => serde_json::json!({"ok": true}),
        Err(e) => serde_json::json!({"ok": false, "error": e}),
    }
}

/// Probe and print the report.
pub fn run() -> u8 {
    let landlock = crate::landlock::kernel_abi();
    let seccomp = crate::seccomp::check_available().is_ok();
    let user_ns = in_child(|| unshare(libc::CLONE_NEWUSER));
    let others = [
        ("network", libc::CLONE_NEWNET),
        ("mount", libc::CLONE_NEWNS),
        ("pid", libc::CLONE_NEWPID),
        ("ipc", libc::CLONE_NEWIPC),
        ("uts", libc::CLONE_NEWUTS),
        ("cgroup", libc::CLONE_NEWCGROUP),
    ];
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // Root holds every capability anyway; only a non-root launcher can hold them from its file.
    let file_caps = !root && crate::privileges::has_build_capabilities(&mut RealSys);
    // Each other namespace inside a new user namespace, or with the file capabilities.
    let ns: Vec<(&str, Result<(), String>)> = others
        .iter()
        .map(|&(name, flag)| {
            (
                name,
                in_child(|| {
                    if user_ns.is_ok() {
                        unshare(libc::CLONE_NEWUSER)?;
                    }
                    unshare(flag)
                }),
            )
        })
        .collect();
    // SAFETY: prctl(PR_GET_MDWE) only reads state.
    let mdwe = unsafe { libc::prctl(66, 0, 0, 0, 0) } >= 0;
    // The native library a template loads: carried, and sealed into a memory file here.
    let native = crate::template::sealed_native()
        .map(drop)
        .map_err(|e| e.to_string());
    let mut namespaces = serde_json::Map::new();
    for (name, r) in &ns {
        namespaces.insert((*name).to_string(), outcome(r));
    }
    let report = serde_json::json!({
        "launcher_version": env!("CARGO_PKG_VERSION"),
        "landlock_abi": landlock.as_ref().ok(),
        "landlock_error": landlock.as_ref().err().map(|e| e.to_string()),
        "required_landlock_abi": autotool_policy::launch::MIN_LANDLOCK_ABI,
        "seccomp_filter": seccomp,
        "mdwe": mdwe,
        "file_capabilities": file_caps,
        "root": root,
        "user_namespace": outcome(&user_ns),
        "namespaces": namespaces,
        "native": outcome(&native),
    });
    println!("{report}");
    0
}
