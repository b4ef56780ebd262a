//! `tool_info {name}`: the agent reads a tool's record (read-only): its state and why, whether
//! the user pinned it (then a rewrite is refused), its versions and who made each, what verification found, what it owes its trusted versions,
//! its recent failures (redacted), the keys it declared and the hosts they may reach (names
//! only), its packages, and the sandbox it runs in as measured ([`self_report`]).
//!
//! Everything in the record that a tool wrote (errors, verdict details) is untrusted text: it
//! is cut here and passes the one render step (redact, then cap) on its way to the host.

use crate::library::Library;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// Characters kept of each error or detail from the record.
const DETAIL: usize = 500;
/// How many recent failures are shown.
const FAILURES: u32 = 5;
/// How many recent calls are looked through for failures.
const LOOKED_AT: u32 = 50;
/// How many versions are shown (the newest).
const VERSIONS: usize = 10;

fn cut(s: &str, max: usize) -> String {
    let mut c: String = s.chars().take(max).collect();
    if c.len() < s.len() {
        c.push('…');
    }
    c
}

/// The sandbox as measured, the limits and the idle policy, as data.
pub fn sandbox_report(library: &Library) -> Value {
    let s = &library.settings;
    let measured = match library.reach() {
        Some(Ok(reach)) => json!({
            "measured": true,
            "reach": reach,
            "summary": reach.sentence(),
        }),
        Some(Err(why)) => json!({"measured": false, "why": cut(&why, DETAIL)}),
        None => json!({
            "measured": false,
            "why": "being measured: a probe tool runs once the tool runtime is ready",
        }),
    };
    json!({
        "sandbox": match s.sandbox {
            crate::tool::process::SandboxMode::Strict => "strict",
            crate::tool::process::SandboxMode::Off => "off",
        },
        "measurement": measured,
        "limits": {
            "call_timeout": crate::config::show_duration(s.call_timeout),
            "max_output_bytes": s.max_output_bytes,
            "memory_bytes": s.limits.memory_bytes,
            "threads": s.limits.threads,
            "open_files": s.limits.open_files,
            "file_size_bytes": s.limits.file_size_bytes,
            "cpu_seconds": s.limits.cpu_seconds,
            "tmp_bytes": s.limits.tmp_bytes,
        },
        "idle": format!(
            "a tool process unused for {} is stopped and started again on its next call",
            crate::config::show_duration(s.idle_timeout)
        ),
    })
}

/// The self-report in words, for serve's instructions: the sandbox as measured (or that it is
/// being measured), the limits and the idle policy.
pub fn self_report(library: &Library) -> String {
    let s = &library.settings;
    let reach = match library.reach() {
        Some(Ok(reach)) => reach.sentence(),
        Some(Err(why)) => format!(
            "what a tool can reach was not measured ({}); tool_info says more.",
            cut(&why, 200)
        ),
        None => "what a tool can reach is being measured (a probe tool runs once the tool \
                 runtime is ready); tool_info reports it."
            .to_string(),
    };
    format!(
        "The sandbox, {reach} Limits per tool process: {} of memory, {} threads, \
         {} per call, results cut at {}; a tool unused for {} is stopped and started again on \
         its next call. tool_info {{name}} shows a tool's record: state and why, verdicts, \
         obligations, recent failures, keys and hosts, packages.",
        crate::config::show_bytes(s.limits.memory_bytes),
        s.limits.threads,
        crate::config::show_duration(s.call_timeout),
        crate::config::show_bytes(u64::try_from(s.max_output_bytes).unwrap_or(u64::MAX)),
        crate::config::show_duration(s.idle_timeout),
    )
}

/// `tool_info {name}`: the record as JSON (also as `structuredContent`), or an error naming
/// what to do.
pub fn tool_info(library: &Library, name: &str) -> CallToolResult {
    match record(library, name) {
        Ok(Some(v)) => {
            let lead = format!(
                "The record of {name}: state and why, versions, verdicts, obligations, recent \
                 failures, keys and hosts, packages, and the sandbox it runs in."
            );
            let mut r = CallToolResult::success(vec![
                ContentBlock::text(lead),
                ContentBlock::text(v.to_string()),
            ]);
            r.structured_content = Some(v);
            r
        }
        Ok(None) => super::render::error_result(format!(
            "no tool named {name:?}: search_tools finds tools by what they do"
        )),
        Err(e) => super::render::error_result(format!("tool_info: {e}")),
    }
}

fn record(library: &Library, name: &str) -> Result<Option<Value>, crate::ledger::LedgerError> {
    let ledger = library.registry.ledger();
    let Some(row) = ledger.tool(name)? else {
        return Ok(None);
    };
    let Some(current) = ledger.current_of(name)? else {
        return Ok(Some(json!({
            "tool": name,
            "removed": row.removed_at.map(crate::ledger::format_ms),
        })));
    };
    let by = |v: u32| -> Value {
        match ledger.created_by(name, v) {
            Ok(Some(a)) if !a.actor.is_empty() => json!({"actor": a.actor, "surface": a.surface}),
            _ => Value::Null,
        }
    };
    let all = ledger.versions(name)?;
    let versions: Vec<Value> = all
        .iter()
        .rev()
        .take(VERSIONS)
        .map(|v| {
            json!({
                "version": v.version,
                "state": v.state.as_str(),
                "created_at": crate::ledger::format_ms(v.created_at),
                "created_by": by(v.version),
            })
        })
        .collect();
    let verdicts: Vec<Value> = ledger
        .verdicts(name, current.version)?
        .iter()
        .map(|v| json!(cut(&v.to_string(), DETAIL)))
        .collect();
    let obligations: Vec<Value> = ledger
        .baseline(name, false)?
        .iter()
        .map(|r| json!(cut(&r.obligation.shown(), DETAIL)))
        .collect();
    let failures: Vec<Value> = library
        .registry
        .recent_calls(name, LOOKED_AT)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.outcome != crate::ledger::CallKind::Ok)
        .take(FAILURES as usize)
        .map(|c| {
            json!({
                "at": crate::ledger::format_ms(c.started_at),
                "version": c.version,
                "function": c.function,
                "outcome": match c.outcome {
                    crate::ledger::CallKind::ToolError => "tool_error",
                    _ => "error",
                },
                "error": c.error.as_deref().map(|e| cut(e, DETAIL)),
            })
        })
        .collect();
    let secrets = library.secrets();
    let approved: Vec<String> = ledger
        .approvals(name)?
        .into_iter()
        .filter(|a| a.code_hash == current.code_hash || a.allowlist.is_some())
        .map(|a| a.key)
        .collect();
    let keys: Vec<Value> = current
        .required_env
        .iter()
        .map(|k| {
            json!({
                "name": k.as_str(),
                "held": secrets.names.contains(k),
                "approved": approved.iter().any(|a| a == k.as_str()),
                "hosts": secrets
                    .allowlists()
                    .get(k)
                    .map(|rules| rules.iter().map(ToString::to_string).collect::<Vec<_>>()),
            })
        })
        .collect();
    let packages = current.packages.as_deref().map(|p| {
        json!({
            "declared": p.declared,
            "installed": p.lock.describe(),
            "source": p.source,
        })
    });
    Ok(Some(json!({
        "tool": name,
        "version": current.version,
        "state": current.state.as_str(),
        "listed": current.state.listed(),
        "state_reason": ledger.state_reason(name)?.map(|r| cut(&r, DETAIL)),
        // The user's pin: a new version of this tool (a rewrite) is refused until unpinned.
        "pinned": ledger.pin_of(name)?,
        "description": cut(&current.description, DETAIL),
        "functions": current.functions.names(),
        "versions": versions,
        "verdicts": verdicts,
        "obligations": obligations,
        "uses_baseline": ledger.trusted_uses(name)?,
        "recent_failures": failures,
        "keys": keys,
        // Hosts it may reach and why, its directories and their mode, what was refused lately.
        "reach": library.reach_view(&current),
        "packages": packages,
        // Where it came from: an added server's package and version (`pypi:NAME VERSION`), or
        // a pulled version's reference, digest and publisher; null when grown here.
        "origin": crate::team::publisher::origin(&library.home, name, current.version, &current.code_hash),
        "sandbox": sandbox_report(library),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::reach::Reach;

    #[test]
    fn cuts_keep_a_mark() {
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
        let r = Reach {
            sandbox: "strict".into(),
            route_out: false,
            egress_proxy: true,
            host_files: false,
            writes_own_code: false,
            took_ms: 3,
            at: String::new(),
        };
        let v = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(v["route_out"], false);
        assert_eq!(v["host_files"], false);
    }
}
