//! The launcher's probe, cached under the identity of everything it depends on (the launcher
//! binary, the boot, serve's own confinement), so `serve` pays for it once, not on every start.

use super::*;

/// Where [`probe_cached`] keeps the launcher's probe: beside autotool's other caches.
pub fn probe_cache_path(home: &crate::home::Home) -> PathBuf {
    match crate::home::user_cache_dir() {
        Some(c) => c.join("launcher-probe.json"),
        None => home.root().join("launcher-probe.json"),
    }
}

/// Everything a probe's answer depends on: the launcher file itself (its inode and times
/// change when it is rebuilt or given capabilities), the boot and kernel, the sysctls that
/// switch user namespaces off, and the confinement this process already runs under (its uid,
/// capabilities, seccomp, no_new_privs, user namespace, AppArmor profile).
fn probe_key(launcher: &Path) -> Option<serde_json::Value> {
    use std::os::unix::fs::MetadataExt;
    let real = std::fs::canonicalize(launcher).ok()?;
    let m = std::fs::metadata(&real).ok()?;
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let status = read("/proc/self/status").unwrap_or_default();
    let own: Vec<&str> = status
        .lines()
        .filter(|l| {
            [
                "Uid:",
                "CapEff:",
                "CapBnd:",
                "NoNewPrivs:",
                "Seccomp:",
                "Seccomp_filters:",
            ]
            .iter()
            .any(|k| l.starts_with(k))
        })
        .collect();
    Some(serde_json::json!({
        "launcher": [real, m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()],
        "autotool": env!("CARGO_PKG_VERSION"),
        "boot": read("/proc/sys/kernel/random/boot_id"),
        "kernel": read("/proc/sys/kernel/osrelease"),
        "sysctl": [
            read("/proc/sys/user/max_user_namespaces"),
            read("/proc/sys/kernel/unprivileged_userns_clone"),
            read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        ],
        "self": own,
        "userns": std::fs::read_link("/proc/self/ns/user").ok(),
        "apparmor": read("/proc/self/attr/current"),
    }))
}

/// The launcher's probe, from `cache` when it was made under the same [`probe_key`], else run
/// (and kept when it says the machine can confine). A probe that finds something missing is
/// never taken from the cache: the machine may have been fixed. Either way the launcher
/// itself refuses to run a tool where a feature is missing; the cache only saves `serve`'s
/// start the probe's cost.
pub fn probe_cached(launcher: &Path, cache: &Path) -> Result<Probe, launcher::LauncherError> {
    let key = probe_key(launcher);
    if let (Some(key), Ok(bytes)) = (&key, std::fs::read(cache))
        && let Ok(saved) = serde_json::from_slice::<serde_json::Value>(&bytes)
        && saved.get("key") == Some(key)
        && let Some(probe) = saved.get("probe")
        && let Ok(probe) = serde_json::from_value::<Probe>(probe.clone())
        && probe.missing().is_empty()
    {
        return Ok(probe);
    }
    let probe = launcher::probe(launcher)?;
    if let Some(key) = key
        && probe.missing().is_empty()
    {
        let saved = serde_json::json!({"key": key, "probe": probe});
        if let Some(dir) = cache.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // Written whole under another name, then renamed: a reader never sees half of it.
        let tmp = cache.with_extension(format!("json.{}", std::process::id()));
        if std::fs::write(&tmp, saved.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, cache);
        }
    }
    Ok(probe)
}
