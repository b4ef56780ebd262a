//! [`RealSys`]: the system calls themselves.

use super::{Attrs, CapSet, Caps, Forked, Fs, Prctl, Source, Sys};
use crate::error::last;
use autotool_policy::RlimitResource;
use caps::Capability;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Performs the calls.
#[derive(Debug, Default)]
pub struct RealSys;

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("path holds a NUL"))
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 { Err(last()) } else { Ok(()) }
}

fn check_int(rc: libc::c_int) -> io::Result<()> {
    check(libc::c_long::from(rc))
}

fn flags(attrs: Attrs) -> libc::c_ulong {
    let mut f = 0;
    if attrs.read_only {
        f |= libc::MS_RDONLY;
    }
    if attrs.noexec {
        f |= libc::MS_NOEXEC;
    }
    if attrs.nosuid {
        f |= libc::MS_NOSUID;
    }
    if attrs.nodev {
        f |= libc::MS_NODEV;
    }
    f
}

fn capset(set: CapSet) -> caps::CapSet {
    match set {
        CapSet::Bounding => caps::CapSet::Bounding,
        CapSet::Ambient => caps::CapSet::Ambient,
        CapSet::Inheritable => caps::CapSet::Inheritable,
        CapSet::Effective => caps::CapSet::Effective,
        CapSet::Permitted => caps::CapSet::Permitted,
    }
}

fn caps_error(e: caps::errors::CapsError) -> io::Error {
    io::Error::other(e.to_string())
}

fn resource(r: RlimitResource) -> libc::__rlimit_resource_t {
    match r {
        RlimitResource::AddressSpace => libc::RLIMIT_AS,
        RlimitResource::Threads => libc::RLIMIT_NPROC,
        RlimitResource::OpenFiles => libc::RLIMIT_NOFILE,
        RlimitResource::FileSize => libc::RLIMIT_FSIZE,
        RlimitResource::Cpu => libc::RLIMIT_CPU,
        RlimitResource::Core => libc::RLIMIT_CORE,
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

const PR_SET_MDWE: libc::c_int = 65;
const PR_MDWE_REFUSE_EXEC_GAIN: libc::c_ulong = 1;

/// Bind the object `source.fd` names (through its `/proc/self/fd` link, which the kernel
/// resolves to the opened object itself, never to a path looked up again) at `target`.
fn bind_from_fd(source: &Source<'_>, target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let s = CString::new(format!("/proc/self/fd/{}", source.fd))
        .map_err(|_| io::Error::other("fd path"))?;
    let t = cstr(target)?;
    // SAFETY: valid C strings; a bind mount ignores the type and data arguments.
    check_int(unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
}

impl Sys for RealSys {
    fn make_private(&mut self) -> io::Result<()> {
        // SAFETY: every pointer is a valid C string or null, as mount(2) allows for a
        // propagation change.
        check_int(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })
    }

    fn mount(&mut self, fs: &Fs, target: &Path, attrs: Attrs) -> io::Result<()> {
        let t = cstr(target)?;
        let (ty, data) = match fs {
            Fs::Tmpfs { size_bytes, mode } => {
                (c"tmpfs", format!("size={size_bytes},mode={mode:o}"))
            }
            Fs::Proc => (c"proc", String::new()),
        };
        let data = CString::new(data).map_err(|_| io::Error::other("mount data holds a NUL"))?;
        // SAFETY: all pointers are valid NUL-terminated strings that outlive the call.
        check_int(unsafe {
            libc::mount(
                ty.as_ptr(),
                t.as_ptr(),
                ty.as_ptr(),
                flags(attrs),
                data.as_ptr().cast(),
            )
        })
    }

    fn mkdir_all(&mut self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn create_file(&mut self, path: &Path, contents: &[u8]) -> io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, contents)
    }

    fn symlink(&mut self, target: &Path, link: &Path) -> io::Result<()> {
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(target, link)
    }

    fn bind(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()> {
        bind_from_fd(source, target, libc::MS_BIND | libc::MS_REC)
    }

    fn bind_one(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()> {
        bind_from_fd(source, target, libc::MS_BIND)
    }

    fn overlay(&mut self, source: &Source<'_>, target: &Path, attrs: Attrs) -> io::Result<()> {
        let t = cstr(target)?;
        // SAFETY: t is a valid C string; O_PATH opens no file contents.
        let below = unsafe {
            libc::open(
                t.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if below < 0 {
            return Err(last());
        }
        // SAFETY: the descriptor is fresh and ours; dropping it closes it after the mount.
        let below = unsafe { OwnedFd::from_raw_fd(below) };
        // The layers are named through this process's descriptors, so that is all the mount
        // table shows of them. Redirects and metacopy stay off: nothing in a layer can point
        // the overlay elsewhere.
        let data = CString::new(format!(
            "lowerdir=/proc/self/fd/{}:/proc/self/fd/{},redirect_dir=nofollow,metacopy=off",
            source.fd,
            below.as_raw_fd()
        ))
        .map_err(|_| io::Error::other("overlay options"))?;
        // SAFETY: all pointers are valid NUL-terminated strings that outlive the call.
        check_int(unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                t.as_ptr(),
                c"overlay".as_ptr(),
                flags(attrs),
                data.as_ptr().cast(),
            )
        })
    }

    fn set_attrs(&mut self, target: &Path, attrs: Attrs, recursive: bool) -> io::Result<()> {
        let t = cstr(target)?;
        let mut set = 0;
        if attrs.read_only {
            set |= MOUNT_ATTR_RDONLY;
        }
        if attrs.nosuid {
            set |= MOUNT_ATTR_NOSUID;
        }
        if attrs.nodev {
            set |= MOUNT_ATTR_NODEV;
        }
        if attrs.noexec {
            set |= MOUNT_ATTR_NOEXEC;
        }
        let attr = MountAttr {
            attr_set: set,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let mut flags = libc::AT_SYMLINK_NOFOLLOW as libc::c_uint;
        if recursive {
            flags |= libc::AT_RECURSIVE as libc::c_uint;
        }
        // SAFETY: t is a valid C string and attr a valid struct mount_attr of the given size.
        check(unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                t.as_ptr(),
                flags,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        })
    }

    fn pivot_root(&mut self, new_root: &Path) -> io::Result<()> {
        std::env::set_current_dir(new_root)?;
        // SAFETY: "." is a valid C string; pivot_root(".", ".") stacks the old root beneath
        // the new one, which is then detached.
        unsafe {
            check(libc::syscall(
                libc::SYS_pivot_root,
                c".".as_ptr(),
                c".".as_ptr(),
            ))?;
            check_int(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))?;
        }
        std::env::set_current_dir("/")
    }

    fn euid(&mut self) -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    fn egid(&mut self) -> u32 {
        // SAFETY: getegid has no preconditions.
        unsafe { libc::getegid() }
    }

    fn uid(&mut self) -> u32 {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    }

    fn pid(&mut self) -> i32 {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() }
    }

    fn parent_pid(&mut self) -> i32 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() }
    }

    fn unshare(&mut self, flags: i32) -> io::Result<()> {
        // SAFETY: unshare with namespace flags only changes this process's namespaces.
        check_int(unsafe { libc::unshare(flags) })
    }

    fn write_id_map(&mut self, pid: i32, file: &'static str, contents: &str) -> io::Result<()> {
        std::fs::write(format!("/proc/{pid}/{file}"), contents)
    }

    fn clear_groups(&mut self) -> io::Result<()> {
        // SAFETY: an empty group list with a null pointer is valid for setgroups.
        check_int(unsafe { libc::setgroups(0, std::ptr::null()) })
    }

    fn set_gid(&mut self, gid: u32) -> io::Result<()> {
        // SAFETY: setresgid takes plain ids.
        check_int(unsafe { libc::setresgid(gid, gid, gid) })
    }

    fn set_uid(&mut self, uid: u32) -> io::Result<()> {
        // SAFETY: setresuid takes plain ids.
        check_int(unsafe { libc::setresuid(uid, uid, uid) })
    }

    fn prctl(&mut self, option: Prctl) -> io::Result<()> {
        let (op, arg): (libc::c_int, libc::c_ulong) = match option {
            Prctl::NoNewPrivs => (libc::PR_SET_NO_NEW_PRIVS, 1),
            Prctl::RefuseExecGain => (PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN),
            Prctl::KeepCaps => (libc::PR_SET_KEEPCAPS, 1),
            Prctl::ParentDeathSignal(sig) => (
                libc::PR_SET_PDEATHSIG,
                libc::c_ulong::try_from(sig)
                    .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            ),
            Prctl::NotDumpable => (libc::PR_SET_DUMPABLE, 0),
        };
        // SAFETY: each of these options takes one integer argument; the others are unused
        // and passed as 0.
        check_int(unsafe { libc::prctl(op, arg, 0 as libc::c_ulong, 0 as libc::c_ulong, 0) })
    }

    fn caps_read(&mut self, set: CapSet) -> io::Result<Caps> {
        caps::read(None, capset(set)).map_err(caps_error)
    }

    fn caps_raise(&mut self, set: CapSet, cap: Capability) -> io::Result<()> {
        caps::raise(None, capset(set), cap).map_err(caps_error)
    }

    fn caps_drop(&mut self, set: CapSet, cap: Capability) -> io::Result<()> {
        caps::drop(None, capset(set), cap).map_err(caps_error)
    }

    fn caps_clear(&mut self, set: CapSet) -> io::Result<()> {
        caps::clear(None, capset(set)).map_err(caps_error)
    }

    fn caps_set(&mut self, set: CapSet, caps: &Caps) -> io::Result<()> {
        caps::set(None, capset(set), caps).map_err(caps_error)
    }

    fn caps_supported(&mut self) -> Vec<Capability> {
        let mut all: Vec<Capability> = caps::runtime::thread_all_supported().into_iter().collect();
        all.sort_by_key(Capability::index);
        all
    }

    fn set_rlimit(&mut self, r: RlimitResource, value: u64) -> io::Result<()> {
        let lim = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: lim is a valid rlimit for setrlimit to read.
        check_int(unsafe { libc::setrlimit(resource(r), &lim) })
    }

    fn setsid(&mut self) -> io::Result<()> {
        // SAFETY: setsid has no preconditions.
        check_int(unsafe { libc::setsid() })
    }

    fn fork(&mut self) -> io::Result<Forked> {
        // SAFETY: the launcher never starts a thread, so the child inherits a consistent address
        // space; glibc's fork keeps its own bookkeeping (tid, locks) right.
        match unsafe { libc::fork() } {
            -1 => Err(last()),
            0 => Ok(Forked::Child),
            pid => Ok(Forked::Parent(pid)),
        }
    }

    fn wait(&mut self, pid: i32) -> io::Result<i32> {
        waitpid(pid).map(|(_, status)| status)
    }

    fn wait_any(&mut self) -> io::Result<(i32, i32)> {
        waitpid(-1)
    }

    fn kill(&mut self, pid: i32, signal: i32) -> io::Result<()> {
        // SAFETY: kill has no memory-safety preconditions.
        check_int(unsafe { libc::kill(pid, signal) })
    }

    fn close_fds(&mut self, keep: &[i32]) -> io::Result<()> {
        crate::process::close_all_but(0, keep)
    }
}

/// `waitpid(pid, 0)`, retrying on `EINTR`.
fn waitpid(pid: i32) -> io::Result<(i32, i32)> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid int for waitpid to fill.
        let got = unsafe { libc::waitpid(pid, &mut status, 0) };
        if got > 0 {
            return Ok((got, status));
        }
        let err = last();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}
