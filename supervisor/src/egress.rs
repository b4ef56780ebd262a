//! The egress proxy: the only way out of a confined tool's network namespace.
//!
//! One [`EgressProxy`] serves one tool process, on the listeners the launcher bound inside the
//! tool's namespace (127.0.0.1 and ::1) and handed up over `SCM_RIGHTS`, so the socket itself
//! says which tool is asking. It speaks HTTP `CONNECT` and absolute-form HTTP
//! (`GET http://host/path`). For each connection, in order:
//! 1. read the request head: at most [`EgressLimits::max_head_bytes`] (`431` past it), within
//!    [`EgressLimits::head_timeout`];
//! 2. canonicalise the target ([`hosts::parse_authority`]);
//! 3. decide against the allowlists of the keys the tool holds ([`hosts::decide`]): their
//!    intersection; the host's loopback only on a port those lists name, or a `*_API_BASE`
//!    port ([`EgressConfig::api_base_ports`]);
//! 4. resolve the name here ([`Resolver`]) and check every address ([`hosts::check_address`]):
//!    private, link-local, CGNAT, unique-local, multicast, metadata and other internal addresses
//!    are refused, loopback only when the target *is* localhost, and never a port of
//!    autotool's own listeners (`own`: this process's, the service's, every autotool
//!    process's records);
//! 5. dial the address that was checked ([`Dialer`]); the name is never resolved again. On the
//!    loopback, before a byte goes through, the socket listening there must not be held by an
//!    autotool process (`own`, from the kernel's table of listeners and `/proc`);
//! 6. `CONNECT`: answer `200`, then the TLS ClientHello must name the CONNECT host in its SNI
//!    (no SNI, another name, an encrypted ClientHello or anything but TLS closes the tunnel);
//!    absolute-form: the request goes upstream in origin-form with its `Host` checked against
//!    the target, hop-by-hop fields dropped, its body framed exactly, and `Connection: close`;
//! 7. splice both ways until both sides are done, or nothing moved for
//!    [`EgressLimits::idle_timeout`].
//!
//! A refusal is a `403` whose reason phrase and body say which tool, which key, which host and
//! what the user can run (`autotool keys allow KEY host…`); clients put the reason phrase into
//! their exceptions (`urllib`: "Tunnel connection failed: 403 …"), so the agent sees it. Every
//! refusal is also an [`EgressEvent`] for the audit log.
//!
//! Each proxy caps its own tool: [`EgressLimits::max_connections`] served at once, as many
//! again waiting at most [`EgressLimits::queue_wait`] (then `503`), the rest left in the
//! kernel's accept queue. Proxies share nothing but the runtime, so one tool's flood does not
//! hold up another's traffic.
//!
//! With `--sandbox off` the proxy listens on the host's loopback and the tool's proxy variables
//! point at it; the checks are the same, but nothing stops an unconfined tool from going around
//! it. That listener is recorded as one of autotool's own, so no other tool reaches it.

mod conn;
mod head;
mod own;
mod tls;

pub use own::{OwnListener, register as register_own_listener_as, register_own_listener};

use autotool_policy::hosts::{self, ApiBasePorts, Denial, ForbiddenAddress, HostError, KeyLists};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// Bounds on what one tool may do through its proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Longest request head (request line and header fields) read; `431` past it.
    pub max_head_bytes: usize,
    /// Bound on receiving the request head, and after `CONNECT` the TLS ClientHello.
    pub head_timeout: Duration,
    /// Bound on resolving the target and connecting to it.
    pub connect_timeout: Duration,
    /// A connection on which nothing moved either way for this long is closed.
    pub idle_timeout: Duration,
    /// How long a connection past `max_connections` waits for a free slot before a `503`.
    pub queue_wait: Duration,
}

impl Default for EgressLimits {
    fn default() -> Self {
        EgressLimits {
            max_connections: 32,
            max_head_bytes: 16 << 10,
            head_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            queue_wait: Duration::from_secs(10),
        }
    }
}

/// A boxed future, for the object-safe [`Resolver`] and [`Dialer`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Turns a target's name into addresses. The proxy asks only for canonical DNS names: never for
/// an address literal and never for `localhost`, which it maps to the loopback itself.
pub trait Resolver: Send + Sync + fmt::Debug {
    fn resolve<'a>(&'a self, name: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The system resolver (`getaddrinfo`, through tokio's blocking pool).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, name: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((name, port)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// Opens the upstream connection to an address the proxy has checked.
pub trait Dialer: Send + Sync + fmt::Debug {
    fn dial(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>>;
}

/// A plain TCP connect.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpDialer;

impl Dialer for TcpDialer {
    fn dial(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        Box::pin(TcpStream::connect(addr))
    }
}

/// Receives every [`EgressEvent`]. It is called on the proxy's tasks: it must not block (hand
/// the event to a channel or a queue).
pub type EventSink = Arc<dyn Fn(EgressEvent) + Send + Sync>;

/// How one tool's proxy behaves.
#[derive(Clone)]
pub struct EgressConfig {
    /// The tool and the keys it holds, with their allowlists. Read for every new connection, so
    /// a changed list applies to the next request without a restart.
    pub lists: watch::Receiver<KeyLists>,
    pub limits: EgressLimits,
    /// Ports on the host's loopback that every tool may reach: those of the `*_API_BASE`
    /// overrides in serve's environment ([`ApiBasePorts`]). [`EgressConfig::new`] takes them
    /// from this process's environment; [`EgressConfig::with_api_bases`] sets them.
    pub api_base_ports: ApiBasePorts,
    /// Ports on the host's loopback that are never dialled, besides every listener autotool
    /// knows as its own (this process's, the service's, every autotool process's records, and
    /// what `/proc` shows: see `egress/own.rs`).
    pub reserved_ports: BTreeSet<u16>,
    /// Dial a name (other than `localhost`) that resolves to a loopback address as if it were
    /// localhost. Off by default: such a name is refused, so DNS cannot point an allowed name
    /// at the host's own services. For tests, and for a machine whose `/etc/hosts` maps an
    /// allowlisted name to a local service.
    pub loopback_names: bool,
    pub resolver: Arc<dyn Resolver>,
    pub dialer: Arc<dyn Dialer>,
    /// Where refusals go, for the audit log.
    pub events: Option<EventSink>,
}

impl EgressConfig {
    /// A proxy for `lists` (fixed for its lifetime), with default limits, the system resolver
    /// and plain TCP, and the `*_API_BASE` ports of this process's environment.
    pub fn new(lists: KeyLists) -> Self {
        Self::watching(watch::channel(lists).1)
    }

    /// A proxy that follows `lists` as they change.
    pub fn watching(lists: watch::Receiver<KeyLists>) -> Self {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        EgressConfig {
            lists,
            limits: EgressLimits::default(),
            api_base_ports: ApiBasePorts::from_vars(env),
            reserved_ports: BTreeSet::new(),
            loopback_names: false,
            resolver: Arc::new(SystemResolver),
            dialer: Arc::new(TcpDialer),
            events: None,
        }
    }

    /// Take the `*_API_BASE` ports from `api_bases` (variable → URL, as serve collects them)
    /// instead of this process's environment.
    pub fn with_api_bases<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        api_bases: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.api_base_ports = ApiBasePorts::from_vars(api_bases);
        self
    }

    /// The tool's name.
    pub fn tool(&self) -> String {
        self.lists.borrow().tool.clone()
    }
}

impl fmt::Debug for EgressConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressConfig")
            .field("lists", &*self.lists.borrow())
            .field("limits", &self.limits)
            .field("api_base_ports", &self.api_base_ports)
            .field("reserved_ports", &self.reserved_ports)
            .field("loopback_names", &self.loopback_names)
            .field("resolver", &self.resolver)
            .field("dialer", &self.dialer)
            .field("events", &self.events.as_ref().map(|_| "EventSink"))
            .finish()
    }
}

/// A refused request, for the audit log. Its `Display` is the message the tool received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEvent {
    pub tool: String,
    /// The target as the tool asked for it: canonical `host:port` when it parsed, the raw
    /// request target (escaped) otherwise.
    pub target: String,
    pub refusal: Refusal,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A key the tool holds may not be sent there.
    NotAllowed(Box<Denial>),
    /// The target is, or resolves to, an address the proxy never dials.
    Address {
        addr: IpAddr,
        class: ForbiddenAddress,
    },
    /// One of autotool's own listeners on the host's loopback (`what` says which).
    OwnListener { port: u16, what: String },
    /// Whether a loopback port is one of autotool's own listeners could not be checked.
    Unchecked { port: u16, why: String },
    /// The target is not a host.
    BadHost(HostError),
    /// The tunnel did not start with a TLS ClientHello naming the CONNECT host.
    Tunnel(TunnelRefusal),
}

/// What was wrong with the first bytes through a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TunnelRefusal {
    /// The ClientHello names another server.
    OtherName(String),
    /// The ClientHello names no server.
    NoName,
    /// An encrypted ClientHello (or encrypted SNI) hides the server name.
    Encrypted,
    /// Not TLS.
    NotTls,
    /// A TLS handshake that is not a well-formed ClientHello.
    Malformed(&'static str),
}

impl fmt::Display for EgressEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (tool, target) = (&self.tool, &self.target);
        match &self.refusal {
            Refusal::NotAllowed(denial) => write!(f, "{denial}"),
            Refusal::Address { addr, class } => write!(
                f,
                "{tool} may not reach {target}: it is {addr}, {class}. autotool's egress proxy \
                 never connects to private, link-local, metadata or other internal addresses; \
                 a service on this machine is reachable as `localhost:PORT` once the user allowed that \
                 port."
            ),
            Refusal::OwnListener { port, what } => write!(
                f,
                "{tool} may not reach {target}: port {port} on this machine's loopback is {what}, \
                 one of autotool's own listeners, which no tool may reach whatever a key's \
                 allowlist says."
            ),
            Refusal::Unchecked { port, why } => write!(
                f,
                "{tool} may not reach {target}: autotool could not check whether port {port} on \
                 this machine's loopback is one of its own listeners ({why}), so it refuses it."
            ),
            Refusal::BadHost(e) => {
                write!(f, "{tool} asked for {target}, which is not a host: {e}.")
            }
            Refusal::Tunnel(why) => {
                write!(f, "{tool} opened a tunnel to {target} but ")?;
                match why {
                    TunnelRefusal::OtherName(name) => {
                        write!(f, "its TLS ClientHello names {name:?}")?
                    }
                    TunnelRefusal::NoName => f.write_str("its TLS ClientHello names no server")?,
                    TunnelRefusal::Encrypted => {
                        f.write_str("its TLS ClientHello is encrypted and hides the server name")?
                    }
                    TunnelRefusal::NotTls => f.write_str(
                        "sent something other than a TLS ClientHello (send plain HTTP as \
                         `GET http://host/path` through the proxy instead)",
                    )?,
                    TunnelRefusal::Malformed(what) => {
                        write!(f, "its TLS ClientHello is malformed ({what})")?
                    }
                }
                f.write_str(
                    "; a tunnel must carry TLS to the host it was opened for, so it was closed.",
                )
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The proxy

/// What a proxy's connections share.
struct State {
    config: EgressConfig,
    /// Connections being served.
    active: Arc<Semaphore>,
    /// Connections accepted (served or waiting for an `active` slot).
    accepted: Arc<Semaphore>,
    /// Connections accepted since the proxy started, refused ones included.
    opened: std::sync::atomic::AtomicU64,
    /// Requests refused since the proxy started.
    refused: std::sync::atomic::AtomicU64,
}

impl State {
    fn tool(&self) -> String {
        self.config.tool()
    }

    /// What the static checks say `port` is, when it is one of autotool's own listeners.
    fn known_owner(&self, port: u16) -> Option<String> {
        own::known_owner(port, &self.config.reserved_ports)
    }

    fn emit(&self, event: EgressEvent) {
        self.refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(tool = %event.tool, target = %event.target, "egress refused: {event}");
        if let Some(sink) = &self.config.events {
            sink(event);
        }
    }
}

/// A running proxy for one tool process. Dropping it stops it: the listeners close and every
/// connection through it is cut.
pub struct EgressProxy {
    task: tokio::task::JoinHandle<()>,
    addrs: Vec<SocketAddr>,
    state: Arc<State>,
    _own: Option<OwnListener>,
}

impl fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressProxy")
            .field("tool", &self.state.tool())
            .field("addrs", &self.addrs)
            .field("active", &self.active_connections())
            .finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// Serve on `listeners` (the ones the launcher handed up). Needs a tokio runtime.
    pub fn serve(
        listeners: Vec<std::net::TcpListener>,
        config: EgressConfig,
    ) -> io::Result<EgressProxy> {
        let mut addrs = Vec::new();
        let mut tokio_listeners = Vec::new();
        for listener in listeners {
            listener.set_nonblocking(true)?;
            addrs.push(listener.local_addr()?);
            tokio_listeners.push(TcpListener::from_std(listener)?);
        }
        if tokio_listeners.is_empty() {
            return Err(io::Error::other("the egress proxy was given no listener"));
        }
        let max = config.limits.max_connections.max(1);
        let state = Arc::new(State {
            config,
            active: Arc::new(Semaphore::new(max)),
            accepted: Arc::new(Semaphore::new(2 * max)),
            opened: std::sync::atomic::AtomicU64::new(0),
            refused: std::sync::atomic::AtomicU64::new(0),
        });
        let task = tokio::spawn(accept_loop(tokio_listeners, state.clone()));
        Ok(EgressProxy {
            task,
            addrs,
            state,
            _own: None,
        })
    }

    /// Serve on a listener on the host's own loopback (`--sandbox off`), which every proxy of
    /// every autotool process then refuses as one of autotool's own.
    pub fn serve_on_host(
        listener: std::net::TcpListener,
        config: EgressConfig,
    ) -> io::Result<EgressProxy> {
        let what = format!("the egress proxy of the unconfined tool {}", config.tool());
        let own = own::register(listener.local_addr()?.port(), &what);
        let mut proxy = Self::serve(vec![listener], config)?;
        proxy._own = Some(own);
        Ok(proxy)
    }

    /// Where it listens (inside the tool's namespace when confined).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Connections being served right now.
    pub fn active_connections(&self) -> usize {
        self.state.config.limits.max_connections.max(1) - self.state.active.available_permits()
    }

    /// Connections the tool opened to the proxy since it started, refused ones included.
    pub fn connections_opened(&self) -> u64 {
        self.state.opened.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests the proxy refused since it started (each also an [`EgressEvent`]).
    pub fn refused(&self) -> u64 {
        self.state
            .refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stop serving (the same as dropping it).
    pub fn stop(self) {}
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        // The accept task owns every connection task (a `JoinSet`): aborting it cuts them all.
        self.task.abort();
    }
}

async fn accept_loop(listeners: Vec<TcpListener>, state: Arc<State>) {
    let mut connections = JoinSet::new();
    let mut next = 0usize;
    loop {
        while connections.try_join_next().is_some() {}
        // Past the bound, leave further connections in the kernel's accept queue.
        let slot = tokio::select! {
            slot = state.accepted.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let accepted = tokio::select! {
            r = accept_any(&listeners, &mut next) => r,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        match accepted {
            Ok(stream) => {
                state
                    .opened
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                connections.spawn(conn::serve(stream, state.clone(), slot));
            }
            Err(e) => {
                // Out of descriptors or memory: back off instead of spinning.
                tracing::warn!(tool = %state.tool(), %e, "the egress proxy could not accept");
                drop(slot);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The next connection on any of `listeners`, taking them in turn so none starves.
async fn accept_any(listeners: &[TcpListener], next: &mut usize) -> io::Result<TcpStream> {
    std::future::poll_fn(|cx| {
        for i in 0..listeners.len() {
            let k = (*next + i) % listeners.len();
            if let Poll::Ready(r) = listeners[k].poll_accept(cx) {
                *next = k + 1;
                return Poll::Ready(r.map(|(stream, _)| stream));
            }
        }
        Poll::Pending
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Setting it up for a tool process

/// The proxy variables for a listener on `port` of the tool's loopback: exactly those
/// `autotool_policy::launch::tool_environment` sets (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
/// lower-case forms, `NO_PROXY` empty).
pub fn proxy_variables(port: u16) -> BTreeMap<String, String> {
    let none = BTreeMap::new();
    let plain = autotool_policy::launch::tool_environment(&none, &none, None);
    autotool_policy::launch::tool_environment(&none, &none, Some(port))
        .into_iter()
        .filter(|(k, _)| !plain.contains_key(k))
        .collect()
}

/// Receive the listeners the launcher sends on its report socket: one message carrying two
/// descriptors (127.0.0.1, then ::1), each a listening socket. The launcher closing the socket
/// without sending them means it failed (its stderr says why).
pub(crate) async fn receive_listeners(
    report: std::os::unix::net::UnixStream,
) -> io::Result<Vec<std::net::TcpListener>> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    report.set_nonblocking(true)?;
    let report = tokio::net::UnixStream::from_std(report)?;
    let (bytes, fds) = loop {
        report.readable().await?;
        let received = report.try_io(Interest::READABLE, || {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut payload = [0u8; 16];
            let msg = rustix::net::recvmsg(
                &report,
                &mut [io::IoSliceMut::new(&mut payload)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
            )?;
            let mut fds: Vec<OwnedFd> = Vec::new();
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(rights) = message {
                    fds.extend(rights);
                }
            }
            Ok((msg.bytes, fds))
        });
        match received {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            other => break other?,
        }
    };
    if fds.len() != 2 {
        return Err(io::Error::other(if bytes == 0 && fds.is_empty() {
            "the launcher closed its report socket without handing over the egress listeners"
                .to_owned()
        } else {
            format!(
                "the launcher handed over {} descriptor(s) instead of the 2 egress listeners",
                fds.len()
            )
        }));
    }
    fds.into_iter()
        .map(|fd| {
            if rustix::net::sockopt::socket_acceptconn(&fd)? {
                Ok(std::net::TcpListener::from(fd))
            } else {
                Err(io::Error::other(
                    "a descriptor the launcher handed over is not a listening socket",
                ))
            }
        })
        .collect()
}

/// Whether `ip` is a loopback address (IPv4-mapped forms included).
fn loopback_class(ip: IpAddr) -> bool {
    hosts::forbidden_class(ip) == Some(ForbiddenAddress::Loopback)
}
