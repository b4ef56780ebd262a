//! `redact-bench`: the redactor's throughput with 100 keys, side by side with a plain scan.
//!
//! Every byte bound for the model passes `autotool::redact`, which finds each key's value in
//! every reading of the text (each `%HH`, `\uHHHH` or short JSON escape decoded or not). This
//! bench measures what that costs on typical tool output, against what the cheapest possible
//! redaction would cost: **aho-corasick** over the raw values only (leftmost-longest, its own
//! prefilter on, the matches replaced), which finds no encoded value at all. Both run over the
//! same bytes, interleaved within each round:
//! - **results**: `Redactor::redact_bytes` once per 256 KiB (the default output cap), as a
//!   tool's answers are redacted;
//! - **stream**: one `StreamRedactor` over the whole text in 64 KiB chunks, as a tool's stderr
//!   and the log are;
//! - **aho-corasick**: the raw-value scan, per 256 KiB.
//!
//! The texts (64 MiB each by default, the same every run: a fixed pseudo-random sequence):
//! JSON API answers (`\"`, `\n`, `\u00e9` and `%20` every few dozen bytes) with no key in them;
//! the same with a key written raw in every 64 KiB; the same with a key in every 64 KiB written
//! in a mixture of percent-encoding and JSON escapes (which aho-corasick cannot find); log lines
//! with no key; and, for scale only, text made of nothing but escapes. Before timing, the bench
//! checks that each variant found what was planted.
//!
//! Time is the bench thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), so other work on a shared
//! machine does not stretch it; the wall clock is printed beside it. Figures are medians over
//! the rounds. It prints GB/s and ratios and whether the target (≥ 1 GB/s with 100 keys on the
//! typical texts) is met, asserts nothing, and exits 1 only when a check of what was found
//! failed.

// Comparisons of medians are serve-bench's; this bench only summarises.
#[allow(dead_code)]
#[path = "../stats.rs"]
mod stats;

use aho_corasick::{AhoCorasick, MatchKind};
use anyhow::{Context, Result, bail};
use autotool::redact::{Redactor, StreamRedactor};
use clap::Parser;
use stats::Summary;
use std::borrow::Cow;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The target: GB/s with 100 keys on typical tool output.
const TARGET_GBPS: f64 = 1.0;
/// The size of a result: the default output cap.
const RESULT: usize = 256 * 1024;
/// The chunk size of the stream.
const CHUNK: usize = 64 * 1024;
/// One key is planted in the middle of every block of this size.
const BLOCK: usize = 64 * 1024;

#[derive(Debug, Parser)]
#[command(
    name = "redact-bench",
    about = "The redactor with 100 keys against a plain aho-corasick scan of the raw values, \
             side by side on the same text",
    after_help = "Run: cargo run --release -p autotool-bench --bin redact-bench"
)]
struct Args {
    /// Size of each text, in MiB.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    size_mib: u16,
    /// Rounds; each runs every variant once, interleaved.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=1000))]
    rounds: u16,
    /// How many keys the redactor knows.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=10000))]
    keys: u16,
    /// Measure only the texts whose name contains this (e.g. `encoded`).
    #[arg(long)]
    only: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("redact-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A fixed pseudo-random sequence (xorshift), so the texts are the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        // `n` is a small length; the modulo bias is of no matter here.
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The keys: four in five token-like (`sk-proj-` and 40 letters and digits), the rest
/// base64-like with `+`, `/` and `==`.
fn keys(n: usize) -> Vec<(String, Vec<u8>)> {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|i| {
            let value: Vec<u8> = if i % 5 != 4 {
                let mut v = b"sk-proj-".to_vec();
                v.extend((0..40).map(|_| *rng.pick(ALNUM)));
                v
            } else {
                let mut v: Vec<u8> = (0..42).map(|_| *rng.pick(B64)).collect();
                v.extend_from_slice(b"==");
                v
            };
            (format!("KEY_{i:03}"), value)
        })
        .collect()
}

const TITLES: &[&str] = &[
    "Re: \\\"quoted\\\" title",
    "Caf\\u00e9 menu",
    "plain title",
    "line one\\nline two",
    "path C:\\\\temp",
];

const LOGS: &[&str] = &[
    "INFO request GET /v1/search?q=foo%20bar status=200 dur=12ms",
    "DEBUG cache hit key=user:1234 ttl=300",
    "WARN retrying upstream=api.example.com attempt=2",
    "INFO request POST /v1/items status=201 dur=48ms bytes=1532",
    "ERROR upstream timed out after 30s",
];

const WORDS: &[&str] = &[
    "the", "result", "id", "12345", "name", "value", "error", "data",
];

fn json_answer(rng: &mut Rng, out: &mut Vec<u8>) {
    let id = rng.next() % 100_000;
    let title = rng.pick(TITLES);
    out.extend_from_slice(
        format!(
            "{{\"id\":{id},\"title\":\"{title}\",\"url\":\"https://api.example.com/v1/items/{id}\
             ?q=a%20b&sort=desc\",\"body\":\"First line\\nSecond \\\"line\\\" \\u00e9t\\u00e9\",\
             \"tags\":[\"x\",\"y\"],\"score\":0.5}},\n"
        )
        .as_bytes(),
    );
}

fn log_line(rng: &mut Rng, out: &mut Vec<u8>) {
    let s = rng.next() % 60;
    out.extend_from_slice(format!("2026-12-01T10:00:{s:02}Z {}\n", rng.pick(LOGS)).as_bytes());
}

/// Every byte `%HH`, or `\u00hh` one time in three.
fn dense(bytes: &[u8], out: &mut Vec<u8>) {
    for (i, &b) in bytes.iter().enumerate() {
        let e = if i % 3 == 2 {
            format!("\\u00{b:02x}")
        } else {
            format!("%{b:02X}")
        };
        out.extend_from_slice(e.as_bytes());
    }
}

fn only_escapes(rng: &mut Rng, out: &mut Vec<u8>) {
    dense(rng.pick(WORDS).as_bytes(), out);
    out.extend_from_slice(b"%20");
}

/// A key as a tool might echo it from a query string or a JSON string: each byte raw, `%HH`,
/// `%hh` or `\u00HH`.
fn mixed(value: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in value {
        match rng.below(4) {
            0 => out.push(b),
            1 => out.extend_from_slice(format!("%{b:02X}").as_bytes()),
            2 => out.extend_from_slice(format!("%{b:02x}").as_bytes()),
            _ => out.extend_from_slice(format!("\\u00{b:02X}").as_bytes()),
        }
    }
    out
}

/// How a text holds its keys.
#[derive(Clone, Copy, PartialEq)]
enum Plant {
    None,
    Raw,
    Mixed,
}

struct Text {
    name: &'static str,
    bytes: Vec<u8>,
    planted: usize,
    plant: Plant,
    /// Whether the target applies (typical tool output).
    typical: bool,
}

/// `piece` again and again up to `size`, with a key (written as `plant` says) in the middle of
/// every block.
fn text(
    name: &'static str,
    size: usize,
    keys: &[(String, Vec<u8>)],
    rng: &mut Rng,
    piece: fn(&mut Rng, &mut Vec<u8>),
    plant: Plant,
    typical: bool,
) -> Text {
    let mut bytes = Vec::with_capacity(size + BLOCK);
    let mut planted = 0;
    while bytes.len() < size {
        let block = bytes.len();
        while bytes.len() < block + BLOCK / 2 {
            piece(rng, &mut bytes);
        }
        let value = &rng.pick(keys).1;
        match plant {
            Plant::None => {}
            Plant::Raw => bytes.extend_from_slice(value),
            Plant::Mixed => bytes.extend(mixed(value, rng)),
        }
        planted += usize::from(plant != Plant::None);
        while bytes.len() < block + BLOCK {
            piece(rng, &mut bytes);
        }
        // Cut mid-piece, so that every block is the same size and no key straddles a result.
        bytes.truncate(block + BLOCK);
    }
    Text {
        name,
        bytes,
        planted,
        plant,
        typical,
    }
}

/// The plain scan: the raw values, leftmost-longest, replaced.
struct Plain {
    ac: AhoCorasick,
    names: Vec<Vec<u8>>,
}

impl Plain {
    fn new(keys: &[(String, Vec<u8>)]) -> Result<Plain> {
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(keys.iter().map(|(_, v)| v))
            .context("building the aho-corasick automaton")?;
        let names = keys
            .iter()
            .map(|(n, _)| format!("[REDACTED:{n}]").into_bytes())
            .collect();
        Ok(Plain { ac, names })
    }

    fn redact<'t>(&self, text: &'t [u8]) -> Cow<'t, [u8]> {
        let mut out: Option<Vec<u8>> = None;
        let mut last = 0;
        for m in self.ac.find_iter(text) {
            let o = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            o.extend_from_slice(&text[last..m.start()]);
            o.extend_from_slice(&self.names[m.pattern().as_usize()]);
            last = m.end();
        }
        match out {
            Some(mut o) => {
                o.extend_from_slice(&text[last..]);
                Cow::Owned(o)
            }
            None => Cow::Borrowed(text),
        }
    }
}

fn results(r: &Redactor, text: &[u8]) -> Vec<u8> {
    text.chunks(RESULT)
        .flat_map(|t| r.redact_bytes(t).into_owned())
        .collect()
}

fn streamed(r: &Redactor, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut s = StreamRedactor::new(r);
    for chunk in text.chunks(CHUNK) {
        s.push(chunk, &mut out);
    }
    s.finish(&mut out);
    out
}

fn replacements(out: &[u8]) -> usize {
    memchr::memmem::find_iter(out, b"[REDACTED:").count()
}

/// Whether each variant finds what was planted: the redactor every key however written, the
/// plain scan only the raw ones.
fn check(r: &Redactor, plain: &Plain, t: &Text) -> Result<()> {
    let out = results(r, &t.bytes);
    if replacements(&out) != t.planted {
        bail!(
            "{}: the redactor replaced {} values, {} were planted",
            t.name,
            replacements(&out),
            t.planted
        );
    }
    if streamed(r, &t.bytes) != out {
        bail!("{}: the stream's output differs from the results'", t.name);
    }
    let found = replacements(
        &t.bytes
            .chunks(RESULT)
            .flat_map(|c| plain.redact(c).into_owned())
            .collect::<Vec<u8>>(),
    );
    let expect = if t.plant == Plant::Raw { t.planted } else { 0 };
    if found != expect {
        bail!(
            "{}: aho-corasick replaced {found} values, expected {expect}",
            t.name
        );
    }
    Ok(())
}

/// CPU time this thread has run.
fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The CPU and wall time of one run of `f`.
fn time(mut f: impl FnMut() -> usize, sink: &mut usize) -> (Duration, Duration) {
    let (cpu, wall) = (thread_cpu(), Instant::now());
    *sink = sink.wrapping_add(f());
    (thread_cpu().saturating_sub(cpu), wall.elapsed())
}

#[derive(Default)]
struct Sample {
    cpu: Vec<Duration>,
    wall: Vec<Duration>,
}

impl Sample {
    fn push(&mut self, (cpu, wall): (Duration, Duration)) {
        self.cpu.push(cpu);
        self.wall.push(wall);
    }

    /// Median GB/s over `len` bytes: by CPU time, by the wall clock.
    fn gbps(&self, len: usize) -> Option<(f64, f64)> {
        let rate = |s: &[Duration]| {
            Summary::of(s).map(|m| len as f64 / 1e9 / (m.median_ms / 1e3).max(1e-9))
        };
        Some((rate(&self.cpu)?, rate(&self.wall)?))
    }
}

fn run(args: &Args) -> Result<bool> {
    let size = usize::from(args.size_mib) << 20;
    let keys = keys(usize::from(args.keys));
    let r = Redactor::new(&keys).context("building the redactor")?;
    let plain = Plain::new(&keys)?;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let texts = [
        text(
            "JSON answers, no key",
            size,
            &keys,
            &mut rng,
            json_answer,
            Plant::None,
            true,
        ),
        text(
            "JSON answers, keys raw",
            size,
            &keys,
            &mut rng,
            json_answer,
            Plant::Raw,
            true,
        ),
        text(
            "JSON answers, keys encoded",
            size,
            &keys,
            &mut rng,
            json_answer,
            Plant::Mixed,
            true,
        ),
        text(
            "log lines, no key",
            size,
            &keys,
            &mut rng,
            log_line,
            Plant::None,
            true,
        ),
        text(
            "only escapes, keys encoded",
            size,
            &keys,
            &mut rng,
            only_escapes,
            Plant::Mixed,
            false,
        ),
    ];
    let texts: Vec<Text> = texts
        .into_iter()
        .filter(|t| {
            args.only
                .as_ref()
                .is_none_or(|o| t.name.contains(o.as_str()))
        })
        .collect();
    for t in &texts {
        if let Err(e) = check(&r, &plain, t) {
            eprintln!("redact-bench: {e:#}");
            return Ok(false);
        }
    }
    println!(
        "redact-bench: {} keys ({} values searched, prefilter {}), {} MiB per text, {} rounds, \
         {}",
        r.names().len(),
        r.pattern_count(),
        if r.has_prefilter() { "on" } else { "off" },
        args.size_mib,
        args.rounds,
        if cfg!(debug_assertions) {
            "DEBUG BUILD (figures mean nothing; use --release)"
        } else {
            "release build"
        },
    );
    println!("GB/s by CPU time (wall clock in brackets), medians; ratio = redactor / aho-corasick");
    let mut met = true;
    let mut sink = 0usize;
    for t in &texts {
        let (mut res, mut stream, mut ac) =
            (Sample::default(), Sample::default(), Sample::default());
        for _ in 0..args.rounds {
            res.push(time(
                || {
                    t.bytes
                        .chunks(RESULT)
                        .map(|c| r.redact_bytes(c).len())
                        .sum()
                },
                &mut sink,
            ));
            stream.push(time(
                || {
                    let mut out = Vec::with_capacity(2 * CHUNK);
                    let mut s = StreamRedactor::new(&r);
                    let mut n = 0;
                    for chunk in t.bytes.chunks(CHUNK) {
                        out.clear();
                        s.push(chunk, &mut out);
                        n += out.len();
                    }
                    out.clear();
                    s.finish(&mut out);
                    n + out.len()
                },
                &mut sink,
            ));
            ac.push(time(
                || t.bytes.chunks(RESULT).map(|c| plain.redact(c).len()).sum(),
                &mut sink,
            ));
        }
        let len = t.bytes.len();
        let (Some(res), Some(stream), Some(ac)) = (res.gbps(len), stream.gbps(len), ac.gbps(len))
        else {
            bail!("no rounds were run");
        };
        let verdict = if !t.typical {
            "(no target)".to_owned()
        } else if res.0.min(stream.0) >= TARGET_GBPS {
            format!("target ≥ {TARGET_GBPS} GB/s met")
        } else {
            met = false;
            format!("target ≥ {TARGET_GBPS} GB/s NOT met")
        };
        println!(
            "  {:<28} {:>3} keys planted: results {:.2} ({:.2}), stream {:.2} ({:.2}), \
             aho-corasick {:.2} ({:.2}); ratio ×{:.2} results, ×{:.2} stream; {verdict}",
            t.name,
            t.planted,
            res.0,
            res.1,
            stream.0,
            stream.1,
            ac.0,
            ac.1,
            res.0 / ac.0,
            stream.0 / ac.0,
        );
    }
    // Keeps the measured work from being optimised away.
    if sink == 0 {
        println!("(nothing was measured)");
    }
    println!(
        "{}",
        if met {
            "all targets met"
        } else {
            "some targets not met"
        }
    );
    Ok(true)
}
