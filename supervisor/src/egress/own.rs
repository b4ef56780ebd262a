//! autotool's own listeners on this machine, which no tool ever reaches, whatever its keys'
//! allowlists say: every `serve --transport http` port, the service's configured port, and the
//! host-side proxies of unconfined tools (`--sandbox off`), whichever autotool process opened
//! them. A tool that reached one could drive autotool itself (create tools, answer questions)
//! or use another tool's proxy to go where its own keys may not.
//!
//! A port on the host's loopback is autotool's own when any of these says so, checked in this
//! order by the proxy for every loopback connection:
//! 1. [`EgressConfig::reserved_ports`](super::EgressConfig::reserved_ports), given by the caller;
//! 2. the listeners this process registered ([`register_own_listener`]);
//! 3. the service's unit (`autotool service install`): the TCP ports of its `--listen`
//!    arguments, so the service's port is refused even while the service is not running;
//! 4. the machine-wide record: every autotool process that binds a listener on loopback leaves
//!    a file in a private directory of its user ([`record_dirs`]: `$XDG_RUNTIME_DIR/autotool`
//!    and `/tmp/autotool-<uid>`, each 0700 and owned by the user, else not used), named
//!    `listener-<port>-<pid>-<start time>` and removed when the listener closes. A record whose
//!    process is gone (no such pid, or a pid reused by a process that started at another time)
//!    is stale: it is ignored and removed;
//! 5. once connected, without any record: the kernel's table of listening TCP sockets
//!    (`sock_diag` over netlink, listeners only) gives the socket on that port, and `/proc`
//!    says whether a process whose executable is `autotool` holds it (only processes this user
//!    may inspect: its own, or all of them as root). Answers are kept per socket inode, so
//!    `/proc` is walked once per new listener. Not applied to the ports of `*_API_BASE`
//!    overrides (the user's own statement that the port is an API; `autotool demo` serves its
//!    fake API from the demo process itself); the records still are.
//!
//! Unix sockets need none of this: the proxy only dials TCP, and a confined tool sees none of
//! the host's files or abstract sockets. Listeners of another user's autotool are found by
//! step 5 only when serve runs as root (a user's processes and runtime directory are private
//! to them); their serves require a token on TCP.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Most directory entries of a record directory read (a full one is a broken one).
const MAX_RECORDS: usize = 4096;
/// Most descriptors of one process looked at.
const MAX_FDS: usize = 1 << 16;
/// Most socket inodes whose owner is remembered.
const MAX_CACHED: usize = 4096;
/// Longest description read from a record.
const MAX_RECORD_TEXT: u64 = 512;
/// Longest unit file read.
const MAX_UNIT: u64 = 64 << 10;
/// The executable name of an autotool process.
const EXE_NAME: &str = "autotool";
/// The prefix of a record's file name.
const RECORD_PREFIX: &str = "listener-";

// ---------------------------------------------------------------------------------------------
// This process's listeners

/// Port → (how many registrations hold it, what the first says it is).
static OWN_PORTS: Mutex<BTreeMap<u16, (usize, String)>> = Mutex::new(BTreeMap::new());

/// Marks a port on the host's loopback as one of autotool's own listeners for as long as it is
/// held: every proxy in this process refuses it, and so does every autotool process of this
/// user, through its record.
#[derive(Debug)]
pub struct OwnListener {
    port: u16,
    record: Option<PathBuf>,
}

/// Register `port` as autotool's own (described as "an autotool listener").
pub fn register_own_listener(port: u16) -> OwnListener {
    register(port, "an autotool listener")
}

/// Register `port` as autotool's own listener, described as `what` in refusals ("autotool
/// serve --transport http", …). The machine-wide record is best effort: when no private
/// directory can be made, a warning is logged and the `/proc` check still finds the listener.
pub fn register(port: u16, what: &str) -> OwnListener {
    OWN_PORTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(port)
        .or_insert_with(|| (0, what.to_owned()))
        .0 += 1;
    let record = match write_record(port, what) {
        Ok(path) => Some(path),
        Err(e) => {
            tracing::warn!(
                port,
                "could not record port {port} as one of autotool's own listeners ({e}); other \
                 autotool processes find it through /proc instead"
            );
            None
        }
    };
    OwnListener { port, record }
}

impl Drop for OwnListener {
    fn drop(&mut self) {
        if let Some(path) = &self.record {
            let _ = fs::remove_file(path);
        }
        let mut ports = OWN_PORTS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((count, _)) = ports.get_mut(&self.port) {
            *count -= 1;
            if *count == 0 {
                ports.remove(&self.port);
            }
        }
    }
}

fn registered_here(port: u16) -> Option<String> {
    OWN_PORTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&port)
        .map(|(_, what)| what.clone())
}

// ---------------------------------------------------------------------------------------------
// The machine-wide record

/// The directories records live in, the preferred first: `$XDG_RUNTIME_DIR/autotool` (when
/// that variable is an absolute path) and `/tmp/autotool-<uid>`. Both are read, since two
/// processes of one user may not agree on `XDG_RUNTIME_DIR`.
pub(super) fn record_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && xdg.is_absolute()
    {
        dirs.push(xdg.join("autotool"));
    }
    dirs.push(PathBuf::from(format!(
        "/tmp/autotool-{}",
        rustix::process::geteuid().as_raw()
    )));
    dirs
}

/// Whether `dir` is a directory (not a symbolic link) owned by this user and closed to others.
fn is_private_dir(dir: &Path) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir() && m.uid() == rustix::process::geteuid().as_raw() && m.mode() & 0o077 == 0
    })
}

/// Make `dir` (mode 0700) unless it exists; either way it must then be private.
fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if is_private_dir(dir) {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{} is not a directory of this user closed to others",
            dir.display()
        )))
    }
}

/// A record's name: `listener-<port>-<pid>-<start>`.
fn record_name(port: u16, pid: u32, start: u64) -> String {
    format!("{RECORD_PREFIX}{port}-{pid}-{start}")
}

/// A record's port, pid and start time, from its name.
fn parse_record_name(name: &str) -> Option<(u16, u32, u64)> {
    let mut parts = name.strip_prefix(RECORD_PREFIX)?.split('-');
    let port = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((port, pid, start))
}

fn write_record(port: u16, what: &str) -> io::Result<PathBuf> {
    let pid = std::process::id();
    let start = start_time(pid)?;
    let mut last = None;
    for dir in record_dirs() {
        if let Err(e) = ensure_private_dir(&dir) {
            last = Some(e);
            continue;
        }
        let path = dir.join(record_name(port, pid, start));
        let written = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{what}"));
        match written {
            Ok(()) => return Ok(path),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no directory for records")))
}

/// When process `pid` started (clock ticks since boot, field 22 of `/proc/PID/stat`).
fn start_time(pid: u32) -> io::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_start_time(&stat)
        .ok_or_else(|| io::Error::other(format!("/proc/{pid}/stat has no start time")))
}

/// Field 22 of a `/proc/PID/stat` line; the command name (field 2) may hold spaces and `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// What a live record for `port` says it is, removing stale records it meets.
fn recorded(port: u16) -> Option<String> {
    for dir in record_dirs() {
        if !is_private_dir(&dir) {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.take(MAX_RECORDS).flatten() {
            let name = entry.file_name();
            let Some((p, pid, start)) = name.to_str().and_then(parse_record_name) else {
                continue;
            };
            if p != port {
                continue;
            }
            if start_time(pid).ok() != Some(start) {
                // The process is gone (or its pid is someone else's now).
                let _ = fs::remove_file(entry.path());
                continue;
            }
            let mut what = String::new();
            let _ = fs::File::open(entry.path()).and_then(|f| {
                use std::io::Read;
                f.take(MAX_RECORD_TEXT).read_to_string(&mut what)
            });
            let what: String = what.trim().chars().take(200).collect();
            return Some(if what.is_empty() {
                format!("an autotool listener (pid {pid})")
            } else {
                format!("{what} (pid {pid})")
            });
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The service's unit

/// The TCP ports of the `--listen` arguments on the `ExecStart=` lines of a systemd unit.
pub(super) fn unit_listen_ports(unit: &str) -> BTreeSet<u16> {
    let mut ports = BTreeSet::new();
    for line in unit.lines() {
        let Some(exec) = line.trim_start().strip_prefix("ExecStart=") else {
            continue;
        };
        let words = unit_words(exec);
        let mut words = words.iter();
        while let Some(word) = words.next() {
            let value = match word.strip_prefix("--listen") {
                Some("") => words.next().map(String::as_str),
                Some(v) => v.strip_prefix('='),
                None => None,
            };
            if let Some(crate::listen::Listen::Tcp(addr)) =
                value.and_then(|v| crate::listen::Listen::parse(v).ok())
            {
                ports.insert(addr.port());
            }
        }
    }
    ports
}

/// The words of an `ExecStart=` value as systemd reads them: double-quoted words with `\`
/// escapes, bare words split at white space, `%%` for `%`.
fn unit_words(value: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else { break };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => word.extend(chars.next()),
                    c => word.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
        }
        words.push(word.replace("%%", "%"));
    }
    words
}

/// The service unit's TCP ports, when it is installed.
fn service_ports() -> BTreeSet<u16> {
    let Ok(path) = crate::listen::service_unit_path() else {
        return BTreeSet::new();
    };
    let mut text = String::new();
    let read = fs::File::open(&path).and_then(|f| {
        use std::io::Read;
        f.take(MAX_UNIT).read_to_string(&mut text)
    });
    match read {
        Ok(_) => unit_listen_ports(&text),
        Err(_) => BTreeSet::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// The checks

/// What the static checks (1–4 of the module documentation) say `port` is, if autotool's own.
pub(super) fn known_owner(port: u16, reserved: &BTreeSet<u16>) -> Option<String> {
    if reserved.contains(&port) {
        return Some("a port reserved for autotool".into());
    }
    if let Some(what) = registered_here(port) {
        return Some(format!("{what} (this process)"));
    }
    if service_ports().contains(&port) {
        return Some("the autotool service's port (autotool service install)".into());
    }
    recorded(port)
}

/// Socket inode → the autotool process holding it (`None`: no autotool process of those this
/// user may inspect).
static OWNERS: Mutex<Option<HashMap<u32, Option<u32>>>> = Mutex::new(None);

/// What the kernel's listener table and the remembered owners say about a port.
pub(super) enum Lookup {
    /// Every socket listening there has a known owner: this one, if any is autotool's.
    Known(Option<String>),
    /// These socket inodes were never looked up: walk `/proc` for them ([`walk`]).
    Unknown(Vec<u32>),
}

/// Check 5, its quick half: the sockets listening on `port` of the host's loopback (or on
/// every address) from the kernel, and what is remembered of their owners. A few system calls,
/// no `/proc` walk. An error means the kernel could not be asked.
pub(super) fn lookup(port: u16) -> io::Result<Lookup> {
    let inodes = listening_inodes(port)?;
    let cache = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut unknown = Vec::new();
    for &inode in &inodes {
        match cache.as_ref().and_then(|c| c.get(&inode)) {
            Some(Some(pid)) => return Ok(Lookup::Known(Some(describe_pid(*pid)))),
            Some(None) => {}
            None => unknown.push(inode),
        }
    }
    Ok(if unknown.is_empty() {
        Lookup::Known(None)
    } else {
        Lookup::Unknown(unknown)
    })
}

/// Check 5, its slow half: whether an autotool process holds one of `inodes`, from `/proc`;
/// the answer for each is remembered.
pub(super) fn walk(unknown: &[u32]) -> Option<String> {
    let found = autotool_holders(unknown);
    let mut cache = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() + unknown.len() > MAX_CACHED {
        cache.clear();
    }
    let mut owner = None;
    for &inode in unknown {
        let pid = found.get(&inode).copied();
        cache.insert(inode, pid);
        owner = owner.or(pid);
    }
    owner.map(describe_pid)
}

/// Check 5 whole: whether an autotool process holds the socket listening on `port`.
#[cfg(test)]
pub(super) fn listening_owner(port: u16) -> io::Result<Option<String>> {
    Ok(match lookup(port)? {
        Lookup::Known(owner) => owner,
        Lookup::Unknown(inodes) => walk(&inodes),
    })
}

fn describe_pid(pid: u32) -> String {
    format!("a socket held by an autotool process (pid {pid})")
}

/// The inodes of the TCP sockets listening on `port`, IPv4 and IPv6, from the kernel's
/// `sock_diag` (a dump of listeners only: it never walks established connections).
fn listening_inodes(port: u16) -> io::Result<Vec<u32>> {
    use netlink_packet_core::{
        NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    };
    use netlink_packet_sock_diag::SockDiagMessage;
    use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
    use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_SOCK_DIAG};

    let kernel = |e: io::Error| io::Error::new(e.kind(), format!("sock_diag: {e}"));
    let socket = Socket::new(NETLINK_SOCK_DIAG).map_err(kernel)?;
    rustix::net::sockopt::set_socket_timeout(
        &socket,
        rustix::net::sockopt::Timeout::Recv,
        Some(Duration::from_secs(2)),
    )
    .map_err(|e| kernel(e.into()))?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(kernel)?;
    let mut inodes = Vec::new();
    for (seq, family) in [(1u32, AF_INET), (2, AF_INET6)] {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = seq;
        let socket_id = if family == AF_INET {
            SocketId::new_v4()
        } else {
            SocketId::new_v6()
        };
        let mut request = NetlinkMessage::new(
            header,
            SockDiagMessage::InetRequest(InetRequest {
                family,
                protocol: IPPROTO_TCP,
                extensions: ExtensionFlags::empty(),
                states: StateFlags::LISTEN,
                socket_id,
            })
            .into(),
        );
        request.finalize();
        let mut out = vec![0; request.buffer_len()];
        request.serialize(&mut out);
        socket.send(&out, 0).map_err(kernel)?;
        let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
        'dump: loop {
            buf.clear();
            let n = socket.recv(&mut buf, 0).map_err(kernel)?;
            let mut at = 0;
            while at < n.min(buf.len()) {
                let message =
                    <NetlinkMessage<SockDiagMessage>>::deserialize(&buf[at..]).map_err(|e| {
                        io::Error::other(format!("sock_diag: an answer did not parse: {e}"))
                    })?;
                let len = message.header.length as usize;
                match message.payload {
                    NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r))
                        if message.header.sequence_number == seq
                            && r.header.socket_id.source_port == port =>
                    {
                        inodes.push(r.header.inode);
                    }
                    NetlinkPayload::Done(_) => break 'dump,
                    NetlinkPayload::Error(e) => {
                        return Err(io::Error::other(format!("sock_diag refused: {e:?}")));
                    }
                    _ => {}
                }
                if len == 0 {
                    break;
                }
                at += (len + 3) & !3;
            }
        }
    }
    Ok(inodes)
}

/// Of `inodes`, those held by a process whose executable is autotool: inode → pid. Processes
/// this user may not inspect are passed over.
fn autotool_holders(inodes: &[u32]) -> HashMap<u32, u32> {
    let mut found = HashMap::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return found;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(exe) = fs::read_link(entry.path().join("exe")) else {
            continue;
        };
        if !is_autotool_exe(&exe) {
            continue;
        }
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.take(MAX_FDS).flatten() {
            if let Ok(target) = fs::read_link(fd.path())
                && let Some(inode) = target.to_str().and_then(socket_inode)
                && inodes.contains(&inode)
            {
                found.insert(inode, pid);
            }
        }
        if found.len() == inodes.len() {
            break;
        }
    }
    found
}

/// Whether a `/proc/PID/exe` target is an `autotool` binary (also one replaced since it
/// started: "… (deleted)").
fn is_autotool_exe(exe: &Path) -> bool {
    exe.file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.strip_suffix(" (deleted)").unwrap_or(n))
        == Some(EXE_NAME)
}

/// The inode of a `/proc/PID/fd/N` target `socket:[INODE]`.
fn socket_inode(target: &str) -> Option<u32> {
    target
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn record_names_round_trip() {
        let name = record_name(8765, 4242, 123456789);
        assert_eq!(name, "listener-8765-4242-123456789");
        assert_eq!(parse_record_name(&name), Some((8765, 4242, 123456789)));
        for bad in [
            "listener-8765-4242",
            "listener-8765-4242-1-2",
            "listener-99999-1-1",
            "other-1-2-3",
            "listener-a-1-1",
            "listener--1-1",
        ] {
            assert_eq!(parse_record_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn start_times_come_from_field_22() {
        let stat = "1234 (a (strange) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 \
                    1 0 987654 1000000 100 18446744073709551615";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("1 (x) S 1"), None);
        let own = start_time(std::process::id()).unwrap();
        assert_eq!(start_time(std::process::id()).unwrap(), own);
    }

    #[test]
    fn the_service_unit_gives_its_tcp_ports() {
        let home = crate::home::Home::at("/home/u/my %home/.autotool");
        let unit = crate::cmd::service::unit_text(
            Path::new("/opt/auto tool/autotool"),
            &home,
            "127.0.0.1:8765",
        );
        assert_eq!(unit_listen_ports(&unit), BTreeSet::from([8765]));
        let more = "ExecStart=/x serve --listen [::1]:9001 --listen=127.0.0.1:9002 --listen \
                    unix:/s --listen nonsense\n# ExecStart=/x --listen 127.0.0.1:1\n";
        assert_eq!(unit_listen_ports(more), BTreeSet::from([9001, 9002]));
        assert!(unit_listen_ports("").is_empty());
        assert_eq!(
            unit_words(r#""a b" c "d\"e\\f" %%g"#),
            ["a b", "c", "d\"e\\f", "%g"]
        );
    }

    #[test]
    fn autotool_executables_and_socket_links() {
        assert!(is_autotool_exe(Path::new("/usr/bin/autotool")));
        assert!(is_autotool_exe(Path::new("/t/autotool (deleted)")));
        assert!(!is_autotool_exe(Path::new("/usr/bin/autotool-launcher")));
        assert!(!is_autotool_exe(Path::new("/usr/bin/python3")));
        assert_eq!(socket_inode("socket:[12345]"), Some(12345));
        assert_eq!(socket_inode("pipe:[12345]"), None);
        assert_eq!(socket_inode("socket:[x]"), None);
    }

    #[test]
    fn records_are_written_found_and_removed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(recorded(port), None);
        let own = register(port, "a test listener");
        assert_eq!(
            recorded(port),
            Some(format!("a test listener (pid {})", std::process::id()))
        );
        assert!(registered_here(port).is_some());
        drop(own);
        assert_eq!(recorded(port), None);
        assert_eq!(registered_here(port), None);

        // A record of a process that is gone is stale: ignored, then removed.
        let dir = record_dirs()
            .into_iter()
            .find(|d| is_private_dir(d))
            .unwrap();
        let stale = dir.join(record_name(port, std::process::id(), 1));
        fs::write(&stale, "a dead listener\n").unwrap();
        assert_eq!(recorded(port), None);
        assert!(!stale.exists(), "the stale record was left");
    }

    #[test]
    fn the_kernel_names_the_listening_socket() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = v4.local_addr().unwrap().port();
        let inodes = listening_inodes(port).unwrap();
        assert_eq!(inodes.len(), 1, "{inodes:?}");
        // A connection on that port is not a listener.
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(listening_inodes(port).unwrap(), inodes);
        // The test binary is not autotool: nobody of ours holds it.
        assert_eq!(listening_owner(port).unwrap(), None);
        drop(v4);
        assert!(listening_inodes(port).unwrap().is_empty());
        if let Ok(v6) = std::net::TcpListener::bind("[::1]:0") {
            let port = v6.local_addr().unwrap().port();
            assert_eq!(listening_inodes(port).unwrap().len(), 1);
        }
    }
}
