//! Resource limits: address space, threads, open files, file size, CPU seconds, no core dumps.
//! Soft and hard limits are set alike, so the tool cannot raise them again.

use crate::error::LaunchError;
use crate::sys::Sys;
use autotool_policy::{Rlimit, RlimitResource};

fn describe(r: RlimitResource) -> &'static str {
    match r {
        RlimitResource::AddressSpace => "RLIMIT_AS (memory)",
        RlimitResource::Threads => "RLIMIT_NPROC (threads)",
        RlimitResource::OpenFiles => "RLIMIT_NOFILE (open files)",
        RlimitResource::FileSize => "RLIMIT_FSIZE (file size)",
        RlimitResource::Cpu => "RLIMIT_CPU (CPU seconds)",
        RlimitResource::Core => "RLIMIT_CORE (core dumps)",
    }
}

/// Set every limit of the plan. `shared_tasks` is the number of tasks that already count
/// against the thread limit because they share the tool's user id: the tool's init, and
/// without a user namespace every task of the invoking user on the machine (there the limit
/// counts them all).
pub fn apply(sys: &mut dyn Sys, limits: &[Rlimit], shared_tasks: u64) -> Result<(), LaunchError> {
    for l in limits {
        let value = if l.resource == RlimitResource::Threads {
            l.value.saturating_add(shared_tasks)
        } else {
            l.value
        };
        sys.set_rlimit(l.resource, value)
            .map_err(|source| LaunchError::Rlimit {
                what: describe(l.resource),
                source,
            })?;
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

#[cfg(test)]
mod tests;
