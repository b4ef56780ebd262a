//! The Python runtime tools run on: the real interpreter binary (never a shim) and the
//! directories the sandbox must mount for it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A resolved interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Python {
    /// Path to exec inside the sandbox: inside a virtual environment, its `bin/python3` (so the
    /// environment is found), always a path whose final target is an ELF binary.
    pub interpreter: PathBuf,
    /// Directories to mount read-only with exec (prefix, base prefix), beyond the system ones.
    pub runtime_dirs: Vec<PathBuf>,
    /// `major.minor`.
    pub version: String,
}

/// Why no usable interpreter was found.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "no Python interpreter found ({0}); install python3 (3.10 or newer) or set AUTOTOOL_PYTHON"
    )]
    NotFound(String),
    #[error("{path:?} did not describe itself: {why}")]
    Query { path: PathBuf, why: String },
    #[error("Python {found} at {path:?} is too old; tools need 3.10 or newer")]
    TooOld { path: PathBuf, found: String },
    #[error(
        "{path:?} is not an ELF binary, so it cannot run in the sandbox; point AUTOTOOL_PYTHON at the real interpreter"
    )]
    NotElf { path: PathBuf },
}

/// Directories the launcher mounts anyway; a prefix below them needs no mount of its own.
const SYSTEM: [&str; 4] = ["/usr", "/lib", "/lib64", "/bin"];

const QUERY: &str = "import json, sys; print(json.dumps([sys.executable, sys.prefix, \
                     sys.base_prefix, list(sys.version_info[:2])]))";

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"\x7fELF"
}

/// Resolve `candidate`, else `$AUTOTOOL_PYTHON`, else `python3` on `PATH`. A shim (pyenv, asdf)
/// is run once, outside any sandbox, only to ask where the real interpreter is; tool code never
/// runs here.
pub fn resolve(candidate: Option<&Path>) -> Result<Python, RuntimeError> {
    let program: PathBuf = candidate
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("AUTOTOOL_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let out = Command::new(&program)
        .args(["-I", "-c", QUERY])
        .output()
        .map_err(|e| RuntimeError::NotFound(format!("{}: {e}", program.display())))?;
    if !out.status.success() {
        return Err(RuntimeError::Query {
            path: program,
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let (exe, prefix, base, ver): (PathBuf, PathBuf, PathBuf, Vec<u32>) =
        serde_json::from_slice(&out.stdout).map_err(|e| RuntimeError::Query {
            path: program.clone(),
            why: e.to_string(),
        })?;
    let version = format!(
        "{}.{}",
        ver.first().copied().unwrap_or(0),
        ver.get(1).copied().unwrap_or(0)
    );
    if ver.as_slice() < [3, 10].as_slice() {
        return Err(RuntimeError::TooOld {
            path: exe,
            found: version,
        });
    }
    let real = std::fs::canonicalize(&exe).unwrap_or_else(|_| exe.clone());
    if !is_elf(&real) {
        return Err(RuntimeError::NotElf { path: real });
    }
    let mut runtime_dirs: Vec<PathBuf> = Vec::new();
    let real_dir = real.parent().and_then(Path::parent).map(Path::to_path_buf);
    for dir in [Some(prefix), Some(base), real_dir].into_iter().flatten() {
        let covered = SYSTEM.iter().any(|s| dir.starts_with(s))
            || runtime_dirs.iter().any(|d| dir.starts_with(d));
        if !covered {
            runtime_dirs.retain(|d| !d.starts_with(&dir));
            runtime_dirs.push(dir);
        }
    }
    Ok(Python {
        interpreter: exe,
        runtime_dirs,
        version,
    })
}
