//! What a tool that stops reading its stdin and sends pings with ids of 8 MiB costs the process
//! that talks to it: through [`ToolProcess`] (the tool link), and, as the control, through a
//! plain rmcp client (rmcp's default handler answers each ping; every answer waits for the
//! tool's stdin, holding its id).
//!
//! A binary of its own with a single test, so that nothing else runs in the process whose
//! memory is read (`VmRSS` and `VmHWM` from `/proc/self/status`). The link is measured first:
//! memory a process has once held may stay counted after it is freed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod link;
use anyhow::{Context, Result, ensure};
use autotool::tool::process::{Misuse, SandboxMode, ToolProcError, ToolProcess, ToolSpec};
use common::{confining_launcher, runtime};
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// Pings the tool sends, and the size of each id.
const PINGS: u64 = 30;
const ID_MIB: u64 = 8;
/// What the link may cost, at most.
const LINK_BUDGET_MIB: u64 = 16;
/// What the control must be seen to cost, at least (it holds every id at least once).
const CONTROL_AT_LEAST_MIB: u64 = 150;

fn status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
        / 1024
}

const KEY: &str = "lk-memory-test-value";

fn attack() -> Map<String, Value> {
    match json!({"count": PINGS, "id_mib": ID_MIB, "hold": 30}) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[test]
fn pings_with_huge_ids_cost_the_link_little_and_a_plain_client_hundreds_of_mib() {
    let runtime_ = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime_.block_on(async {
        tokio::time::timeout(Duration::from_secs(180), scenario())
            .await
            .expect("still running after 180 s")
            .unwrap()
    });
}

async fn scenario() -> Result<()> {
    // Through the link, confined where this machine can confine.
    let (mode, launcher) = match confining_launcher() {
        Ok(path) => (SandboxMode::Strict, Some(path)),
        Err(why) => {
            eprintln!("the link is measured unconfined: {why}");
            (SandboxMode::Off, None)
        }
    };
    let dir = link::tool_dir();
    let mut spec = ToolSpec::new(dir.path(), "tool.py", runtime(), mode);
    spec.launcher = launcher;
    spec.env = link::environment(KEY);
    let tool = ToolProcess::start(spec).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss0, peak0) = (status("VmRSS:"), status("VmHWM:"));
    let started = Instant::now();
    let e = tool
        .call("ping_flood", attack(), Duration::from_secs(60))
        .await
        .err()
        .context("the ping flood was answered")?;
    let stopped_in = started.elapsed();
    ensure!(
        matches!(
            &e,
            ToolProcError::Misused {
                misuse: Misuse::BadId { long: true },
                ..
            }
        ),
        "{e}"
    );
    ensure!(!tool.is_alive());
    tool.shutdown().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss1, peak1) = (status("VmRSS:"), status("VmHWM:"));
    eprintln!(
        "link ({mode:?}): stopped in {stopped_in:?}; RSS {rss0} → {rss1} MiB, peak {peak0} → {peak1} MiB"
    );
    ensure!(
        peak1.saturating_sub(peak0) <= LINK_BUDGET_MIB,
        "the link's peak grew by {} MiB",
        peak1 - peak0
    );
    ensure!(stopped_in < Duration::from_secs(20), "{stopped_in:?}");
    ensure!(
        e.to_string().contains(&format!(
            "longer than {} bytes",
            autotool::tool::process::MAX_ID
        )),
        "{e}"
    );

    // The control: a plain rmcp client on the same tool, run directly.
    let mut plain = link::Plain::start(KEY).await?;
    let client = &plain.client;
    let rss_before = status("VmRSS:");
    let peer = client.peer().clone();
    let call = tokio::spawn(async move {
        peer.call_tool(CallToolRequestParams::new("ping_flood").with_arguments(attack()))
            .await
    });
    // Watch it grow until it has grown and then stopped growing for two seconds.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut grown, mut last_growth) = (0, Instant::now());
    while Instant::now() < deadline
        && (grown < CONTROL_AT_LEAST_MIB || last_growth.elapsed() < Duration::from_secs(2))
    {
        let now = status("VmRSS:").saturating_sub(rss_before);
        if now > grown {
            (grown, last_growth) = (now, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("control: RSS {rss_before} MiB, grew by {grown} MiB");
    call.abort();
    let _ = plain.child.kill().await;
    drop(plain);
    ensure!(
        grown >= CONTROL_AT_LEAST_MIB,
        "the plain client grew by only {grown} MiB"
    );
    Ok(())
}
