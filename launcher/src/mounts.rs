//! The tool's filesystem: a fresh tmpfs root assembled from the plan's mount steps, sealed
//! read-only, then entered with `pivot_root`.
//!
//! Every host object to be bound is opened (`O_PATH`) before any namespace exists, with the
//! invoking user's full view of the host; the binds then go through those descriptors. This is
//! what lets a launcher started by root run the tool as `nobody` and still mount a runtime that
//! lives under `/root`.
//!
//! The tool's directory, the runtime and the packages layer are shown through read-only
//! overlays whose layers are named by descriptor, so the tool's mount table holds no host path
//! of theirs (a bind's entry names its source's path on its file system, a user's home among
//! it).
//!
//! A directory of the user's the tool was granted is opened with `openat2` refusing every
//! symlink on its path (`RESOLVE_NO_SYMLINKS`, `RESOLVE_NO_MAGICLINKS`), in the launcher's new
//! mount namespace and before it leaves the invoking user's ids, and must then be the very
//! directory granted (same device and inode): a path swapped for a symlink, or another
//! directory moved into its place, since the grant stops the launch. It is bound from that
//! descriptor, alone (mounts below it stay out), at its own path after everything the sandbox
//! mounts itself, read-only unless granted for writing, always nosuid, nodev and noexec.
//!
//! The fresh `/proc` is read-only, and the host-wide files and directories the plan masks are
//! hidden behind an empty read-only view of `/dev/null` or an empty read-only tmpfs (those the
//! kernel lacks are skipped). The four device nodes are read-only binds: a device node opens for
//! writing on a read-only mount, but its timestamps and mode cannot be changed through one.

use crate::error::LaunchError;
use crate::sys::{Attrs, Fs, Source, Sys};
use autotool_policy::{Mount, Plan};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the new root is assembled before `pivot_root` (only in the tool's mount namespace).
pub const STAGE: &str = "/tmp";
/// Size of the root tmpfs: it holds only mount points and a few small files.
const ROOT_BYTES: u64 = 1 << 20;
/// Size of the `/dev` tmpfs.
const DEV_BYTES: u64 = 64 << 10;
/// Size of the empty tmpfs that hides a directory of `/proc`.
const MASK_DIR_BYTES: u64 = 4096;
/// The host node a masked file is replaced by: an empty read-only view of it reads as nothing.
pub const MASK_SOURCE: &str = "/dev/null";

/// Largest host file that is copied into the root rather than bind-mounted.
const COPY_LIMIT: u64 = 1 << 20;

/// What a host path turned out to be.
#[derive(Debug)]
enum Host {
    Dir(OwnedFd),
    File(OwnedFd),
    /// A small regular file to be bound without exec: its contents, copied into the root
    /// instead. Once the root is sealed the view is the same read-only file, for one write
    /// instead of a mount and a `mount_setattr`.
    Contents(Vec<u8>),
}

/// Host objects the plan binds, opened up front.
#[derive(Debug, Default)]
pub struct HostSources {
    opened: BTreeMap<PathBuf, Host>,
    symlinks: BTreeMap<PathBuf, PathBuf>,
    /// The user's granted directories, each checked to be the one granted.
    user_dirs: BTreeMap<PathBuf, OwnedFd>,
}

/// `struct open_how` of `openat2(2)` (libc's is not constructible outside it).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Open the directory at `path` (`O_PATH`) following no symlink anywhere on the path.
fn open_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("path holds a NUL"))?;
    let how = OpenHow {
        // No O_NOFOLLOW: with O_PATH it would open a final symlink itself (then refused as
        // not a directory); RESOLVE_NO_SYMLINKS refuses it, like every other, with ELOOP.
        flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: c is a valid C string and how a valid struct open_how of the size passed; the
    // call only opens a descriptor.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor (it fits an int, as every descriptor does) and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The device and inode of an open descriptor.
fn identity(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fd is open (O_PATH descriptors may be fstat'ed) and st has room for a stat.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded and filled st.
    let st = unsafe { st.assume_init() };
    Ok((st.st_dev, st.st_ino))
}

/// Open a granted directory of the user's: no symlink followed on its path, and it must be
/// the directory granted (`dev`, `ino`).
pub fn open_user_dir(path: &Path, dev: u64, ino: u64) -> Result<OwnedFd, LaunchError> {
    let changed = |why| LaunchError::UserDirChanged {
        path: path.to_path_buf(),
        why,
    };
    let fd = open_no_symlinks(path).map_err(|source| match source.raw_os_error() {
        Some(libc::ELOOP) => changed("a part of its path is a symbolic link now"),
        Some(libc::ENOENT) => changed("it no longer exists"),
        Some(libc::ENOTDIR) => changed("it, or a part of its path, is no longer a directory"),
        // A magic link (`/proc/…/root`) on the path: never the canonical path granted.
        Some(libc::EXDEV) => changed("its path crosses a /proc link now"),
        _ => LaunchError::UserDirOpen {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let found = identity(&fd).map_err(|source| LaunchError::UserDirOpen {
        path: path.to_path_buf(),
        source,
    })?;
    if found != (dev, ino) {
        return Err(changed(
            "its path names another directory now (device and inode differ)",
        ));
    }
    Ok(fd)
}

fn open_path(path: &Path) -> io::Result<Option<Host>> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("path holds a NUL"))?;
    // SAFETY: c is a valid C string; O_PATH opens no file contents.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return if err.raw_os_error() == Some(libc::ENOENT) {
            Ok(None)
        } else {
            Err(err)
        };
    }
    // SAFETY: fd is fresh and ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let meta = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    Ok(Some(if meta.is_dir() {
        Host::Dir(fd)
    } else {
        Host::File(fd)
    }))
}

/// The contents of a small regular file, read through its `O_PATH` descriptor.
fn small_contents(fd: &OwnedFd) -> Option<Vec<u8>> {
    use std::io::Read;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > COPY_LIMIT {
        return None;
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(&path)
        .ok()?
        .take(COPY_LIMIT + 1)
        .read_to_end(&mut buf)
        .ok()?;
    (buf.len() as u64 <= COPY_LIMIT).then_some(buf)
}

impl HostSources {
    /// Open every bind source and read every host symlink the plan mentions.
    pub fn open(plan: &Plan) -> Result<Self, LaunchError> {
        let mut me = HostSources::default();
        let fail = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LaunchError::OpenSource { path, source }
        };
        for m in &plan.mounts {
            match m {
                Mount::Bind { source, exec, .. } => {
                    if let Some(mut h) = open_path(source).map_err(fail(source))? {
                        if let (Host::File(fd), false) = (&h, exec)
                            && let Some(bytes) = small_contents(fd)
                        {
                            h = Host::Contents(bytes);
                        }
                        me.opened.insert(source.clone(), h);
                    }
                }
                Mount::HostSymlink { path } => {
                    if let Ok(meta) = std::fs::symlink_metadata(path)
                        && meta.file_type().is_symlink()
                    {
                        let target = std::fs::read_link(path).map_err(fail(path))?;
                        me.symlinks.insert(path.clone(), target);
                    }
                }
                Mount::Dev { target: _, nodes } => {
                    for node in nodes {
                        me.open_required(&Path::new("/dev").join(node))?;
                    }
                }
                Mount::Layer { source, .. } => me.open_required(source)?,
                Mount::MaskFile { .. } => me.open_required(Path::new(MASK_SOURCE))?,
                Mount::UserDir { path, dev, ino, .. } => {
                    let fd = open_user_dir(path, *dev, *ino)?;
                    me.user_dirs.insert(path.clone(), fd);
                }
                _ => {}
            }
        }
        Ok(me)
    }

    /// Open a host object that must exist, once.
    fn open_required(&mut self, path: &Path) -> Result<(), LaunchError> {
        if self.opened.contains_key(path) {
            return Ok(());
        }
        let fail = |source| LaunchError::OpenSource {
            path: path.to_path_buf(),
            source,
        };
        match open_path(path).map_err(fail)? {
            Some(h) => {
                self.opened.insert(path.to_path_buf(), h);
                Ok(())
            }
            None => Err(fail(io::Error::from_raw_os_error(libc::ENOENT))),
        }
    }

    /// For tests: pretend `dirs` are directories, `files` files and `links` symlinks.
    pub fn fake(dirs: &[&str], files: &[&str], links: &[(&str, &str)]) -> Self {
        let mut me = HostSources::default();
        for (paths, dir) in [(dirs, true), (files, false)] {
            for p in paths {
                // Any open descriptor will do: the recorder never uses it.
                if let Ok(f) = std::fs::File::open("/") {
                    let fd = OwnedFd::from(f);
                    me.opened.insert(
                        PathBuf::from(p),
                        if dir { Host::Dir(fd) } else { Host::File(fd) },
                    );
                }
            }
        }
        for (l, t) in links {
            me.symlinks.insert(PathBuf::from(l), PathBuf::from(t));
        }
        me
    }

    /// For tests: pretend the granted directory `path` was opened and found unchanged.
    pub fn with_user_dir(mut self, path: &str) -> Self {
        if let Ok(f) = std::fs::File::open("/") {
            self.user_dirs.insert(PathBuf::from(path), OwnedFd::from(f));
        }
        self
    }

    /// For tests: pretend `path` is a small regular file with `bytes`, to be copied.
    pub fn with_contents(mut self, path: &str, bytes: &[u8]) -> Self {
        self.opened
            .insert(PathBuf::from(path), Host::Contents(bytes.to_vec()));
        self
    }

    fn get(&self, path: &Path) -> Option<(&Host, Source<'_>)> {
        self.opened.get_key_value(path).map(|(p, h)| {
            let fd = match h {
                Host::Dir(fd) | Host::File(fd) => fd.as_raw_fd(),
                Host::Contents(_) => -1,
            };
            (h, Source { path: p, fd })
        })
    }

    /// Bytes copied into the root.
    fn copied_bytes(&self) -> u64 {
        self.opened
            .values()
            .map(|h| match h {
                Host::Contents(b) => b.len() as u64,
                _ => 0,
            })
            .sum()
    }
}

fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// How the device nodes and the masks over `/proc` files are mounted: read-only (so neither
/// `utime` nor `chmod` reaches the host's node; a device node on a read-only mount still opens
/// for writing), noexec, nosuid, device access kept.
pub const DEVICE: Attrs = Attrs {
    read_only: true,
    noexec: true,
    nosuid: true,
    nodev: false,
};

/// Whether a mount failed only because its target does not exist (an optional mask).
fn absent(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::ENOENT)
}

/// Build the root below [`STAGE`] and pivot into it.
pub fn build_root(
    plan: &Plan,
    sources: &HostSources,
    sys: &mut dyn Sys,
) -> Result<(), LaunchError> {
    let root = Path::new(STAGE);
    let step = |step: &'static str, target: &Path| {
        let target = target.to_path_buf();
        move |source| LaunchError::Mount {
            step,
            target,
            source,
        }
    };
    let sealed = Attrs {
        read_only: false,
        noexec: true,
        nosuid: true,
        nodev: true,
    };
    sys.make_private().map_err(LaunchError::MountPrivate)?;
    sys.mount(
        &Fs::Tmpfs {
            size_bytes: ROOT_BYTES + sources.copied_bytes(),
            mode: 0o755,
        },
        root,
        sealed,
    )
    .map_err(step("root tmpfs", root))?;

    let mut linked = BTreeSet::new();
    for m in &plan.mounts {
        match m {
            Mount::HostSymlink { path } => {
                if let Some(target) = sources.symlinks.get(path) {
                    let link = inside(root, path);
                    sys.symlink(target, &link).map_err(step("symlink", path))?;
                    linked.insert(path.clone());
                }
            }
            Mount::Bind {
                source,
                target,
                exec,
                optional,
            } => {
                if linked.contains(target) {
                    continue;
                }
                let Some((host, src)) = sources.get(source) else {
                    if *optional {
                        continue;
                    }
                    return Err(LaunchError::OpenSource {
                        path: source.clone(),
                        source: io::Error::from_raw_os_error(libc::ENOENT),
                    });
                };
                let t = inside(root, target);
                match host {
                    Host::Dir(_) => sys.mkdir_all(&t),
                    Host::File(_) => sys.create_file(&t, b""),
                    Host::Contents(bytes) => {
                        sys.create_file(&t, bytes).map_err(step("copy", target))?;
                        continue;
                    }
                }
                .map_err(step("mount point", target))?;
                sys.bind(&src, &t).map_err(step("bind", target))?;
                let attrs = Attrs {
                    read_only: true,
                    noexec: !exec,
                    nosuid: true,
                    nodev: true,
                };
                sys.set_attrs(&t, attrs, true)
                    .map_err(step("read-only (recursive)", target))?;
            }
            Mount::Layer {
                source,
                target,
                exec,
            } => {
                let refuse = |errno| LaunchError::OpenSource {
                    path: source.clone(),
                    source: io::Error::from_raw_os_error(errno),
                };
                let (host, src) = sources.get(source).ok_or_else(|| refuse(libc::ENOENT))?;
                if !matches!(host, Host::Dir(_)) {
                    return Err(refuse(libc::ENOTDIR));
                }
                let t = inside(root, target);
                sys.mkdir_all(&t).map_err(step("mount point", target))?;
                let attrs = Attrs {
                    read_only: true,
                    noexec: !exec,
                    nosuid: true,
                    nodev: true,
                };
                sys.overlay(&src, &t, attrs)
                    .map_err(|e| LaunchError::Overlay {
                        path: source.clone(),
                        target: target.clone(),
                        source: e,
                    })?;
            }
            Mount::Tmpfs {
                target,
                size_bytes,
                mode,
            } => {
                let t = inside(root, target);
                sys.mkdir_all(&t).map_err(step("mount point", target))?;
                let fs = Fs::Tmpfs {
                    size_bytes: *size_bytes,
                    mode: *mode,
                };
                sys.mount(&fs, &t, sealed).map_err(step("tmpfs", target))?;
            }
            Mount::Proc { target } | Mount::WritableProc { target } => {
                let t = inside(root, target);
                sys.mkdir_all(&t).map_err(step("mount point", target))?;
                let attrs = Attrs {
                    read_only: matches!(m, Mount::Proc { .. }),
                    ..sealed
                };
                sys.mount(&Fs::Proc, &t, attrs)
                    .map_err(step("proc", target))?;
            }
            Mount::MaskFile { target } => {
                let Some((_, src)) = sources.get(Path::new(MASK_SOURCE)) else {
                    return Err(LaunchError::OpenSource {
                        path: MASK_SOURCE.into(),
                        source: io::Error::from_raw_os_error(libc::ENOENT),
                    });
                };
                let t = inside(root, target);
                match sys.bind(&src, &t) {
                    Err(e) if absent(&e) => continue,
                    other => other.map_err(step("mask", target))?,
                }
                sys.set_attrs(&t, DEVICE, false)
                    .map_err(step("mask read-only", target))?;
            }
            Mount::MaskDir { target } => {
                let t = inside(root, target);
                let fs = Fs::Tmpfs {
                    size_bytes: MASK_DIR_BYTES,
                    mode: 0o555,
                };
                let ro = Attrs {
                    read_only: true,
                    ..sealed
                };
                match sys.mount(&fs, &t, ro) {
                    Err(e) if absent(&e) => continue,
                    other => other.map_err(step("mask", target))?,
                }
            }
            Mount::Dev { target, nodes } => {
                let t = inside(root, target);
                sys.mkdir_all(&t).map_err(step("mount point", target))?;
                let fs = Fs::Tmpfs {
                    size_bytes: DEV_BYTES,
                    mode: 0o755,
                };
                sys.mount(&fs, &t, sealed)
                    .map_err(step("dev tmpfs", target))?;
                for node in nodes {
                    let host = Path::new("/dev").join(node);
                    let Some((_, src)) = sources.get(&host) else {
                        return Err(LaunchError::OpenSource {
                            path: host,
                            source: io::Error::from_raw_os_error(libc::ENOENT),
                        });
                    };
                    let n = t.join(node);
                    sys.create_file(&n, b"")
                        .map_err(step("device node", &host))?;
                    sys.bind(&src, &n).map_err(step("device bind", &host))?;
                    sys.set_attrs(&n, DEVICE, false)
                        .map_err(step("device flags", &host))?;
                }
                for (name, to) in [
                    ("fd", "/proc/self/fd"),
                    ("stdin", "/proc/self/fd/0"),
                    ("stdout", "/proc/self/fd/1"),
                    ("stderr", "/proc/self/fd/2"),
                ] {
                    sys.symlink(Path::new(to), &t.join(name))
                        .map_err(step("dev symlink", target))?;
                }
                let ro = Attrs {
                    read_only: true,
                    ..sealed
                };
                sys.set_attrs(&t, ro, false)
                    .map_err(step("dev read-only", target))?;
            }
            Mount::File { target, contents } => {
                let t = inside(root, target);
                sys.create_file(&t, contents.as_bytes())
                    .map_err(step("file", target))?;
            }
            Mount::UserDir { path, write, .. } => {
                let fail = |step| {
                    move |source| LaunchError::UserDirMount {
                        path: path.clone(),
                        step,
                        source,
                    }
                };
                let fd = sources
                    .user_dirs
                    .get(path)
                    .ok_or_else(|| fail("open")(io::Error::from_raw_os_error(libc::EBADF)))?;
                let src = Source {
                    path,
                    fd: fd.as_raw_fd(),
                };
                let t = inside(root, path);
                sys.mkdir_all(&t).map_err(fail("mount point"))?;
                sys.bind_one(&src, &t).map_err(fail("bind"))?;
                let attrs = Attrs {
                    read_only: !write,
                    noexec: true,
                    nosuid: true,
                    nodev: true,
                };
                sys.set_attrs(&t, attrs, false).map_err(fail("flags"))?;
            }
        }
    }
    let ro = Attrs {
        read_only: true,
        ..sealed
    };
    sys.set_attrs(root, ro, false)
        .map_err(step("root read-only", root))?;
    sys.pivot_root(root).map_err(LaunchError::PivotRoot)?;
    Ok(())
}

#[cfg(test)]
mod tests;
