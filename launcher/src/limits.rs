//! Resource limits: address space, threads, open files, file size, CPU seconds, no core dumps.
//! Soft and hard limits are set alike, so the tool cannot raise them again.

use crate::error::{LaunchError, last};
use autotool_policy::{Rlimit, RlimitResource};

fn resource(r: RlimitResource) -> (libc::__rlimit_resource_t, &'static str) {
    match r {
        RlimitResource::AddressSpace => (libc::RLIMIT_AS, "RLIMIT_AS (memory)"),
        RlimitResource::Threads => (libc::RLIMIT_NPROC, "RLIMIT_NPROC (threads)"),
        RlimitResource::OpenFiles => (libc::RLIMIT_NOFILE, "RLIMIT_NOFILE (open files)"),
        RlimitResource::FileSize => (libc::RLIMIT_FSIZE, "RLIMIT_FSIZE (file size)"),
        RlimitResource::Cpu => (libc::RLIMIT_CPU, "RLIMIT_CPU (CPU seconds)"),
        RlimitResource::Core => (libc::RLIMIT_CORE, "RLIMIT_CORE (core dumps)"),
    }
}

/// Set every limit of the plan. `shared_tasks` is the number of tasks that already count
/// against the thread limit because the tool shares its user id with them (only without a user
/// namespace: there the limit counts every task of the invoking user on the machine).
pub fn apply(limits: &[Rlimit], shared_tasks: u64) -> Result<(), LaunchError> {
    for l in limits {
        let (res, what) = resource(l.resource);
        let value = if l.resource == RlimitResource::Threads {
            l.value.saturating_add(shared_tasks)
        } else {
            l.value
        };
        let lim = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: lim is a valid rlimit for setrlimit to read.
        if unsafe { libc::setrlimit(res, &lim) } != 0 {
            return Err(LaunchError::Rlimit {
                what,
                source: last(),
            });
        }
    }
    Ok(())
}

/// Tasks (threads) on the machine whose real user id is `uid`, read from the host's `/proc`.
pub fn tasks_of_user(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(u64::from(uid)) {
            total += field("Threads:").unwrap_or(1);
        }
    }
    total
}
