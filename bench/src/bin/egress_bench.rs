//! `egress-bench`: what autotool's egress proxy costs a connection, side by side in one run.
//!
//! Everything runs on 127.0.0.1. One upstream server speaks the bench's record protocol (below);
//! three variants reach it, interleaved within each round:
//! - **direct**: the client connects to the upstream itself;
//! - **autotool**: through `autotool::egress::EgressProxy`, started in this process as the
//!   supervisor starts one (its own multi-threaded runtime, one worker per core, default limits),
//!   for a tool holding a key whose allowlist names the upstream (`upstream.bench.test:PORT`),
//!   resolved by an in-memory resolver to 127.0.0.1 (`loopback_names`, as in the proxy's tests).
//!   Every check runs: the allowlist decision, the resolver, the address checks, and the SNI of
//!   the ClientHello against the CONNECT host;
//! - **tinyproxy**: when `tinyproxy` is on `PATH`, started by the bench with a generated
//!   configuration: `Listen 127.0.0.1`, a filter file admitting only `localhost`
//!   (`FilterDefaultDeny Yes`), `ConnectPort` the upstream's port, a log file of its own at
//!   `LogLevel Warning` (no syslog). Before measuring, the bench checks that each proxy refuses a
//!   host outside its allowlist.
//!
//! The record protocol: a connection opens with a TLS ClientHello (one handshake record, with the
//! server name, key share, ALPN and padding of a real one, 512 bytes), which the upstream skips;
//! each request is then one TLS application-data record of `--request-bytes`, answered with one
//! record of `--answer-bytes`. So the CONNECT path sees exactly what it sees from a real TLS
//! client, and no cryptography is measured: a real handshake would add the same cost to every
//! variant and only make the proxies' share smaller. The ClientHello travels with the first
//! request, as TLS early data does; there is no server handshake round trip. The first payload
//! byte of a request says whether the upstream closes the connection after answering (as a
//! server answering `Connection: close` does); the client then reads to the end and closes. The
//! server closing first also keeps `TIME_WAIT` on the listening side, so a long run never runs
//! out of loopback's ephemeral ports (which would measure the kernel's port search instead).
//!
//! Two modes, each measured for throughput (`--clients` clients for `--duration-ms`, requests per
//! second, and the CPU time each party spent per request) and latency (one client, `--requests`
//! requests in a row, per-request times):
//! - (a) a new connection per request: connect, [`CONNECT` → `200`], ClientHello + request →
//!   answer, the upstream closes, the client closes;
//! - (b) many requests through one kept-alive connection (tunnel): opened before the clock starts,
//!   then request → answer, over and over.
//!
//! It prints figures, ratios to direct and whether the targets are met, asserts nothing, and
//! exits 1 only when a variant could not run (2 when nothing could be set up).

#[path = "../stats.rs"]
mod stats;

use anyhow::{Context, Result, anyhow, bail};
use autotool::egress::{BoxFuture, EgressConfig, EgressProxy, Resolver};
use autotool_policy::hosts::{KeyAllowlist, KeyLists};
use clap::Parser;
use stats::Summary;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The targets.
const TARGET_NEW_RATIO: f64 = 0.8;
const TARGET_TUNNEL_RATIO: f64 = 0.9;
const TARGET_ADDED_P50_MS: f64 = 0.15;
/// The name the tool asks autotool's proxy for; the bench's resolver maps it to 127.0.0.1.
const NAME: &str = "upstream.bench.test";
/// The key the tool holds, whose allowlist names the upstream.
const KEY: &str = "BENCH_KEY";
/// TLS record types.
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// Size of the ClientHello record the client sends, header included.
const HELLO_BYTES: usize = 512;
/// Bound on any one read or write of the client.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Thread names, for the CPU time of each party.
const UPSTREAM_THREAD: &str = "upstream";
const PROXY_THREAD: &str = "egress";

#[derive(Debug, Parser)]
#[command(
    name = "egress-bench",
    about = "What autotool's egress proxy costs a connection: direct vs autotool vs tinyproxy, \
             side by side on loopback",
    after_help = "Run: cargo run --release -p autotool-bench --bin egress-bench\n\
                  tinyproxy is measured when it is on PATH (Debian: apt-get install tinyproxy-bin)."
)]
struct Args {
    /// Measured rounds; each round runs every mode and variant once, interleaved.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Unmeasured rounds first (at least 1).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Concurrent clients in the throughput runs.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Milliseconds each throughput run lasts.
    #[arg(long, default_value_t = 500)]
    duration_ms: u64,
    /// Requests in a row in each latency run (one client).
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Payload bytes of a request record (1 to 16384: one TLS record).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=16384))]
    request_bytes: u16,
    /// Payload bytes of an answer record (1 to 16384: one TLS record).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u16).range(1..=16384))]
    answer_bytes: u16,
    /// Modes: a (new connection per request), b (requests through one kept-alive tunnel).
    #[arg(long, value_delimiter = ',', default_value = "a,b")]
    modes: Vec<Mode>,
    /// Variants to compare; direct is the baseline and always runs.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "direct,autotool,tinyproxy"
    )]
    variants: Vec<Variant>,
    /// Worker threads of the proxy's runtime [default: one per core, as `autotool serve`]
    #[arg(long)]
    proxy_workers: Option<usize>,
    /// tinyproxy binary [default: `tinyproxy` on PATH]
    #[arg(long)]
    tinyproxy: Option<PathBuf>,
    /// A short run that only shows that every variant works: 2 rounds of 100 ms and 50
    /// requests; overrides --rounds, --warmup, --duration-ms and --requests.
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    A,
    B,
}

impl Mode {
    fn title(self) -> &'static str {
        match self {
            Mode::A => {
                "(a) new connection per request: connect → [CONNECT → 200] → ClientHello + \
                 request → answer → close"
            }
            Mode::B => "(b) kept-alive tunnel: request → answer through one open connection",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
enum Variant {
    Direct,
    Autotool,
    Tinyproxy,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Direct => "direct",
            Variant::Autotool => "autotool",
            Variant::Tinyproxy => "tinyproxy",
        }
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("egress-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Returns whether every requested variant ran.
fn real_main() -> Result<bool> {
    let mut args = Args::parse();
    if args.quick {
        (args.rounds, args.warmup, args.duration_ms, args.requests) = (2, 1, 100, 50);
    }
    args.clients = args.clients.max(1);
    args.requests = args.requests.max(1);
    let mut variants = args.variants.clone();
    variants.push(Variant::Direct);
    variants.sort();
    variants.dedup();
    let mut all_ran = true;

    let upstream =
        Upstream::start(args.answer_bytes.into()).context("start the upstream server")?;
    let port = upstream.addr.port();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = args.proxy_workers.unwrap_or(cores).max(1);

    let autotool = if variants.contains(&Variant::Autotool) {
        Some(AutotoolProxy::start(port, workers).context("start autotool's egress proxy")?)
    } else {
        None
    };
    let tinyproxy = if variants.contains(&Variant::Tinyproxy) {
        match Tinyproxy::start(args.tinyproxy.as_deref(), port) {
            Ok(t) => Some(t),
            Err(e) => {
                println!("SKIP tinyproxy: {e:#}");
                None
            }
        }
    } else {
        None
    };
    variants.retain(|v| match v {
        Variant::Direct => true,
        Variant::Autotool => autotool.is_some(),
        Variant::Tinyproxy => tinyproxy.is_some(),
    });

    let wire = |sni: &str| Wire::new(sni, args.request_bytes.into(), args.answer_bytes.into());
    let mut routes: Vec<(Variant, Route)> = Vec::new();
    for &v in &variants {
        let route = match v {
            Variant::Direct => Route {
                addr: upstream.addr,
                connect: None,
                wire: wire(NAME),
                cpu: ProxyCpu::None,
            },
            Variant::Autotool => Route {
                addr: autotool.as_ref().map_or(upstream.addr, |a| a.addr),
                connect: Some(format!("{NAME}:{port}")),
                wire: wire(NAME),
                cpu: ProxyCpu::Threads(PROXY_THREAD),
            },
            Variant::Tinyproxy => Route {
                addr: tinyproxy.as_ref().map_or(upstream.addr, |t| t.addr),
                connect: Some(format!("localhost:{port}")),
                wire: wire("localhost"),
                cpu: tinyproxy
                    .as_ref()
                    .map_or(ProxyCpu::None, |t| ProxyCpu::Process(t.child.id())),
            },
        };
        routes.push((v, route));
    }

    println!(
        "egress-bench: {} rounds (+{} warm-up), modes and variants interleaved each round: {}",
        args.rounds,
        args.warmup.max(1),
        routes
            .iter()
            .map(|(v, _)| v.name())
            .collect::<Vec<_>>()
            .join(" → ")
    );
    println!(
        "  upstream  {} (ClientHello {HELLO_BYTES} B with SNI, requests {} B, answers {} B, \
         as TLS records)",
        upstream.addr, args.request_bytes, args.answer_bytes
    );
    if let Some(a) = &autotool {
        println!(
            "  autotool  {} (EgressProxy, {workers}-worker runtime; allowlist {NAME}:{port} for \
             key {KEY}, {NAME} → 127.0.0.1)",
            a.addr
        );
    }
    if let Some(t) = &tinyproxy {
        println!(
            "  tinyproxy {} ({}, {}; filter ^localhost$, FilterDefaultDeny Yes, ConnectPort {port})",
            t.addr,
            t.binary.display(),
            t.version
        );
    }
    println!(
        "  throughput: {} clients × {} ms; latency: 1 client × {} requests; uid {}, {cores} \
         cores, load average {}",
        args.clients,
        args.duration_ms,
        args.requests,
        nix::unistd::getuid(),
        load_average()
    );

    // Each proxy must refuse what its allowlist does not admit, or it is not the comparison
    // the bench claims.
    let refusals = [
        (Variant::Autotool, format!("elsewhere.bench.test:{port}")),
        (Variant::Tinyproxy, format!("127.0.0.1:{port}")),
    ];
    routes.retain(|(v, route)| {
        let Some((_, target)) = refusals.iter().find(|(r, _)| r == v) else {
            return true;
        };
        match route.refused(target) {
            Ok(status) => {
                println!("  {} refuses CONNECT {target}: {status}", v.name());
                true
            }
            Err(e) => {
                println!("  {} FAILED its allowlist check: {e:#}", v.name());
                all_ran = false;
                false
            }
        }
    });

    let mut results: Vec<ModeResult> = args
        .modes
        .iter()
        .map(|&mode| ModeResult {
            mode,
            samples: routes
                .iter()
                .map(|(v, _)| VariantSample {
                    variant: *v,
                    runs: Vec::new(),
                    latency: Vec::new(),
                    failed: None,
                })
                .collect(),
        })
        .collect();
    let duration = Duration::from_millis(args.duration_ms.max(1));
    let warmup = args.warmup.max(1);
    for round in 0..warmup + args.rounds {
        let measured = round >= warmup;
        for result in &mut results {
            for ((_, route), sample) in routes.iter().zip(&mut result.samples) {
                if sample.failed.is_some() {
                    continue;
                }
                let run = || -> Result<(Run, Vec<Duration>)> {
                    let latency = latency_run(route, result.mode, args.requests)?;
                    let run = throughput_run(route, result.mode, args.clients, duration)?;
                    Ok((run, latency))
                };
                match run() {
                    Ok((run, latency)) if measured => {
                        sample.runs.push(run);
                        sample.latency.extend(latency);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        println!(
                            "  {} {:?} FAILED in round {}: {e:#}",
                            sample.variant.name(),
                            result.mode,
                            round + 1
                        );
                        sample.failed = Some(format!("{e:#}"));
                        all_ran = false;
                    }
                }
            }
        }
    }

    for result in &results {
        result.print(args.clients);
    }
    if let Some(t) = &tinyproxy {
        t.report_log();
    }
    println!();
    println!("{}", verdict(&results, &args));
    drop(autotool);
    drop(tinyproxy);
    drop(upstream);
    Ok(all_ran)
}

// ---------------------------------------------------------------------------------------------
// The wire: what the client sends and expects

/// First payload byte of a request: answer and keep the connection, or answer and close it.
const KEEP: u8 = b'k';
const CLOSE: u8 = b'c';

/// One variant's bytes: the ClientHello with a closing request behind it (a), the ClientHello
/// with a keep-alive request (the start of a tunnel in (b)), a keep-alive request alone, and the
/// answer's length.
#[derive(Debug)]
struct Wire {
    hello_and_close: Vec<u8>,
    hello_and_keep: Vec<u8>,
    keep: Vec<u8>,
    answer_len: usize,
}

impl Wire {
    fn new(sni: &str, request_bytes: usize, answer_bytes: usize) -> Wire {
        let request = |first| {
            let mut payload = vec![0x42; request_bytes.max(1)];
            payload[0] = first;
            record(APPLICATION_DATA, &payload)
        };
        let hello = client_hello(sni);
        Wire {
            hello_and_close: [hello.as_slice(), &request(CLOSE)].concat(),
            hello_and_keep: [hello.as_slice(), &request(KEEP)].concat(),
            keep: request(KEEP),
            answer_len: 5 + answer_bytes,
        }
    }
}

/// Which request a client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Send {
    /// ClientHello and a request after which the upstream closes: all of (a).
    HelloAndClose,
    /// ClientHello and a keep-alive request: a tunnel's first.
    HelloAndKeep,
    /// A keep-alive request alone.
    Keep,
}

/// A TLS record of `kind` around `payload` (at most 16 KiB + 2 KiB, as TLS allows).
fn record(kind: u8, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len()).unwrap_or(u16::MAX);
    let mut out = vec![kind, 3, 3];
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&payload[..usize::from(len)]);
    out
}

/// A TLS 1.3 ClientHello for `sni` as a browser or an HTTP library sends it: server name,
/// supported versions and groups, signature algorithms, an X25519 key share, ALPN `h2` and
/// `http/1.1`, padded to [`HELLO_BYTES`] with the padding extension.
fn client_hello(sni: &str) -> Vec<u8> {
    fn ext(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(data);
    }
    let mut extensions = Vec::new();
    let name = sni.as_bytes();
    let mut server_name = ((name.len() + 3) as u16).to_be_bytes().to_vec();
    server_name.push(0); // host_name
    server_name.extend_from_slice(&(name.len() as u16).to_be_bytes());
    server_name.extend_from_slice(name);
    ext(&mut extensions, 0x0000, &server_name);
    ext(&mut extensions, 0x002b, &[4, 3, 4, 3, 3]); // supported_versions: 1.3, 1.2
    ext(&mut extensions, 0x000a, &[0, 4, 0, 29, 0, 23]); // supported_groups: x25519, P-256
    ext(
        &mut extensions,
        0x000d,
        &[0, 8, 4, 3, 8, 4, 4, 1, 8, 7], // signature_algorithms
    );
    let mut key_share = vec![0, 36, 0, 29, 0, 32];
    key_share.extend_from_slice(&[0x5a; 32]);
    ext(&mut extensions, 0x0033, &key_share);
    ext(
        &mut extensions,
        0x0010,
        b"\x00\x0c\x02h2\x08http/1.1", // ALPN
    );
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0x17; 32]); // random
    body.push(32);
    body.extend_from_slice(&[0x33; 32]); // legacy_session_id
    body.extend_from_slice(&[0, 6, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03]); // cipher_suites
    body.extend_from_slice(&[1, 0]); // null compression
    // Record header 5 + handshake header 4 + body so far + extensions length 2 + padding
    // extension header 4.
    let fixed = 5 + 4 + body.len() + 2 + extensions.len() + 4;
    ext(
        &mut extensions,
        0x0015,
        &vec![0; HELLO_BYTES.saturating_sub(fixed)],
    );
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut message = vec![1]; // client_hello
    message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    let mut out = vec![HANDSHAKE, 3, 1];
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(&message);
    out
}

/// How one variant reaches the upstream.
#[derive(Debug)]
struct Route {
    /// Where the client connects: the upstream, or a proxy.
    addr: SocketAddr,
    /// Through a proxy: the `CONNECT` target.
    connect: Option<String>,
    wire: Wire,
    /// Where the proxy's CPU time is read.
    cpu: ProxyCpu,
}

impl Route {
    /// A connection ready for its first request: connected and, through a proxy, tunnelled.
    fn open(&self) -> Result<TcpStream> {
        let mut s =
            TcpStream::connect(self.addr).with_context(|| format!("connect {}", self.addr))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        if let Some(target) = &self.connect {
            let status = connect(&mut s, target)?;
            if !status.contains(" 200 ") {
                bail!("CONNECT {target} was answered {status:?}");
            }
        }
        Ok(s)
    }

    /// One request and its answer; after a closing request, also the upstream's close.
    fn exchange(&self, s: &mut TcpStream, send: Send, answer: &mut [u8]) -> Result<()> {
        let request = match send {
            Send::HelloAndClose => &self.wire.hello_and_close,
            Send::HelloAndKeep => &self.wire.hello_and_keep,
            Send::Keep => &self.wire.keep,
        };
        s.write_all(request).context("send a request")?;
        let len = self.wire.answer_len;
        s.read_exact(&mut answer[..len]).context("read an answer")?;
        if answer[0] != APPLICATION_DATA {
            bail!("the answer is not an application-data record");
        }
        if send == Send::HelloAndClose && s.read(&mut answer[..]).context("read the close")? != 0 {
            bail!("the upstream sent more than its answer before closing");
        }
        Ok(())
    }

    /// (a): a new connection, one request, closed.
    fn one_shot(&self, answer: &mut [u8]) -> Result<()> {
        let mut s = self.open()?;
        self.exchange(&mut s, Send::HelloAndClose, answer)
    }

    /// (b): a tunnel that has carried its ClientHello and first request.
    fn tunnel(&self, answer: &mut [u8]) -> Result<TcpStream> {
        let mut s = self.open()?;
        self.exchange(&mut s, Send::HelloAndKeep, answer)?;
        Ok(s)
    }

    /// `CONNECT target` must be refused: the status line of the refusal.
    fn refused(&self, target: &str) -> Result<String> {
        let mut s = TcpStream::connect(self.addr)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        let status = connect(&mut s, target)?;
        if status.contains(" 200 ") {
            bail!("CONNECT {target} (outside the allowlist) was answered {status:?}");
        }
        Ok(status)
    }
}

/// Send `CONNECT target` and read the answer's head: its status line.
fn connect(s: &mut TcpStream, target: &str) -> Result<String> {
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .context("send CONNECT")?;
    // Nothing follows the head until the client speaks, so reading whatever arrives never
    // takes tunnel bytes.
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk).context("read the answer to CONNECT")?;
        if n == 0 {
            bail!(
                "the proxy closed the connection after CONNECT {target} ({:?})",
                String::from_utf8_lossy(&head)
            );
        }
        head.extend_from_slice(&chunk[..n]);
        if head.len() > 64 << 10 {
            bail!("the answer to CONNECT has no end");
        }
    }
    let text = String::from_utf8_lossy(&head);
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

// ---------------------------------------------------------------------------------------------
// Measuring

/// One client, `requests` in a row: the time of each.
fn latency_run(route: &Route, mode: Mode, requests: usize) -> Result<Vec<Duration>> {
    let mut answer = vec![0u8; route.wire.answer_len + 1];
    let mut times = Vec::with_capacity(requests);
    match mode {
        Mode::A => {
            for _ in 0..requests {
                let t0 = Instant::now();
                route.one_shot(&mut answer)?;
                times.push(t0.elapsed());
            }
        }
        Mode::B => {
            let mut s = route.tunnel(&mut answer)?;
            for _ in 0..requests {
                let t0 = Instant::now();
                route.exchange(&mut s, Send::Keep, &mut answer)?;
                times.push(t0.elapsed());
            }
        }
    }
    Ok(times)
}

/// What one throughput run did.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    requests: u64,
    elapsed: Duration,
    /// CPU time of the client threads, the upstream's thread and the proxy (autotool's runtime
    /// threads, or the tinyproxy process).
    clients: Duration,
    upstream: Duration,
    proxy: Duration,
}

impl Run {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// CPU time of the party that serves a variant: autotool's runtime threads, the tinyproxy
/// process, or nothing (direct).
#[derive(Debug, Clone, Copy)]
enum ProxyCpu {
    None,
    Threads(&'static str),
    Process(u32),
}

impl ProxyCpu {
    fn read(self) -> Duration {
        match self {
            ProxyCpu::None => Duration::ZERO,
            ProxyCpu::Threads(name) => threads_cpu(name),
            ProxyCpu::Process(pid) => process_cpu(pid),
        }
    }
}

/// `clients` clients for `duration`: requests, time, and CPU time by party.
fn throughput_run(route: &Route, mode: Mode, clients: usize, duration: Duration) -> Result<Run> {
    let proxy = route.cpu;
    let barrier = Barrier::new(clients + 1);
    let (counts, elapsed, upstream, proxy) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || -> Result<(u64, Duration)> {
                    let mut answer = vec![0u8; route.wire.answer_len + 1];
                    // (b): the tunnel is opened before the clock starts.
                    let tunnel = match mode {
                        Mode::A => Ok(None),
                        Mode::B => route.tunnel(&mut answer).map(Some),
                    };
                    barrier.wait();
                    let mut tunnel = tunnel?;
                    let cpu0 = thread_cpu();
                    let start = Instant::now();
                    let mut done = 0u64;
                    while start.elapsed() < duration {
                        match &mut tunnel {
                            None => route.one_shot(&mut answer)?,
                            Some(s) => route.exchange(s, Send::Keep, &mut answer)?,
                        }
                        done += 1;
                    }
                    Ok((done, thread_cpu().saturating_sub(cpu0)))
                })
            })
            .collect();
        let (upstream0, proxy0) = (threads_cpu(UPSTREAM_THREAD), proxy.read());
        barrier.wait();
        let start = Instant::now();
        let counts: Vec<Result<(u64, Duration)>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a client thread panicked")))
            })
            .collect();
        let elapsed = start.elapsed();
        (
            counts,
            elapsed,
            threads_cpu(UPSTREAM_THREAD).saturating_sub(upstream0),
            proxy.read().saturating_sub(proxy0),
        )
    });
    let mut run = Run {
        elapsed,
        upstream,
        proxy,
        ..Run::default()
    };
    for c in counts {
        let (requests, cpu) = c?;
        run.requests += requests;
        run.clients += cpu;
    }
    Ok(run)
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_THREAD).map_or(Duration::ZERO, |u| {
        let t = |tv: nix::sys::time::TimeVal| {
            Duration::new(
                u64::try_from(tv.tv_sec()).unwrap_or(0),
                u32::try_from(tv.tv_usec()).unwrap_or(0) * 1000,
            )
        };
        t(u.user_time()) + t(u.system_time())
    })
}

/// CPU time of this process's threads named `name` (their `comm`), from each one's
/// `/proc/self/task/TID/schedstat` (nanoseconds on the CPU).
fn threads_cpu(name: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut ns = 0u64;
    for task in tasks.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        ns += std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(ns)
}

/// CPU time of process `pid`, threads that have exited included (`utime` + `stime` of
/// `/proc/PID/stat`, in clock ticks of 10 ms).
fn process_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// One variant's measurements in one mode, over the measured rounds.
#[derive(Debug)]
struct VariantSample {
    variant: Variant,
    /// One throughput run per round.
    runs: Vec<Run>,
    /// Every request of every latency run.
    latency: Vec<Duration>,
    failed: Option<String>,
}

/// The medians a verdict is made of.
#[derive(Debug, Clone, Copy)]
struct Figures {
    throughput: f64,
    throughput_min: f64,
    throughput_max: f64,
    latency: Summary,
    p90_ms: f64,
    /// CPU microseconds per request over every measured throughput run.
    cpu_clients_us: f64,
    cpu_upstream_us: f64,
    cpu_proxy_us: f64,
}

impl VariantSample {
    fn figures(&self) -> Option<Figures> {
        if self.failed.is_some() {
            return None;
        }
        let mut t: Vec<f64> = self.runs.iter().map(Run::rate).collect();
        t.sort_by(f64::total_cmp);
        let n = t.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => t[n / 2],
            n => (t[n / 2 - 1] + t[n / 2]) / 2.0,
        };
        let mut ms: Vec<f64> = self.latency.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let p90 = *ms.get((ms.len() * 9 / 10).min(ms.len().saturating_sub(1)))?;
        let requests = self.runs.iter().map(|r| r.requests).sum::<u64>().max(1) as f64;
        let per_request = |part: fn(&Run) -> Duration| {
            self.runs.iter().map(part).sum::<Duration>().as_secs_f64() * 1e6 / requests
        };
        Some(Figures {
            cpu_clients_us: per_request(|r| r.clients),
            cpu_upstream_us: per_request(|r| r.upstream),
            cpu_proxy_us: per_request(|r| r.proxy),
            throughput: median,
            throughput_min: t[0],
            throughput_max: t[n - 1],
            latency: Summary::of(&self.latency)?,
            p90_ms: p90,
        })
    }
}

#[derive(Debug)]
struct ModeResult {
    mode: Mode,
    samples: Vec<VariantSample>,
}

impl ModeResult {
    fn figures(&self, v: Variant) -> Option<Figures> {
        self.samples
            .iter()
            .find(|s| s.variant == v)
            .and_then(VariantSample::figures)
    }

    fn print(&self, clients: usize) {
        println!();
        println!("{}", self.mode.title());
        println!(
            "  {:<9} {:>9} {:>17} {:>9}   {:>9} {:>8} {:>8}   {:>18}",
            "variant", "req/s", "(min–max)", "× direct", "p50 ms", "p90 ms", "max ms", "added p50"
        );
        let base = self.figures(Variant::Direct);
        for s in &self.samples {
            let Some(f) = s.figures() else {
                println!("  {:<9} not measured (failed, see above)", s.variant.name());
                continue;
            };
            let (ratio, added) = match (base, s.variant) {
                (Some(b), Variant::Autotool | Variant::Tinyproxy) => (
                    format!("×{:.2}", f.throughput / b.throughput),
                    format!(
                        "{:+.3} ms (×{:.2})",
                        f.latency.added_over(&b.latency),
                        f.latency.ratio_to(&b.latency)
                    ),
                ),
                _ => ("—".to_owned(), "—".to_owned()),
            };
            println!(
                "  {:<9} {:>9.0} {:>17} {:>9}   {:>9.3} {:>8.3} {:>8.3}   {:>18}",
                s.variant.name(),
                f.throughput,
                format!("({:.0}–{:.0})", f.throughput_min, f.throughput_max),
                ratio,
                f.latency.median_ms,
                f.p90_ms,
                f.latency.max_ms,
                added
            );
        }
        println!(
            "  req/s: median over rounds, {clients} clients; latency: every request of the \
             one-client runs"
        );
        println!(
            "  CPU per request, µs, over the throughput runs: {:<9} {:>8} {:>9} {:>7} {:>7}",
            "variant", "clients", "upstream", "proxy", "total"
        );
        for s in &self.samples {
            if let Some(f) = s.figures() {
                println!(
                    "  {:<47} {:<9} {:>8.1} {:>9.1} {:>7.1} {:>7.1}",
                    "",
                    s.variant.name(),
                    f.cpu_clients_us,
                    f.cpu_upstream_us,
                    f.cpu_proxy_us,
                    f.cpu_clients_us + f.cpu_upstream_us + f.cpu_proxy_us
                );
            }
        }
    }
}

/// The closing line: autotool against the targets, tinyproxy for comparison.
fn verdict(results: &[ModeResult], args: &Args) -> String {
    let mut parts = Vec::new();
    for r in results {
        let Some(direct) = r.figures(Variant::Direct) else {
            continue;
        };
        let (label, target) = match r.mode {
            Mode::A => ("(a) new connection", TARGET_NEW_RATIO),
            Mode::B => ("(b) through a tunnel", TARGET_TUNNEL_RATIO),
        };
        let mut part = format!("{label}: ");
        match r.figures(Variant::Autotool) {
            Some(a) => {
                let ratio = a.throughput / direct.throughput;
                let added = a.latency.added_over(&direct.latency);
                part.push_str(&format!(
                    "autotool ×{ratio:.2} direct (≥ {target}: {}), {added:+.3} ms p50 \
                     (≤ {TARGET_ADDED_P50_MS} ms: {})",
                    met(ratio >= target),
                    met(added <= TARGET_ADDED_P50_MS)
                ));
            }
            None => part.push_str("autotool not measured"),
        }
        if let Some(t) = r.figures(Variant::Tinyproxy) {
            part.push_str(&format!(
                "; tinyproxy ×{:.2}, {:+.3} ms",
                t.throughput / direct.throughput,
                t.latency.added_over(&direct.latency)
            ));
        }
        parts.push(part);
    }
    if parts.is_empty() {
        return "verdict: nothing measured".into();
    }
    format!(
        "verdict (medians, {} rounds, {} clients): {}",
        args.rounds,
        args.clients,
        parts.join("; ")
    )
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}

// ---------------------------------------------------------------------------------------------
// The upstream

/// The upstream server, on a single-threaded runtime of its own: skips handshake records and
/// answers every application-data record with one of its own.
struct Upstream {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Upstream {
    fn start(answer_bytes: usize) -> Result<Upstream> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let answer: std::sync::Arc<[u8]> =
            record(APPLICATION_DATA, &vec![0x61; answer_bytes]).into();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(UPSTREAM_THREAD.into())
            .spawn(move || {
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::spawn(async move {
                        while let Ok((s, _)) = listener.accept().await {
                            tokio::spawn(upstream_connection(s, answer.clone()));
                        }
                    });
                    let _ = stopped.await;
                });
            })?;
        Ok(Upstream {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn upstream_connection(mut s: tokio::net::TcpStream, answer: std::sync::Arc<[u8]>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = s.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(8 << 10);
    let mut out: Vec<u8> = Vec::new();
    loop {
        match s.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        // Every complete record: skip handshakes, answer application data.
        let mut at = 0;
        let mut close = false;
        while let Some(header) = buf.get(at..at + 5) {
            let len = 5 + usize::from(u16::from_be_bytes([header[3], header[4]]));
            if buf.len() < at + len {
                break;
            }
            match header[0] {
                HANDSHAKE => {}
                APPLICATION_DATA => {
                    out.extend_from_slice(&answer);
                    close |= buf.get(at + 5) == Some(&CLOSE);
                }
                _ => return,
            }
            at += len;
        }
        buf.drain(..at);
        if !out.is_empty() {
            if s.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if close {
            // Answered and done, as a server answering `Connection: close`: it closes first.
            let _ = s.shutdown().await;
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// autotool's proxy

/// The bench's resolver: [`NAME`] is 127.0.0.1, nothing else resolves.
#[derive(Debug)]
struct BenchResolver;

impl Resolver for BenchResolver {
    fn resolve<'a>(&'a self, name: &'a str, _port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        let answer = if name == NAME {
            Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
        } else {
            Err(io::Error::new(io::ErrorKind::NotFound, "not a bench name"))
        };
        Box::pin(std::future::ready(answer))
    }
}

/// An `EgressProxy` on a runtime of its own, as the supervisor runs one.
struct AutotoolProxy {
    addr: SocketAddr,
    proxy: Option<EgressProxy>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl AutotoolProxy {
    fn start(upstream_port: u16, workers: usize) -> Result<AutotoolProxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name(PROXY_THREAD)
            .enable_all()
            .build()?;
        let rule = format!("{NAME}:{upstream_port}");
        let lists = KeyLists::new("bench_tool").with_key(KeyAllowlist::parse(KEY, Some(&[rule]))?);
        let mut config = EgressConfig::new(lists);
        config.resolver = std::sync::Arc::new(BenchResolver);
        config.loopback_names = true;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let proxy = {
            let _entered = runtime.enter();
            EgressProxy::serve(vec![listener], config)?
        };
        Ok(AutotoolProxy {
            addr,
            proxy: Some(proxy),
            runtime: Some(runtime),
        })
    }
}

impl Drop for AutotoolProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            let _entered = runtime.enter();
            self.proxy.take();
            drop(_entered);
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// tinyproxy

/// A tinyproxy process the bench started, killed when dropped.
struct Tinyproxy {
    child: Child,
    addr: SocketAddr,
    binary: PathBuf,
    version: String,
    dir: tempfile::TempDir,
}

impl Tinyproxy {
    fn start(binary: Option<&Path>, upstream_port: u16) -> Result<Tinyproxy> {
        let binary = match binary {
            Some(b) => b.to_path_buf(),
            None => find_on_path("tinyproxy").ok_or_else(|| {
                anyhow!("tinyproxy is not on PATH (Debian: apt-get install tinyproxy-bin)")
            })?,
        };
        let version = Command::new(&binary)
            .arg("-v")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "version unknown".into());
        let dir = tempfile::Builder::new()
            .prefix("egress-bench-tinyproxy-")
            .tempdir()?;
        // A free port: bound and let go (tinyproxy binds it a moment later).
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let filter = dir.path().join("filter");
        std::fs::write(&filter, "^localhost$\n")?;
        let log = dir.path().join("tinyproxy.log");
        let config = dir.path().join("tinyproxy.conf");
        std::fs::write(
            &config,
            format!(
                "Port {port}\n\
                 Listen 127.0.0.1\n\
                 Timeout 60\n\
                 MaxClients 100\n\
                 Allow 127.0.0.1\n\
                 LogFile \"{}\"\n\
                 LogLevel Warning\n\
                 Filter \"{}\"\n\
                 FilterType ere\n\
                 FilterURLs Off\n\
                 FilterDefaultDeny Yes\n\
                 ConnectPort {upstream_port}\n\
                 DisableViaHeader Yes\n",
                log.display(),
                filter.display()
            ),
        )?;
        let stderr = std::fs::File::create(dir.path().join("stderr"))?;
        let child = Command::new(&binary)
            .arg("-d")
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let mut proxy = Tinyproxy {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            binary,
            version,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = proxy.child.try_wait()? {
                bail!("tinyproxy exited at start ({status}): {}", proxy.output());
            }
            // Listening once it answers a request (one its filter refuses): a probe that
            // closed without asking would be logged as an error.
            if let Ok(mut probe) = TcpStream::connect(proxy.addr) {
                probe.set_read_timeout(Some(IO_TIMEOUT))?;
                connect(&mut probe, &format!("127.0.0.1:{upstream_port}"))
                    .context("tinyproxy's first answer")?;
                return Ok(proxy);
            }
            if Instant::now() > deadline {
                bail!(
                    "tinyproxy did not listen on {} within 5 s: {}",
                    proxy.addr,
                    proxy.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its stderr and log, for an error message.
    fn output(&self) -> String {
        let read =
            |name: &str| std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        format!("{}{}", read("stderr"), read("tinyproxy.log"))
            .trim()
            .chars()
            .take(2000)
            .collect()
    }

    /// What it logged: at this level nothing per request, which is checked here.
    fn report_log(&self) {
        let log =
            std::fs::read_to_string(self.dir.path().join("tinyproxy.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        println!(
            "  tinyproxy wrote {} log line(s) in the whole run (LogLevel Warning){}",
            lines.len(),
            if lines.is_empty() { "" } else { ", the last:" }
        );
        for line in lines.iter().rev().take(3).rev() {
            println!("    {line}");
        }
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}
