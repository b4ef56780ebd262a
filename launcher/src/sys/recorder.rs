//! [`Recorder`]: the recording twin of [`super::RealSys`], for unit tests.
//!
//! Every call that changes something is appended to [`Recorder::ops`], in order; a call can be
//! made to fail with an errno ([`Recorder::fail_when`]), and is then recorded as attempted.
//! Queries are answered from a small model of one process: its ids, its capability sets (which
//! raise, drop, clear and set change, with the kernel's rules that only a permitted capability
//! can become effective and that leaving uid 0 empties the effective set, and the permitted
//! one unless `PR_SET_KEEPCAPS` was set), the children its forks return and the statuses its
//! waits collect.
//!
//! A scripted fork returns [`Forked::Parent`] unless told otherwise: code under test that
//! `_exit`s in the child branch must only ever see the parent's side here.

use super::{Attrs, CapSet, Caps, Forked, Fs, Op, Prctl, Source, Sys};
use autotool_policy::RlimitResource;
use caps::Capability;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::Path;

type Predicate = Box<dyn Fn(&Op) -> bool>;

/// Records the calls instead of making them.
pub struct Recorder {
    /// Every change asked for, in order (failed ones included).
    pub ops: Vec<Op>,
    pub euid: u32,
    pub egid: u32,
    pub uid: u32,
    pub pid: i32,
    pub parent_pid: i32,
    /// The capability sets of the modelled process.
    pub caps: HashMap<CapSet, Caps>,
    /// What the kernel supports, in number order.
    pub supported: Vec<Capability>,
    /// What the next forks return; when empty, a parent with a fresh pid.
    pub forks: VecDeque<Forked>,
    /// What the next waits collect: (pid, raw status); when empty, `ECHILD`.
    pub waits: VecDeque<(i32, i32)>,
    next_pid: i32,
    keep_caps: bool,
    failures: Vec<(Predicate, i32)>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("ops", &self.ops)
            .field("euid", &self.euid)
            .field("caps", &self.caps)
            .field("failures", &self.failures.len())
            .finish_non_exhaustive()
    }
}

impl Default for Recorder {
    /// An unprivileged user (1000) holding no capability, with parent 1.
    fn default() -> Self {
        let mut supported: Vec<Capability> = caps::all().into_iter().collect();
        supported.sort_by_key(Capability::index);
        Recorder {
            ops: Vec::new(),
            euid: 1000,
            egid: 1000,
            uid: 1000,
            pid: 4242,
            parent_pid: 1,
            caps: HashMap::new(),
            supported,
            forks: VecDeque::new(),
            waits: VecDeque::new(),
            next_pid: 5000,
            keep_caps: false,
            failures: Vec::new(),
        }
    }
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Recorder {
    /// Root (uid and gid 0) with every capability in each set but ambient, as after `sudo`.
    pub fn root() -> Self {
        let mut rec = Recorder::default();
        (rec.euid, rec.egid, rec.uid) = (0, 0, 0);
        let all: Caps = rec.supported.iter().copied().collect();
        for set in [CapSet::Bounding, CapSet::Permitted, CapSet::Effective] {
            rec.caps.insert(set, all.clone());
        }
        rec
    }

    /// Make every call for which `when` holds fail with `errno`.
    pub fn fail_when(mut self, when: impl Fn(&Op) -> bool + 'static, errno: i32) -> Self {
        self.failures.push((Box::new(when), errno));
        self
    }

    /// Give the modelled process `caps` in `set`.
    pub fn with_caps(mut self, set: CapSet, caps: &[Capability]) -> Self {
        self.caps
            .entry(set)
            .or_default()
            .extend(caps.iter().copied());
        self
    }

    /// The capabilities in `set`, sorted by number.
    pub fn caps_in(&self, set: CapSet) -> Vec<Capability> {
        let mut v: Vec<Capability> = self
            .caps
            .get(&set)
            .map(|c| c.iter().copied().collect())
            .unwrap_or_default();
        v.sort_by_key(Capability::index);
        v
    }

    fn record(&mut self, op: Op) -> io::Result<()> {
        let failure = self
            .failures
            .iter()
            .find(|(when, _)| when(&op))
            .map(|(_, errno)| *errno);
        self.ops.push(op);
        match failure {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        }
    }

    fn set_mut(&mut self, set: CapSet) -> &mut Caps {
        self.caps.entry(set).or_default()
    }
}

impl Sys for Recorder {
    fn make_private(&mut self) -> io::Result<()> {
        self.record(Op::MakePrivate)
    }
    fn mount(&mut self, fs: &Fs, target: &Path, attrs: Attrs) -> io::Result<()> {
        self.record(Op::Mount {
            fs: fs.clone(),
            target: s(target),
            attrs,
        })
    }
    fn mkdir_all(&mut self, path: &Path) -> io::Result<()> {
        self.record(Op::MkdirAll(s(path)))
    }
    fn create_file(&mut self, path: &Path, contents: &[u8]) -> io::Result<()> {
        self.record(Op::CreateFile {
            path: s(path),
            contents: String::from_utf8_lossy(contents).into_owned(),
        })
    }
    fn symlink(&mut self, target: &Path, link: &Path) -> io::Result<()> {
        self.record(Op::Symlink {
            target: s(target),
            link: s(link),
        })
    }
    fn bind(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()> {
        self.record(Op::Bind {
            source: s(source.path),
            target: s(target),
        })
    }
    fn bind_one(&mut self, source: &Source<'_>, target: &Path) -> io::Result<()> {
        self.record(Op::BindOne {
            source: s(source.path),
            target: s(target),
        })
    }
    fn overlay(&mut self, source: &Source<'_>, target: &Path, attrs: Attrs) -> io::Result<()> {
        self.record(Op::Overlay {
            source: s(source.path),
            target: s(target),
            attrs,
        })
    }
    fn set_attrs(&mut self, target: &Path, attrs: Attrs, recursive: bool) -> io::Result<()> {
        self.record(Op::SetAttrs {
            target: s(target),
            attrs,
            recursive,
        })
    }
    fn pivot_root(&mut self, new_root: &Path) -> io::Result<()> {
        self.record(Op::PivotRoot(s(new_root)))
    }

    fn euid(&mut self) -> u32 {
        self.euid
    }
    fn egid(&mut self) -> u32 {
        self.egid
    }
    fn uid(&mut self) -> u32 {
        self.uid
    }
    fn pid(&mut self) -> i32 {
        self.pid
    }
    fn parent_pid(&mut self) -> i32 {
        self.parent_pid
    }

    fn unshare(&mut self, flags: i32) -> io::Result<()> {
        self.record(Op::Unshare(flags))
    }
    fn write_id_map(&mut self, pid: i32, file: &'static str, contents: &str) -> io::Result<()> {
        self.record(Op::IdMap {
            pid,
            file,
            contents: contents.to_string(),
        })
    }
    fn clear_groups(&mut self) -> io::Result<()> {
        self.record(Op::ClearGroups)
    }
    fn set_gid(&mut self, gid: u32) -> io::Result<()> {
        self.record(Op::SetGid(gid))?;
        self.egid = gid;
        Ok(())
    }
    fn set_uid(&mut self, uid: u32) -> io::Result<()> {
        self.record(Op::SetUid(uid))?;
        // Leaving uid 0 empties the effective set, and the permitted one too unless
        // PR_SET_KEEPCAPS was set (capabilities(7)).
        if self.euid == 0 && uid != 0 {
            self.set_mut(CapSet::Effective).clear();
            if !self.keep_caps {
                self.set_mut(CapSet::Permitted).clear();
            }
        }
        self.uid = uid;
        self.euid = uid;
        Ok(())
    }

    fn prctl(&mut self, option: Prctl) -> io::Result<()> {
        self.record(Op::Prctl(option))?;
        if option == Prctl::KeepCaps {
            self.keep_caps = true;
        }
        Ok(())
    }
    fn caps_read(&mut self, set: CapSet) -> io::Result<Caps> {
        Ok(self.caps.get(&set).cloned().unwrap_or_default())
    }
    fn caps_raise(&mut self, set: CapSet, cap: Capability) -> io::Result<()> {
        self.record(Op::CapRaise(set, cap))?;
        let permitted = self.caps.get(&CapSet::Permitted);
        if set == CapSet::Effective && !permitted.is_some_and(|p| p.contains(&cap)) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        self.set_mut(set).insert(cap);
        Ok(())
    }
    fn caps_drop(&mut self, set: CapSet, cap: Capability) -> io::Result<()> {
        self.record(Op::CapDrop(set, cap))?;
        self.set_mut(set).remove(&cap);
        Ok(())
    }
    fn caps_clear(&mut self, set: CapSet) -> io::Result<()> {
        self.record(Op::CapClear(set))?;
        self.set_mut(set).clear();
        if set == CapSet::Permitted {
            // The kernel keeps effective within permitted.
            self.set_mut(CapSet::Effective).clear();
        }
        Ok(())
    }
    fn caps_set(&mut self, set: CapSet, caps: &Caps) -> io::Result<()> {
        let mut sorted: Vec<Capability> = caps.iter().copied().collect();
        sorted.sort_by_key(Capability::index);
        self.record(Op::CapSetTo(set, sorted))?;
        let permitted = self
            .caps
            .get(&CapSet::Permitted)
            .cloned()
            .unwrap_or_default();
        if set == CapSet::Effective && !caps.is_subset(&permitted) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        *self.set_mut(set) = caps.clone();
        Ok(())
    }
    fn caps_supported(&mut self) -> Vec<Capability> {
        self.supported.clone()
    }
    fn set_rlimit(&mut self, resource: RlimitResource, value: u64) -> io::Result<()> {
        self.record(Op::Rlimit(resource, value))
    }

    fn setsid(&mut self) -> io::Result<()> {
        self.record(Op::Setsid)
    }
    fn fork(&mut self) -> io::Result<Forked> {
        self.record(Op::Fork)?;
        Ok(self.forks.pop_front().unwrap_or_else(|| {
            self.next_pid += 1;
            Forked::Parent(self.next_pid)
        }))
    }
    fn wait(&mut self, pid: i32) -> io::Result<i32> {
        self.record(Op::Wait(pid))?;
        match self.waits.pop_front() {
            Some((_, status)) => Ok(status),
            None => Err(io::Error::from_raw_os_error(libc::ECHILD)),
        }
    }
    fn wait_any(&mut self) -> io::Result<(i32, i32)> {
        self.record(Op::WaitAny)?;
        self.waits
            .pop_front()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ECHILD))
    }
    fn kill(&mut self, pid: i32, signal: i32) -> io::Result<()> {
        self.record(Op::Kill(pid, signal))
    }
    fn close_fds(&mut self, keep: &[i32]) -> io::Result<()> {
        let mut keep = keep.to_vec();
        keep.sort_unstable();
        self.record(Op::CloseFds(keep))
    }
}
