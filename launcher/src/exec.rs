//! The last step: exec of the interpreter binary, never a `PATH` lookup and never a script.

use crate::error::{LaunchError, last};
use autotool_policy::Plan;
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The 128-bit value that lets exactly one `execve` through the seccomp filter.
#[derive(Debug)]
pub struct Cookie(pub [u64; 2]);

impl Cookie {
    pub fn new() -> Result<Self, LaunchError> {
        let mut buf = [0u8; 16];
        // SAFETY: buf is valid for 16 bytes of writes.
        let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n != 16 {
            return Err(LaunchError::Io {
                what: "getrandom",
                source: last(),
            });
        }
        let (a, b) = buf.split_at(8);
        let word = |s: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(s);
            u64::from_ne_bytes(w)
        };
        // A zero word would match a plain execve's unused registers.
        Ok(Cookie([word(a) | 1, word(b) | 1]))
    }
}

/// What to exec, checked and converted before the filter is installed.
#[derive(Debug)]
pub struct Target {
    path: PathBuf,
    c_path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

fn c(bytes: &[u8]) -> Result<CString, LaunchError> {
    CString::new(bytes).map_err(|_| LaunchError::Io {
        what: "argument or environment holds a NUL",
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    })
}

impl Target {
    /// Check (inside the new root) that the interpreter is an ELF binary, and build the vectors.
    pub fn prepare(plan: &Plan) -> Result<Self, LaunchError> {
        let path = plan.exec_path.clone();
        let bad = |why: String| LaunchError::Interpreter {
            path: path.clone(),
            why,
        };
        let mut file = std::fs::File::open(&path)
            .map_err(|e| bad(format!("cannot be opened inside the sandbox: {e}")))?;
        let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("is not a regular file".into()));
        }
        let mut magic = [0u8; 4];
        file.read_exact(&mut magic)
            .map_err(|e| bad(format!("cannot be read: {e}")))?;
        if &magic != b"\x7fELF" {
            return Err(bad(
                "is not an ELF binary (a script or shim cannot be run in the sandbox)".into(),
            ));
        }
        let argv = plan
            .argv
            .iter()
            .map(|a| c(a.as_bytes()))
            .collect::<Result<_, _>>()?;
        let envp = plan
            .env
            .iter()
            .map(|(k, v)| c(format!("{k}={v}").as_bytes()))
            .collect::<Result<_, _>>()?;
        Ok(Target {
            c_path: c(path.as_os_str().as_bytes())?,
            path,
            argv,
            envp,
        })
    }

    /// Exec with the cookie. Returns only on failure.
    pub fn exec(&self, cookie: &Cookie) -> LaunchError {
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = self.envp.iter().map(|e| e.as_ptr()).collect();
        envp.push(std::ptr::null());
        // SAFETY: path, argv and envp are NUL-terminated strings and null-terminated arrays that
        // outlive the call; the two extra arguments are ignored by the kernel's execve and only
        // read by the seccomp filter.
        unsafe {
            libc::syscall(
                libc::SYS_execve,
                self.c_path.as_ptr(),
                argv.as_ptr(),
                envp.as_ptr(),
                cookie.0[0],
                cookie.0[1],
            )
        };
        LaunchError::Exec {
            path: self.path.clone(),
            source: last(),
        }
    }
}
