//! The privileged filesystem calls of the mount stage, behind a trait: [`RealSys`] performs them,
//! [`Recorder`] writes them down so the stage's logic is unit-tested without privileges.

use crate::error::last;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Mount attributes set with `mount_setattr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attrs {
    pub read_only: bool,
    pub noexec: bool,
    pub nosuid: bool,
    pub nodev: bool,
}

/// A kernel filesystem to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fs {
    Tmpfs { size_bytes: u64, mode: u32 },
    Proc,
}

/// One call the mount stage makes; what [`Recorder`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    MakePrivate,
    Mount {
        fs: Fs,
        target: String,
        attrs: Attrs,
    },
    MkdirAll(String),
    CreateFile {
        path: String,
        contents: String,
    },
    Symlink {
        target: String,
        link: String,
    },
    Bind {
        source: String,
        target: String,
    },
    SetAttrs {
        target: String,
        attrs: Attrs,
        recursive: bool,
    },
    PivotRoot(String),
}

/// A host object to bind: its original path (for messages and recording) and an `O_PATH`
/// descriptor opened before any namespace existed.
#[derive(Debug)]
pub struct Source<'a> {
    pub path: &'a Path,
    pub fd: i32,
}

/// The mount stage's system calls.
pub trait MountSys {
    fn make_private(&mut self) -> io::Result<()>;
    fn mount(&mut self, fs: &Fs, target: &Path, attrs: Attrs) -> io::Result<()>;
    fn mkdir_all(&mut self, path: &Path) -> io::Result<()>;
    fn create_file(&mut self, path: &Path, contents: &[u8]) -> io::Result<()>;
    fn symlink(&mut self, target: &Path, link: &Path) -> io::Result<()>;
    fn bind(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()>;
    fn set_attrs(&mut self, target: &Path, attrs: Attrs, recursive: bool) -> io::Result<()>;
    fn pivot_root(&mut self, new_root: &Path) -> io::Result<()>;
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("path holds a NUL"))
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 { Err(last()) } else { Ok(()) }
}

/// Performs the calls.
#[derive(Debug, Default)]
pub struct RealSys;

impl RealSys {
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

impl MountSys for RealSys {
    fn make_private(&mut self) -> io::Result<()> {
        // SAFETY: every pointer is a valid C string or null, as mount(2) allows for a
        // propagation change.
        check(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        } as libc::c_long)
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
        check(unsafe {
            libc::mount(
                ty.as_ptr(),
                t.as_ptr(),
                ty.as_ptr(),
                Self::flags(attrs),
                data.as_ptr().cast(),
            )
        } as libc::c_long)
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
        let s = CString::new(format!("/proc/self/fd/{}", source.fd))
            .map_err(|_| io::Error::other("fd path"))?;
        let t = cstr(target)?;
        // SAFETY: valid C strings; a bind mount ignores the type and data arguments.
        check(unsafe {
            libc::mount(
                s.as_ptr(),
                t.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        } as libc::c_long)
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
            check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH) as libc::c_long)?;
        }
        std::env::set_current_dir("/")
    }
}

/// Records the calls instead of making them.
#[derive(Debug, Default)]
pub struct Recorder {
    pub ops: Vec<Op>,
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl MountSys for Recorder {
    fn make_private(&mut self) -> io::Result<()> {
        self.ops.push(Op::MakePrivate);
        Ok(())
    }
    fn mount(&mut self, fs: &Fs, target: &Path, attrs: Attrs) -> io::Result<()> {
        self.ops.push(Op::Mount {
            fs: fs.clone(),
            target: s(target),
            attrs,
        });
        Ok(())
    }
    fn mkdir_all(&mut self, path: &Path) -> io::Result<()> {
        self.ops.push(Op::MkdirAll(s(path)));
        Ok(())
    }
    fn create_file(&mut self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.ops.push(Op::CreateFile {
            path: s(path),
            contents: String::from_utf8_lossy(contents).into_owned(),
        });
        Ok(())
    }
    fn symlink(&mut self, target: &Path, link: &Path) -> io::Result<()> {
        self.ops.push(Op::Symlink {
            target: s(target),
            link: s(link),
        });
        Ok(())
    }
    fn bind(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()> {
        self.ops.push(Op::Bind {
            source: s(source.path),
            target: s(target),
        });
        Ok(())
    }
    fn set_attrs(&mut self, target: &Path, attrs: Attrs, recursive: bool) -> io::Result<()> {
        self.ops.push(Op::SetAttrs {
            target: s(target),
            attrs,
            recursive,
        });
        Ok(())
    }
    fn pivot_root(&mut self, new_root: &Path) -> io::Result<()> {
        self.ops.push(Op::PivotRoot(s(new_root)));
        Ok(())
    }
}
