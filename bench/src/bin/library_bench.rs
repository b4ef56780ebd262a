//! `library-bench`: what a large library costs `autotool serve`, measured in one run.
//!
//! It registers N tools (1,000 by default) straight through `autotool::registry::Registry`, as
//! verification would have committed them: several functions each with input and output
//! schemas, names and descriptions drawn from a word list, a `tool.py` per version; and a
//! ledger of past calls spread over them (so the health and usage queries a reload runs have
//! work to do). No Python runs: serve mounts the tools and starts no process until a call.
//!
//! Then it starts a release `autotool serve` on that home (strict sandbox, as a host would) and,
//! over stdio, from a client of its own:
//! - (a) `tools/list`: request written → answer read, R times (the list limit applies: the
//!   built-ins and the most used tools);
//! - (b) `search_tools {query}` for queries drawn from the same words, R times;
//! - (c) the resident memory of the idle serve (`VmRSS` from `/proc/<pid>/status`) after the
//!   measurements and a settle delay.
//!
//! Beside them, for scale: a second serve on the same home with the limit off
//! (`AUTOTOOL_LIST_LIMIT=0`, every function listed), its `tools/list` and its memory; serve on
//! an empty home, its memory; and what every registry change costs serve, `App::reload_with`
//! timed in the bench process on the same home.
//!
//! It prints figures and whether each target is met, asserts nothing, and exits 1
//! only when a part could not run (2 when nothing could be set up).

// Comparisons of medians are serve-bench's; this bench only summarises.
#[allow(dead_code)]
#[path = "../stats.rs"]
mod stats;

use anyhow::{Context, Result, bail};
use autotool::home::Home;
use autotool::ledger::{CallKind, CallRecord};
use autotool::registry::{FunctionSpec, Manifest, Registry};
use clap::Parser;
use serde_json::{Map, Value, json};
use stats::Summary;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";
const PROTOCOL: &str = "2025-11-25";
/// The targets.
const TARGET_LIST_MS: f64 = 20.0;
const TARGET_SEARCH_MS: f64 = 10.0;
const TARGET_RSS_MIB: f64 = 60.0;

/// The words tool names, descriptions, functions and queries are drawn from.
const WORDS: &[&str] = &[
    "weather",
    "forecast",
    "city",
    "stock",
    "price",
    "quote",
    "invoice",
    "customer",
    "order",
    "shipment",
    "tracking",
    "email",
    "calendar",
    "event",
    "meeting",
    "translate",
    "language",
    "currency",
    "exchange",
    "rate",
    "news",
    "headline",
    "article",
    "search",
    "web",
    "image",
    "resize",
    "thumbnail",
    "pdf",
    "extract",
    "text",
    "summary",
    "repository",
    "issue",
    "pull",
    "request",
    "commit",
    "branch",
    "deploy",
    "server",
    "status",
    "uptime",
    "metric",
    "alert",
    "ticket",
    "support",
    "chat",
    "message",
    "channel",
    "user",
    "account",
    "balance",
    "transaction",
    "payment",
    "refund",
    "subscription",
    "plan",
    "product",
    "catalog",
    "inventory",
    "warehouse",
    "flight",
    "hotel",
    "booking",
    "trip",
    "route",
    "map",
    "distance",
    "address",
    "geocode",
    "timezone",
    "holiday",
    "recipe",
    "ingredient",
    "nutrition",
    "movie",
    "rating",
    "review",
    "book",
    "author",
    "library",
    "song",
    "playlist",
    "podcast",
    "episode",
    "video",
    "transcript",
    "caption",
    "crypto",
    "wallet",
    "block",
    "contract",
    "domain",
    "dns",
    "certificate",
    "ip",
    "location",
    "sensor",
    "temperature",
    "humidity",
    "energy",
    "meter",
    "tariff",
    "tax",
    "report",
    "spreadsheet",
    "row",
    "column",
    "database",
    "query",
    "table",
    "record",
    "backup",
    "file",
    "folder",
    "share",
    "link",
    "password",
    "secret",
    "token",
    "identity",
    "profile",
    "contact",
    "lead",
    "deal",
    "pipeline",
    "campaign",
    "newsletter",
    "survey",
    "form",
    "answer",
    "question",
    "quiz",
    "score",
    "game",
    "player",
    "team",
    "match",
    "league",
    "election",
    "poll",
    "vote",
    "law",
    "court",
    "patent",
    "company",
    "filing",
];
const VERBS: &[&str] = &[
    "get",
    "list",
    "find",
    "create",
    "update",
    "delete",
    "fetch",
    "lookup",
    "convert",
    "check",
    "send",
    "count",
    "compare",
    "summarize",
    "export",
];
/// Parameter names the schemas use.
const PARAMS: &[(&str, &str)] = &[
    ("query", "string"),
    ("id", "string"),
    ("limit", "integer"),
    ("city", "string"),
    ("date", "string"),
    ("amount", "number"),
    ("currency", "string"),
    ("include_details", "boolean"),
    ("page", "integer"),
    ("language", "string"),
];

#[derive(Debug, Parser)]
#[command(
    name = "library-bench",
    about = "What a large library costs autotool serve: tools/list and search_tools latency and \
             idle memory with N tools registered",
    after_help = "Build first: cargo build --release -p autotool -p autotool-launcher\n\
                  Then: cargo run --release -p autotool-bench --bin library-bench"
)]
struct Args {
    /// Tools registered.
    #[arg(long, default_value_t = 1000)]
    tools: usize,
    /// Past calls recorded in the ledger, spread over the tools (1 in 10 failed).
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Measured requests of each kind.
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// Unmeasured requests of each kind first.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Milliseconds serve is left idle after `initialize` before measuring, and after the
    /// measurements before its memory is read (its first look at every tool's file, and the
    /// watcher's re-hash of files younger than 2 s, fall in the first).
    #[arg(long, default_value_t = 3000)]
    settle_ms: u64,
    /// Also measure a serve with the list limit off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    unlimited: bool,
    /// The Python runtime [default: $AUTOTOOL_TEST_RUNTIME or /opt/autotool-test-runtime]
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// The `autotool` binary [default: next to this binary, i.e. target/release/autotool]
    #[arg(long)]
    autotool: Option<PathBuf>,
    /// autotool-launcher [default: next to the autotool binary]
    #[arg(long)]
    launcher: Option<PathBuf>,
    /// Seconds one request may take before the bench gives up on it.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Keep the temporary home (its serve.log and ledger) and print where it is.
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("library-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

struct Setup {
    autotool: PathBuf,
    launcher: PathBuf,
    runtime: PathBuf,
    home: PathBuf,
    timeout: Duration,
}

/// A small deterministic generator, so every run registers the same library.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next()).unwrap_or(0) % n.max(1)
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len())]
    }
}

fn real_main() -> Result<bool> {
    let args = Args::parse();
    let runtime = args
        .runtime
        .clone()
        .or_else(|| std::env::var_os("AUTOTOOL_TEST_RUNTIME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME));
    let autotool = match &args.autotool {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locate this binary")?
            .with_file_name("autotool"),
    };
    if !autotool.is_file() {
        bail!(
            "autotool not found at {} — build it with `cargo build --release -p autotool -p \
             autotool-launcher` or pass --autotool PATH",
            autotool.display()
        );
    }
    let launcher = args
        .launcher
        .clone()
        .unwrap_or_else(|| autotool.with_file_name("autotool-launcher"));
    if !launcher.is_file() {
        bail!(
            "autotool-launcher not found at {} — build it or pass --launcher PATH",
            launcher.display()
        );
    }
    let tempdir = tempfile::Builder::new()
        .prefix("library-bench-")
        .tempdir()
        .context("create a temporary directory")?;
    let setup = Setup {
        autotool,
        launcher,
        runtime,
        home: tempdir.path().join("home"),
        timeout: Duration::from_secs(args.timeout.max(1)),
    };

    println!(
        "library-bench: {} tools registered, {} past calls; {} measured requests of each kind \
         (+{} warm-up)",
        args.tools, args.calls, args.rounds, args.warmup
    );
    println!("  autotool {}", setup.autotool.display());
    println!(
        "  running as uid {}, on {} cores, load average {}",
        nix::unistd::getuid(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );

    let t0 = Instant::now();
    let library = register(&setup.home, args.tools, args.calls).context("register the tools")?;
    println!(
        "  registered {} tools ({} functions) and {} calls through autotool::registry in {:.1} s",
        args.tools,
        library.functions,
        args.calls,
        t0.elapsed().as_secs_f64()
    );

    let mut all_ran = true;
    let reload = match time_reload(&setup.home, 20) {
        Ok(r) => Some(r),
        Err(e) => {
            println!("  reload FAILED: {e:#}");
            all_ran = false;
            None
        }
    };
    let settle = Duration::from_millis(args.settle_ms);
    let limited = match measure(&setup, &args, &library, None, settle) {
        Ok(m) => Some(m),
        Err(e) => {
            println!("  serve (list limit on) FAILED: {e:#}");
            all_ran = false;
            None
        }
    };
    let unlimited = if args.unlimited {
        match measure(&setup, &args, &library, Some(0), settle) {
            Ok(m) => Some(m),
            Err(e) => {
                println!("  serve (list limit off) FAILED: {e:#}");
                all_ran = false;
                None
            }
        }
    } else {
        None
    };

    let empty = match idle_empty(&setup, tempdir.path(), settle) {
        Ok(m) => Some(m),
        Err(e) => {
            println!("  serve on an empty home FAILED: {e:#}");
            all_ran = false;
            None
        }
    };

    println!();
    println!(
        "  {:<28} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "serve (ms, MiB)",
        "entries",
        "list p50",
        "list max",
        "search50",
        "searchmax",
        "VmRSS",
        "RssAnon"
    );
    for (label, m) in [
        ("default limit (40 entries)", &limited),
        ("no limit", &unlimited),
    ] {
        let Some(m) = m else { continue };
        let search = |f: fn(&Summary) -> f64| {
            m.search
                .as_ref()
                .map(|s| format!("{:.2}", f(s)))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "  {:<28} {:>7} {:>9.2} {:>9.2} {:>9} {:>9} {:>7.1} {:>7.1}",
            label,
            m.entries,
            m.list.median_ms,
            m.list.max_ms,
            search(|s| s.median_ms),
            search(|s| s.max_ms),
            mib(m.after.rss),
            mib(m.after.anon)
        );
    }
    if let Some(e) = &empty {
        println!(
            "  {:<28} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7.1} {:>7.1}",
            "empty home, for scale",
            autotool::mcp::listing::BUILTINS,
            "-",
            "-",
            "-",
            "-",
            mib(e.rss),
            mib(e.anon)
        );
    }
    if let Some(m) = &limited {
        println!(
            "  default limit: spawn → initialize answered {:.0} ms; tools/list answer {} bytes; \
             search_tools answer {} bytes and {:.1} results on average; idle RSS before the \
             requests {:.1} MiB, peak {:.1} MiB",
            ms(m.ready),
            m.list_bytes,
            m.search_bytes,
            m.search_results,
            mib(m.before.rss),
            mib(m.after.hwm)
        );
    }
    if let Some(r) = &reload {
        println!(
            "  a reload of the mounted snapshot (every registry change: read the tools, their \
             recent calls and usage in one query each, build the search index and the list), in \
             the bench process: median {:.1} ms (min {:.1}, max {:.1}, {} runs)",
            r.median_ms, r.min_ms, r.max_ms, r.runs
        );
    }
    if let Some(m) = &unlimited {
        println!(
            "  no limit: spawn → initialize answered {:.0} ms; tools/list answer {} bytes; peak \
             {:.1} MiB",
            ms(m.ready),
            m.list_bytes,
            mib(m.after.hwm)
        );
    }

    println!();
    match &limited {
        Some(m) => {
            let list = m.list.median_ms;
            let search = m.search.map_or(f64::NAN, |s| s.median_ms);
            let rss = mib(m.after.rss);
            println!(
                "verdict (medians, {} tools): tools/list {list:.2} ms (≤ {TARGET_LIST_MS} ms: \
                 {}); search_tools {search:.2} ms (≤ {TARGET_SEARCH_MS} ms: {}); idle RSS \
                 {rss:.1} MiB (≤ {TARGET_RSS_MIB} MB: {})",
                args.tools,
                met(list <= TARGET_LIST_MS),
                met(search <= TARGET_SEARCH_MS),
                met(rss <= TARGET_RSS_MIB)
            );
        }
        None => println!("verdict: nothing measured"),
    }
    if args.keep {
        println!("kept: {}", tempdir.keep().display());
    }
    Ok(all_ran)
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

// ---------------------------------------------------------------------------------------------
// The library

struct Library {
    functions: usize,
    /// Queries for `search_tools`, drawn from the tools' own words.
    queries: Vec<String>,
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// One function as verification records it for `def {name}(…) -> str` on the `mcp` SDK.
fn function(rng: &mut Lcg, name: &str) -> FunctionSpec {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let (p, ty) = PARAMS[rng.below(PARAMS.len())];
        if properties.contains_key(p) {
            continue;
        }
        let title: String = p
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join(" ");
        properties.insert(p.into(), json!({"title": title, "type": ty}));
        if rng.below(2) == 0 {
            required.push(json!(p));
        }
    }
    let description = format!(
        "{} the {} {} for a {}; returns the {} as JSON text.",
        capitalised(VERBS[rng.below(VERBS.len())]),
        rng.word(),
        rng.word(),
        rng.word(),
        rng.word()
    );
    FunctionSpec {
        name: name.into(),
        title: None,
        description: Some(description),
        input_schema: object(json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "title": format!("{name}Arguments"),
        })),
        output_schema: Some(object(json!({
            "type": "object",
            "properties": {"result": {"title": "Result", "type": "string"}},
            "required": ["result"],
            "title": format!("{name}Output"),
        }))),
        annotations: None,
    }
}

fn capitalised(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// The source a tool with these functions would have (it is never run here).
fn tool_source(name: &str, functions: &[FunctionSpec]) -> String {
    let mut code = format!(
        "\"\"\"{name}: registered by library-bench.\"\"\"\n\nimport os\n\nimport httpx2\nfrom \
         mcp.server.mcpserver import MCPServer\n\nREQUIRED_ENV = []\nmcp = \
         MCPServer({name:?})\n"
    );
    for f in functions {
        let params: Vec<String> = f
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .map(|(k, v)| {
                        let ty = match v["type"].as_str() {
                            Some("integer") => "int",
                            Some("number") => "float",
                            Some("boolean") => "bool",
                            _ => "str",
                        };
                        format!("{k}: {ty}")
                    })
                    .collect()
            })
            .unwrap_or_default();
        code.push_str(&format!(
            "\n\n@mcp.tool()\ndef {}({}) -> str:\n    \"\"\"{}\"\"\"\n    base = \
             os.environ.get(\"BENCH_API_BASE\", \"https://api.example\")\n    return \
             httpx2.get(f\"{{base}}/{}\").text\n",
            f.name,
            params.join(", "),
            f.description.as_deref().unwrap_or(""),
            f.name
        ));
    }
    code.push_str("\n\nif __name__ == \"__main__\":\n    mcp.run()\n");
    code
}

/// Register `count` tools and `calls` past calls in a fresh home at `root`.
fn register(root: &Path, count: usize, calls: usize) -> Result<Library> {
    std::fs::create_dir_all(root)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
    let registry = Registry::open(&Home::at(root))?;
    let mut rng = Lcg(0x5eed);
    let mut names = Vec::with_capacity(count);
    let mut total = 0;
    let mut queries = Vec::new();
    for i in 0..count {
        let (a, b) = (rng.word(), rng.word());
        let name = format!("{a}_{b}_{i}");
        let n = 2 + rng.below(4);
        let mut functions: Vec<FunctionSpec> = Vec::with_capacity(n);
        for _ in 0..n {
            let f = format!("{}_{}", VERBS[rng.below(VERBS.len())], rng.word());
            if functions.iter().any(|x| x.name == f) {
                continue;
            }
            functions.push(function(&mut rng, &f));
        }
        total += functions.len();
        let description = format!(
            "{} {} tools: {} and {} for {} {}, from the {} API.",
            capitalised(a),
            b,
            rng.word(),
            rng.word(),
            rng.word(),
            rng.word(),
            rng.word()
        );
        if queries.len() < 50 && i % 7 == 0 {
            queries.push(format!("{a} {} {b}", rng.word()));
        }
        let tool = autotool_policy::names::ToolName::parse(&name)?;
        let staged = registry.stage(&tool, &tool_source(&name, &functions))?;
        registry.commit(
            staged,
            Manifest {
                description,
                required_env: Vec::new(),
                functions,
                packages: None,
                uses: Vec::new(),
                reach: Default::default(),
            },
        )?;
        names.push(name);
    }
    // Past calls: a few tools much used, most a little, some never; 1 in 10 failed.
    let now = SystemTime::now();
    for c in 0..calls {
        let skewed = rng
            .below(names.len().max(1))
            .min(rng.below(names.len().max(1)));
        let outcome = if rng.below(10) == 0 {
            CallKind::Failure
        } else {
            CallKind::Ok
        };
        registry.record_call(&CallRecord {
            tool: names[skewed].clone(),
            version: 1,
            function: "f".into(),
            started_at: now - Duration::from_secs(u64::try_from(c).unwrap_or(0) % 86_400),
            duration: Duration::from_millis(5),
            outcome,
            error: (outcome == CallKind::Failure).then(|| "upstream said 503".to_string()),
        })?;
    }
    Ok(Library {
        functions: total,
        queries,
    })
}

// ---------------------------------------------------------------------------------------------
// Measuring one serve

struct Measured {
    ready: Duration,
    entries: usize,
    list: Summary,
    list_bytes: usize,
    search: Option<Summary>,
    search_bytes: usize,
    search_results: f64,
    before: Mem,
    after: Mem,
}

fn measure(
    setup: &Setup,
    args: &Args,
    library: &Library,
    list_limit: Option<usize>,
    settle: Duration,
) -> Result<Measured> {
    let t0 = Instant::now();
    let mut serve = Rpc::spawn(setup, list_limit)?;
    serve.initialize(setup.timeout)?;
    let ready = t0.elapsed();
    std::thread::sleep(settle);
    let before = proc_status(serve.pid())?;

    let rounds = if list_limit == Some(0) {
        // A list of every function is large: fewer rounds tell enough.
        (args.rounds / 10).max(5)
    } else {
        args.rounds
    };
    let mut list_times = Vec::with_capacity(rounds);
    let mut entries = 0;
    let mut list_bytes = 0;
    for round in 0..args.warmup.min(rounds) + rounds {
        let (took, bytes, result) = serve.request("tools/list", json!({}), setup.timeout)?;
        entries = result["tools"].as_array().map_or(0, Vec::len);
        list_bytes = bytes;
        if round >= args.warmup.min(rounds) {
            list_times.push(took);
        }
    }

    let mut search = None;
    let (mut search_bytes, mut results) = (0usize, 0usize);
    if list_limit != Some(0) {
        let mut times = Vec::with_capacity(args.rounds);
        for round in 0..args.warmup + args.rounds {
            let query = &library.queries[round % library.queries.len().max(1)];
            let (took, bytes, result) = serve.request(
                "tools/call",
                json!({"name": "search_tools", "arguments": {"query": query}}),
                setup.timeout,
            )?;
            if result["isError"] == json!(true) {
                bail!("search_tools {query:?} failed: {result}");
            }
            if round >= args.warmup {
                times.push(took);
                search_bytes += bytes;
                results += result["structuredContent"]["results"]
                    .as_array()
                    .map_or(0, Vec::len);
            }
        }
        search = Summary::of(&times);
    }
    std::thread::sleep(settle);
    let after = proc_status(serve.pid())?;
    serve.close();
    let measured = args.rounds.max(1);
    Ok(Measured {
        ready,
        entries,
        list: Summary::of(&list_times).context("no tools/list timings")?,
        list_bytes,
        search,
        search_bytes: search_bytes / measured,
        search_results: results as f64 / measured as f64,
        before,
        after,
    })
}

/// What serve does on every registry change, timed in the bench process:
/// `Library::reload_with`.
fn time_reload(home: &Path, runs: usize) -> Result<Summary> {
    let app =
        autotool::library::Library::new(autotool::library::Settings::default(), Home::at(home))
            .context("open the home as serve does")?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        app.reload_with(true)?;
        times.push(t0.elapsed());
    }
    Summary::of(&times).context("no reload timings")
}

/// Serve on an empty home, idle after `initialize` and `tools/list`: its memory.
fn idle_empty(setup: &Setup, work: &Path, settle: Duration) -> Result<Mem> {
    let home = work.join("empty-home");
    std::fs::create_dir_all(&home)?;
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))?;
    let setup = Setup {
        autotool: setup.autotool.clone(),
        launcher: setup.launcher.clone(),
        runtime: setup.runtime.clone(),
        home,
        timeout: setup.timeout,
    };
    let mut serve = Rpc::spawn(&setup, None)?;
    serve.initialize(setup.timeout)?;
    serve.request("tools/list", json!({}), setup.timeout)?;
    std::thread::sleep(settle);
    let mem = proc_status(serve.pid())?;
    serve.close();
    Ok(mem)
}

/// A JSON-RPC client over serve's stdio: newline-delimited messages, one request at a time.
struct Rpc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Rpc {
    fn spawn(setup: &Setup, list_limit: Option<usize>) -> Result<Rpc> {
        let mut command = Command::new(&setup.autotool);
        command
            .args(["serve", "--sandbox", "strict"])
            .env("AUTOTOOL_HOME", &setup.home)
            .env("AUTOTOOL_RUNTIME", &setup.runtime)
            .env("AUTOTOOL_LAUNCHER", &setup.launcher)
            .env_remove("AUTOTOOL_SANDBOX")
            .env_remove("AUTOTOOL_LIST_LIMIT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(n) = list_limit {
            command.env("AUTOTOOL_LIST_LIMIT", n.to_string());
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("start {} serve", setup.autotool.display()))?;
        let stdin = child.stdin.take().context("serve's stdin")?;
        let stdout = child.stdout.take().context("serve's stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Rpc {
            child,
            stdin: Some(stdin),
            lines,
            next_id: 1,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin
            .as_mut()
            .context("stdin already closed")?
            .write_all(&line)
            .context("write to serve")
    }

    /// Send a request and wait for its answer (notifications are skipped). Returns the time
    /// from the write to the answer, the answer's size and its `result`.
    fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<(Duration, usize, Value)> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let t0 = Instant::now();
        self.send(&message)?;
        loop {
            let left = timeout.saturating_sub(t0.elapsed());
            let line = self
                .lines
                .recv_timeout(left)
                .with_context(|| format!("no answer to {method} within {timeout:?}"))?;
            let took = t0.elapsed();
            let answer: Value = serde_json::from_str(&line)
                .with_context(|| format!("serve wrote a line that is not JSON: {line:.200}"))?;
            if answer.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(e) = answer.get("error") {
                bail!("serve answered {method} with an error: {e}");
            }
            return Ok((
                took,
                line.len(),
                answer.get("result").cloned().unwrap_or(Value::Null),
            ));
        }
    }

    fn initialize(&mut self, timeout: Duration) -> Result<()> {
        self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "library-bench", "version": env!("CARGO_PKG_VERSION")},
            }),
            timeout,
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }

    /// Close stdin and wait a while for the exit; kill it if it lingers.
    fn close(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Memory of a process from `/proc/<pid>/status`, in KiB.
#[derive(Debug, Clone, Copy)]
struct Mem {
    rss: u64,
    hwm: u64,
    anon: u64,
}

fn proc_status(pid: u32) -> Result<Mem> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let m = Mem {
        rss: field("VmRSS:"),
        hwm: field("VmHWM:"),
        anon: field("RssAnon:"),
    };
    if m.rss == 0 {
        bail!("/proc/{pid}/status has no VmRSS");
    }
    Ok(m)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}
