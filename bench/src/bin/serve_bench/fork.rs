//! (e), (f): tools forked from the runtime's template (`fork_tools` on, serve's default) against
//! tools started through `autotool-launcher` (`AUTOTOOL_FORK_TOOLS=off`, today's path), side by
//! side in one run.
//!
//! - (e) two serves, one per mode, on homes of their own. Each creates the same R small tools
//!   (smoke test and robustness probes; `create_tool` timed, the two serves interleaved tool by
//!   tool). Both are then restarted on the same homes, so no tool process runs; once the fork
//!   serve has logged `tool template ready`, each tool's first call is timed on both serves,
//!   interleaved with a bare `python3 -I -c pass` of the same interpreter (spawn → exit). Then,
//!   every tool warm, a warm call through each serve against the same call straight to an
//!   *unconfined* tool process (the runtime's interpreter run directly on the tool file, no
//!   launcher), interleaved call by call; and the memory of each serve's process tree.
//! - (f) K tools (100) pre-registered on a fresh home, all called once so every one is warm,
//!   then the proportional set size (PSS) and private dirty memory of serve and every process
//!   under it, from `/proc/<pid>/smaps_rollup`; one serve per mode, one after the other (both at
//!   once would make each other's figures).
//!
//! A tool's tree is every process it runs as: launched, the launcher, its init and the tool;
//! forked, the forked waiter, its init and the tool. The template's own tree (its launcher, init
//! and the template interpreter) is reported apart, and also shared out over the tools.

use super::*;
use std::collections::HashMap;

/// Targets from the plan (issue 23).
const TARGET_COLD_RATIO: f64 = 4.0;
const TARGET_PSS_PER_TOOL_MIB: f64 = 15.0;
const TARGET_CREATE_MS: f64 = 150.0;
const TARGET_TOTAL_PSS_MIB: f64 = 1536.0;
/// The log line serve writes once a runtime's template has imported the SDK.
const READY_LINE: &str = "tool template ready";
/// The log line serve writes when no template could be made.
const NO_TEMPLATE_LINE: &str = "no tool template";
/// How long a template may take to come up on a busy machine.
const TEMPLATE_WAIT: Duration = Duration::from_secs(180);

/// The two ways serve starts a confined tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fork,
    Launcher,
}

impl Mode {
    const BOTH: [Mode; 2] = [Mode::Fork, Mode::Launcher];

    fn name(self) -> &'static str {
        match self {
            Mode::Fork => "fork",
            Mode::Launcher => "launcher",
        }
    }

    fn env(self) -> &'static str {
        match self {
            Mode::Fork => "on",
            Mode::Launcher => "off",
        }
    }
}

/// A serve in one mode, and the pid of its template's launcher once it is ready.
struct ModeServe {
    mode: Mode,
    rpc: Rpc,
    template: Option<u32>,
}

fn spawn_mode(setup: &Setup, home: &Path, mode: Mode) -> Result<ModeServe> {
    let mut rpc = spawn_serve_with(setup, home, &[("AUTOTOOL_FORK_TOOLS", mode.env())])?;
    rpc.initialize(setup.timeout)
        .with_context(|| format!("initialize serve ({})", mode.name()))?;
    Ok(ModeServe {
        mode,
        rpc,
        template: None,
    })
}

impl ModeServe {
    /// For fork, wait for serve's `tool template ready` line; returns how long it took from now
    /// and the template's own start-up as serve logged it.
    fn wait_template(&mut self) -> Result<Option<(Duration, Option<u64>)>> {
        if self.mode != Mode::Fork {
            return Ok(None);
        }
        let t0 = Instant::now();
        loop {
            if let Some(line) = self.rpc.log_line(READY_LINE) {
                self.template = field(&line, "launcher_pid").and_then(|v| v.parse().ok());
                return Ok(Some((
                    t0.elapsed(),
                    field(&line, "ready_ms").and_then(|v| v.parse().ok()),
                )));
            }
            if let Some(line) = self.rpc.log_line(NO_TEMPLATE_LINE) {
                bail!("serve could not make a tool template: {line}");
            }
            if t0.elapsed() > TEMPLATE_WAIT {
                bail!(
                    "serve logged no `{READY_LINE}` within {TEMPLATE_WAIT:?}{}",
                    self.rpc.tail()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Rpc {
    /// The last line of serve's log holding `needle`.
    fn log_line(&self, needle: &str) -> Option<String> {
        let lines = self.stderr.lock().ok()?;
        lines.iter().rev().find(|l| l.contains(needle)).cloned()
    }
}

/// `name=value` from a log line.
fn field(line: &str, name: &str) -> Option<String> {
    let needle = format!("{name}=");
    let at = line.find(&needle)? + needle.len();
    line[at..].split_whitespace().next().map(str::to_string)
}

fn add_args(a: i64, b: i64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("a".into(), json!(a));
    m.insert("b".into(), json!(b));
    m
}

/// Time `python3 -I -c pass` of the runtime's interpreter, spawn → exit.
fn bare_python(setup: &Setup) -> Result<Duration> {
    let t0 = Instant::now();
    let status = Command::new(&setup.python.interpreter)
        .args(["-I", "-c", "pass"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("run python3 -I -c pass")?;
    let took = t0.elapsed();
    if !status.success() {
        bail!("python3 -I -c pass exited {status}");
    }
    Ok(took)
}

// ---------------------------------------------------------------------------------------------
// (e)

/// A part: its verdict.
pub(super) type PartFn = fn(&Setup, &Args) -> Result<String>;

pub(super) fn part_e(setup: &Setup, args: &Args) -> Result<String> {
    let tools = args.cold_tools.max(1);
    let homes: Vec<PathBuf> = Mode::BOTH
        .iter()
        .map(|m| setup.work.join(format!("home-e-{}", m.name())))
        .collect();
    let names: Vec<String> = (0..tools).map(|i| format!("cold_{i:03}")).collect();
    println!();
    println!(
        "(e) fork vs launcher: {tools} small tools created on two serves (fork_tools on / off), \
         then both restarted and each tool's first call timed cold"
    );

    // create_tool, both modes interleaved tool by tool.
    let mut serves = Vec::new();
    for (mode, home) in Mode::BOTH.iter().zip(&homes) {
        let mut s = spawn_mode(setup, home, *mode)?;
        s.wait_template()?;
        serves.push(s);
    }
    let mut creates: Vec<Vec<Duration>> = vec![Vec::new(); 2];
    for s in &mut serves {
        // The first create_tool of a serve opens the runtime: not counted.
        let (took, _) = create_tool(&mut s.rpc, "e_first", setup.timeout)
            .with_context(|| format!("create_tool e_first ({})", s.mode.name()))?;
        println!(
            "  first create_tool on the {} serve (opens the runtime, not counted): {:.1} ms",
            s.mode.name(),
            ms(took)
        );
    }
    for (i, name) in names.iter().enumerate() {
        for k in order(i) {
            let s = &mut serves[k];
            let (took, _) = create_tool(&mut s.rpc, name, setup.timeout)
                .with_context(|| format!("create_tool {name} ({})", s.mode.name()))?;
            creates[k].push(took);
        }
    }
    let verifies: Vec<Vec<Duration>> = serves
        .iter()
        .map(|s| names.iter().filter_map(|n| s.rpc.verify_time(n)).collect())
        .collect();
    for s in serves.drain(..) {
        if let Err(e) = s.rpc.close() {
            println!(
                "  serve ({}) did not shut down cleanly: {e:#}",
                s.mode.name()
            );
        }
    }

    // Restart both: no tool process runs; wait for the template, then the first calls.
    for (mode, home) in Mode::BOTH.iter().zip(&homes) {
        let t0 = Instant::now();
        let mut s = spawn_mode(setup, home, *mode)?;
        if let Some((_, ready_ms)) = s.wait_template()? {
            println!(
                "  restarted; the fork serve's template was ready {:.0} ms after serve's spawn \
                 (serve logged the template's own start-up as {} ms)",
                ms(t0.elapsed()),
                ready_ms.map_or("?".into(), |v| v.to_string())
            );
        }
        serves.push(s);
    }
    let mut cold: Vec<Vec<Duration>> = vec![Vec::new(); 2];
    let mut bare = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let mounted = format!("{name}__{FUNCTION}");
        // bare, fork, launcher; the next tool launcher, bare, fork; …
        for step in 0..3 {
            match (step + i) % 3 {
                0 => bare.push(bare_python(setup)?),
                k => {
                    let s = &mut serves[k - 1];
                    let (took, value) =
                        s.rpc
                            .call_tool(&mounted, add_args(40, 2), setup.timeout)
                            .with_context(|| format!("first call of {name} ({})", s.mode.name()))?;
                    if value["result"] != json!(42) {
                        bail!("the first call of {name} answered {value} for add(40, 2)");
                    }
                    cold[k - 1].push(took);
                }
            }
        }
    }

    // Warm calls: the unconfined tool process against both serves.
    let warm = warm_vs_unconfined(setup, &mut serves, &names[0], args);

    // Memory of each serve with its tools warm.
    let mut memory = Vec::new();
    for s in &serves {
        memory.push((s.mode, tree_memory(s.rpc.pid(), s.template)));
    }
    for s in serves {
        if let Err(e) = s.rpc.close() {
            println!(
                "  serve ({}) did not shut down cleanly: {e:#}",
                s.mode.name()
            );
        }
    }

    let mut verdict = Vec::new();
    println!();
    println!(
        "(e1) cold first call through serve (no tool process running), {tools} tools, \
         interleaved with a bare `python3 -I -c pass` of the same interpreter"
    );
    print_figures_header();
    let bare = Figures::of(&bare).context("no tools")?;
    print_figures("bare python", &bare);
    let cold: Vec<Figures> = cold
        .iter()
        .map(|c| Figures::of(c).context("no tools"))
        .collect::<Result<_>>()?;
    for (mode, f) in Mode::BOTH.iter().zip(&cold) {
        print_figures(mode.name(), f);
    }
    let (rf, rl) = (cold[0].s.ratio_to(&bare.s), cold[1].s.ratio_to(&bare.s));
    println!(
        "  median cold call: fork ×{rf:.2} bare, launcher (today) ×{rl:.2} bare (target ≤ \
         {TARGET_COLD_RATIO}×: {}); fork is ×{:.3} of launcher",
        met(rf <= TARGET_COLD_RATIO),
        cold[0].s.ratio_to(&cold[1].s)
    );
    verdict.push(format!(
        "cold call fork ×{rf:.2} bare vs launcher ×{rl:.2} (≤ {TARGET_COLD_RATIO}×: {})",
        met(rf <= TARGET_COLD_RATIO)
    ));

    println!();
    println!(
        "(e3) create_tool end to end (one function, smoke test, robustness probes), {tools} \
         tools per serve, interleaved"
    );
    print_figures_header();
    let mut create_medians = Vec::new();
    for (k, mode) in Mode::BOTH.iter().enumerate() {
        let f = Figures::of(&creates[k]).context("no tools")?;
        print_figures(mode.name(), &f);
        if let Some(v) = Figures::of(&verifies[k])
            && verifies[k].len() == tools
        {
            print_figures(&format!("  verify {}", mode.name()), &v);
        }
        create_medians.push(f.s.median_ms);
    }
    println!(
        "  median create_tool: fork {:.1} ms, launcher (today) {:.1} ms (target ≤ \
         {TARGET_CREATE_MS} ms: {})",
        create_medians[0],
        create_medians[1],
        met(create_medians[0] <= TARGET_CREATE_MS)
    );
    verdict.push(format!(
        "create_tool fork {:.1} ms vs launcher {:.1} ms (≤ {TARGET_CREATE_MS} ms: {})",
        create_medians[0],
        create_medians[1],
        met(create_medians[0] <= TARGET_CREATE_MS)
    ));

    match warm {
        Ok(w) => {
            print_warm(&w, args);
            if let (Some(u), Some(f), Some(l)) = (w.get(0), w.get(1), w.get(2)) {
                let (af, al) = (f.s.added_over(&u.s), l.s.added_over(&u.s));
                verdict.push(format!(
                    "warm call fork {af:+.3} ms vs launcher {al:+.3} ms over unconfined (≤ \
                     +{TARGET_ADDED_MS} ms: {})",
                    met(af <= TARGET_ADDED_MS)
                ));
            }
        }
        Err(e) => println!("  (e5) FAILED: {e:#}"),
    }

    println!();
    println!(
        "(e2) memory with {tools} warm tools per serve (restarted: the first tool is not running)"
    );
    for (mode, m) in &memory {
        match m {
            Ok(m) => print_memory(*mode, m, tools),
            Err(e) => println!("  {}: could not read: {e:#}", mode.name()),
        }
    }
    Ok(verdict.join("; "))
}

/// Which of the two serves goes first for tool `i`: alternate.
fn order(i: usize) -> [usize; 2] {
    if i.is_multiple_of(2) { [0, 1] } else { [1, 0] }
}

struct Warm {
    figures: Vec<Figures>,
}

impl Warm {
    fn get(&self, i: usize) -> Option<&Figures> {
        self.figures.get(i)
    }
}

const WARM_LABELS: [&str; 3] = ["unconfined", "fork", "launcher"];

/// `tools/call add` to an unconfined tool process, then through each serve, call by call.
fn warm_vs_unconfined(
    setup: &Setup,
    serves: &mut [ModeServe],
    tool: &str,
    args: &Args,
) -> Result<Warm> {
    let dir = setup.work.join("unconfined-tool");
    write_tool_dir(&dir, TOOL_CODE)?;
    let env = autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
    let child = Command::new(&setup.python.interpreter)
        .args(["-I", "-B", "tool.py"])
        .current_dir(&dir)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("start the unconfined tool")?;
    let mut direct = Rpc::new("unconfined tool", child)?;
    direct
        .initialize(setup.timeout)
        .context("initialize the unconfined tool")?;
    let mounted = format!("{tool}__{FUNCTION}");
    let mut samples: Vec<Vec<Duration>> = (0..3).map(|_| Vec::with_capacity(args.calls)).collect();
    for round in 0..args.warmup + args.calls {
        let a = i64::try_from(round).unwrap_or(0);
        for (k, times) in samples.iter_mut().enumerate() {
            if args.gap_ms > 0 {
                std::thread::sleep(Duration::from_millis(args.gap_ms));
            }
            let (took, value) = match k {
                0 => direct.call_tool(FUNCTION, add_args(a, 1), setup.timeout)?,
                _ => serves[k - 1]
                    .rpc
                    .call_tool(&mounted, add_args(a, 1), setup.timeout)?,
            };
            if value["result"] != json!(a + 1) {
                bail!("{} answered {value} for add({a}, 1)", WARM_LABELS[k]);
            }
            if round >= args.warmup {
                times.push(took);
            }
        }
    }
    if let Err(e) = direct.close() {
        println!("  the unconfined tool did not shut down cleanly: {e:#}");
    }
    Ok(Warm {
        figures: samples.iter().filter_map(|t| Figures::of(t)).collect(),
    })
}

fn print_warm(w: &Warm, args: &Args) {
    println!();
    println!(
        "(e5) warm call: tools/call {FUNCTION}, {} calls per variant (+{} warm-up), interleaved, {}",
        args.calls,
        args.warmup,
        if args.gap_ms == 0 {
            "back to back".to_string()
        } else {
            format!("{} ms idle before each call", args.gap_ms)
        }
    );
    println!(
        "  unconfined = bench client → python3 tool.py (no launcher, no sandbox)\n  fork / \
         launcher = bench client → autotool serve → its tool, forked / launched"
    );
    print_figures_header();
    for (label, f) in WARM_LABELS.iter().zip(&w.figures) {
        print_figures(label, f);
    }
    if let (Some(u), Some(f), Some(l)) = (w.get(0), w.get(1), w.get(2)) {
        let (af, al) = (f.s.added_over(&u.s), l.s.added_over(&u.s));
        println!(
            "  serve adds {af:+.3} ms (fork) and {al:+.3} ms (launcher, today) over the \
             unconfined tool (target ≤ +{TARGET_ADDED_MS} ms: {})",
            met(af <= TARGET_ADDED_MS)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (f)

pub(super) fn part_f(setup: &Setup, args: &Args) -> Result<String> {
    let (count, settle) = (
        args.warm_tools.max(1),
        Duration::from_millis(args.settle_ms),
    );
    println!();
    println!(
        "(f) {count} warm tools: serve and every process under it, PSS from \
         /proc/<pid>/smaps_rollup, fork_tools on, then off (today's path) as the control"
    );
    let mut verdict = Vec::new();
    let mut totals = Vec::new();
    for mode in Mode::BOTH {
        let home = setup.work.join(format!("home-f-{}", mode.name()));
        let t0 = Instant::now();
        preregister(&home, count).context("pre-register tools")?;
        let preregistered = t0.elapsed();
        let mut s = spawn_mode(setup, &home, mode)?;
        s.wait_template()?;
        let t0 = Instant::now();
        let mut first = Vec::with_capacity(count);
        for i in 0..count {
            let mounted = format!("reg_{i:03}__{FUNCTION}");
            let (took, value) = s
                .rpc
                .call_tool(
                    &mounted,
                    add_args(i64::try_from(i).unwrap_or(0), 1),
                    setup.timeout,
                )
                .with_context(|| format!("first call of reg_{i:03} ({})", mode.name()))?;
            if value["result"] != json!(i + 1) {
                bail!("reg_{i:03} answered {value}");
            }
            first.push(took);
        }
        let warmed = t0.elapsed();
        std::thread::sleep(settle);
        let m = tree_memory(s.rpc.pid(), s.template);
        let closing = Instant::now();
        match s.rpc.close() {
            Ok(_) => println!(
                "  serve ({}) exited {:.0} ms after its stdin closed, with {count} tools warm",
                mode.name(),
                ms(closing.elapsed())
            ),
            Err(e) => println!("  serve ({}) did not shut down cleanly: {e:#}", mode.name()),
        }
        let m = m?;
        println!(
            "  {}: {count} tools registered in {:.0} ms; all {count} first calls took {:.1} s \
             (median {:.1} ms); read {:.0} ms later",
            mode.name(),
            ms(preregistered),
            warmed.as_secs_f64(),
            Figures::of(&first).map_or(0.0, |f| f.s.median_ms),
            ms(settle)
        );
        print_memory(mode, &m, count);
        totals.push(mib(m.total().pss_kb));
        if let Some(per) = m.per_tool_shared(count) {
            verdict.push(format!(
                "PSS per warm tool {} {:.1} MiB",
                mode.name(),
                mib(per.pss_kb)
            ));
        }
    }
    if let [fork, launcher] = totals[..] {
        // The target is for 100 tools; another count is only reported.
        let judged = if count == 100 {
            met(fork <= TARGET_TOTAL_PSS_MIB).to_string()
        } else {
            "judged at 100 tools only".to_string()
        };
        println!(
            "  total PSS with {count} warm tools: fork {fork:.0} MiB, launcher (today) \
             {launcher:.0} MiB, ×{:.2} (target ≤ {TARGET_TOTAL_PSS_MIB} MiB for 100: {judged})",
            fork / launcher,
        );
        verdict.push(format!(
            "{count} tools total PSS fork {fork:.0} MiB vs launcher {launcher:.0} MiB"
        ));
    }
    Ok(verdict.join("; "))
}

// ---------------------------------------------------------------------------------------------
// Process trees and their memory

#[derive(Debug, Clone, Copy, Default)]
struct Mem {
    pss_kb: u64,
    dirty_kb: u64,
    processes: usize,
}

impl std::ops::AddAssign for Mem {
    fn add_assign(&mut self, o: Mem) {
        self.pss_kb += o.pss_kb;
        self.dirty_kb += o.dirty_kb;
        self.processes += o.processes;
    }
}

#[derive(Debug)]
struct TreeMemory {
    serve: Mem,
    /// The template's launcher, init and interpreter, without the tools forked from it.
    template: Option<Mem>,
    tools: Vec<Mem>,
    /// Processes under serve that are neither.
    other: Mem,
}

impl TreeMemory {
    fn total(&self) -> Mem {
        let mut t = self.serve;
        t += self.template.unwrap_or_default();
        t += self.other;
        for m in &self.tools {
            t += *m;
        }
        t
    }

    /// Per tool with the template shared out over `count` tools.
    fn per_tool_shared(&self, count: usize) -> Option<Mem> {
        let n = count.max(1) as u64;
        let mut t = self.template.unwrap_or_default();
        for m in &self.tools {
            t += *m;
        }
        (!self.tools.is_empty()).then(|| Mem {
            pss_kb: t.pss_kb / n,
            dirty_kb: t.dirty_kb / n,
            processes: t.processes,
        })
    }
}

/// Every process's parent, from `/proc/<pid>/stat`.
fn parents() -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return map;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|v| v.parse().ok()) {
            map.insert(pid, ppid);
        }
    }
    map
}

fn children_of(parents: &HashMap<u32, u32>, pid: u32) -> Vec<u32> {
    let mut c: Vec<u32> = parents
        .iter()
        .filter(|(_, p)| **p == pid)
        .map(|(c, _)| *c)
        .collect();
    c.sort_unstable();
    c
}

fn subtree(parents: &HashMap<u32, u32>, root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        out.extend(children_of(parents, out[i]));
        i += 1;
    }
    out
}

/// `Pss` and `Private_Dirty` of one process.
fn rollup(pid: u32) -> Result<Mem> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .with_context(|| format!("read /proc/{pid}/smaps_rollup"))?;
    let mut m = Mem {
        processes: 1,
        ..Mem::default()
    };
    for line in text.lines() {
        let value = || {
            line.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        if line.starts_with("Pss:") {
            m.pss_kb = value();
        } else if line.starts_with("Private_Dirty:") {
            m.dirty_kb = value();
        }
    }
    Ok(m)
}

fn sum(pids: &[u32]) -> Result<Mem> {
    let mut m = Mem::default();
    for &pid in pids {
        m += rollup(pid)?;
    }
    Ok(m)
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// How many tool processes run under `serve`: each launched one (a launcher child of serve that
/// is not a template) and each forked one (a child of a template's interpreter).
pub(super) fn tool_count(serve: u32) -> usize {
    let parents = parents();
    children_of(&parents, serve)
        .into_iter()
        .map(|child| {
            let line = cmdline(child);
            if line.contains("--template") {
                subtree(&parents, child)
                    .into_iter()
                    .find(|&p| cmdline(p).contains("autotool template"))
                    .map_or(0, |interpreter| children_of(&parents, interpreter).len())
            } else {
                usize::from(line.contains("autotool-launcher"))
            }
        })
        .sum()
}

/// serve's tree split into serve, its template, one tree per tool and the rest. Forked tools
/// are the children of the template's interpreter (the topmost process under the template's
/// launcher running the template's code); launched ones are serve's other children running
/// the launcher.
fn tree_memory(serve: u32, template_launcher: Option<u32>) -> Result<TreeMemory> {
    let parents = parents();
    let mut tools = Vec::new();
    let mut template = None;
    let mut other = Mem::default();
    for child in children_of(&parents, serve) {
        let tree = subtree(&parents, child);
        if Some(child) == template_launcher {
            let interpreter = tree
                .iter()
                .copied()
                .find(|&p| cmdline(p).contains("autotool template"))
                .context("no template interpreter under the template's launcher")?;
            let mut forked = Vec::new();
            for tool in children_of(&parents, interpreter) {
                let t = subtree(&parents, tool);
                tools.push(sum(&t)?);
                forked.extend(t);
            }
            let own: Vec<u32> = tree.into_iter().filter(|p| !forked.contains(p)).collect();
            template = Some(sum(&own)?);
        } else if cmdline(child).contains("autotool-launcher") {
            tools.push(sum(&tree)?);
        } else {
            other += sum(&tree)?;
        }
    }
    Ok(TreeMemory {
        serve: rollup(serve)?,
        template,
        tools,
        other,
    })
}

fn print_memory(mode: Mode, m: &TreeMemory, count: usize) {
    let mut pss: Vec<u64> = m.tools.iter().map(|t| t.pss_kb).collect();
    let mut dirty: Vec<u64> = m.tools.iter().map(|t| t.dirty_kb).collect();
    pss.sort_unstable();
    dirty.sort_unstable();
    let median = |v: &[u64]| v.get(v.len() / 2).copied().unwrap_or(0);
    let procs = m.tools.first().map_or(0, |t| t.processes);
    println!(
        "  {:<9} {} tool trees ({} processes each): PSS per tool median {:.1} MiB (min {:.1}, \
         max {:.1}), private dirty {:.1} MiB",
        mode.name(),
        m.tools.len(),
        procs,
        mib(median(&pss)),
        mib(pss.first().copied().unwrap_or(0)),
        mib(pss.last().copied().unwrap_or(0)),
        mib(median(&dirty)),
    );
    if m.tools.len() != count {
        println!(
            "    note: {} tool trees found, {count} tools called",
            m.tools.len()
        );
    }
    if let Some(t) = m.template {
        println!(
            "    template alone ({} processes): PSS {:.1} MiB, private dirty {:.1} MiB",
            t.processes,
            mib(t.pss_kb),
            mib(t.dirty_kb)
        );
        if let Some(per) = m.per_tool_shared(m.tools.len()) {
            println!(
                "    per tool with the template shared out over {}: PSS {:.1} MiB, private \
                 dirty {:.1} MiB (target ≤ {TARGET_PSS_PER_TOOL_MIB} MiB: {})",
                m.tools.len(),
                mib(per.pss_kb),
                mib(per.dirty_kb),
                met(mib(per.pss_kb) <= TARGET_PSS_PER_TOOL_MIB)
            );
        }
    } else {
        println!(
            "    (target ≤ {TARGET_PSS_PER_TOOL_MIB} MiB per tool: {})",
            met(mib(median(&pss)) <= TARGET_PSS_PER_TOOL_MIB)
        );
    }
    let total = m.total();
    println!(
        "    serve itself PSS {:.1} MiB; other processes under serve {} ({:.1} MiB); total \
         serve + template + tools: PSS {:.1} MiB, private dirty {:.1} MiB, {} processes",
        mib(m.serve.pss_kb),
        m.other.processes,
        mib(m.other.pss_kb),
        mib(total.pss_kb),
        mib(total.dirty_kb),
        total.processes
    );
}
