//! `autotool tools show NAME`: one tool in full, as text or JSON: its current version's keys,
//! uses, packages, reach and directories, refusals, functions, verdicts, versions, calls and events.

use super::*;

/// The packages of `version`, each with its version and hashes, and where they came from.
fn packages(version: &Version, out: &mut impl Write) -> std::io::Result<()> {
    let Some(set) = &version.packages else {
        return writeln!(out, "packages: none");
    };
    writeln!(
        out,
        "packages: {} from {} (declared: {}; layer {})",
        set.lock.packages.len(),
        set.source,
        set.declared.join(", "),
        set.layer
            .as_deref()
            .map(|l| &l[..l.len().min(16)])
            .unwrap_or("none: the runtime holds them")
    )?;
    for p in &set.lock.packages {
        writeln!(out, "  {} {}  {}", p.name, p.version, p.hashes.join(" "))?;
    }
    Ok(())
}

/// A version with where it lives, for `tools show --json`.
#[derive(Debug, Clone, Serialize)]
struct VersionView {
    #[serde(flatten)]
    version: Version,
    dir: String,
    /// Who created it and through what (`host:<client name>` via `stdio`, `cli`, `follow`…);
    /// empty for a version from before this was kept.
    created_by: Option<ledger::Actor>,
    /// Who published it: grown here, pulled unsigned, or a trusted publisher and its key.
    #[cfg(feature = "team")]
    publisher: crate::team::publisher::Publisher,
    /// Where an added server's version came from (`autotool add`); `None` for other tools.
    added: Option<crate::added::AddedVersion>,
}

/// `tools show --json`.
#[derive(Debug, Serialize)]
struct ShowOutput {
    name: String,
    removed_at: Option<String>,
    /// The user's pin: nothing replaces the current version until unpinned.
    pinned: Option<ledger::Pin>,
    current: Option<VersionView>,
    versions: Vec<VersionView>,
    stats: ToolStats,
    recent_calls: Vec<CallRow>,
    recent_events: Vec<EventRow>,
    /// Keys the user approved for this tool, newest first.
    approvals: Vec<ledger::ApprovalRow>,
    /// Package sets the user approved for this tool, newest first.
    package_approvals: Vec<ledger::PackageApproval>,
    /// What verification found of the current version's functions.
    verdicts: Vec<crate::verify::Verdict>,
    /// The functions its trusted versions call (`USES`), which a rewrite may not widen;
    /// `None` before a version is trusted.
    uses_baseline: Option<Vec<String>>,
    /// What the current version may reach and why (hosts with and without a key, directories
    /// and their mode) and the destinations its egress proxy refused lately.
    reach: Option<crate::library::declared_reach::ReachView>,
}

pub(super) fn show(
    home: &Home,
    registry: &Registry,
    name: &str,
    json: bool,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let Some(tool) = registry.tool(name)? else {
        return Err(RegistryError::NotFound(name.to_string()).into());
    };
    let versions: Vec<VersionView> = registry
        .versions(name)?
        .into_iter()
        .map(|v| VersionView {
            dir: registry.dir_of(&v).display().to_string(),
            created_by: registry.ledger().created_by(name, v.version).ok().flatten(),
            #[cfg(feature = "team")]
            publisher: crate::team::publisher::of_version(
                registry.home(),
                name,
                v.version,
                &v.code_hash,
            ),
            added: crate::origins::of(registry.home(), name, &v.code_hash),
            version: v,
        })
        .collect();
    let current = tool
        .current_version
        .and_then(|c| versions.iter().find(|v| v.version.version == c).cloned());
    let output = ShowOutput {
        name: name.to_string(),
        removed_at: tool.removed_at.map(ledger::format_ms),
        pinned: registry.ledger().pin_of(name)?,
        current,
        versions,
        stats: registry.stats(name)?,
        recent_calls: registry.recent_calls(name, RECENT)?,
        recent_events: registry.events(Some(name), RECENT)?,
        approvals: registry.ledger().approvals(name)?,
        package_approvals: registry.ledger().package_approvals(name)?,
        verdicts: match tool.current_version {
            Some(v) => registry.ledger().verdicts(name, v)?,
            None => Vec::new(),
        },
        uses_baseline: registry.ledger().trusted_uses(name)?,
        reach: None,
    };
    let mut output = output;
    if let Some(view) = &output.current {
        // What is on record (grants, hosts allowed for every tool, key allowlists, widened
        // deny rules), what the running serves grant without asking (or, when none runs, a
        // serve started now: the config file and this environment), and the `*_API_BASE` of
        // this shell.
        let allowlists = crate::credentials::KeyStore::open(home)
            .allowlists()
            .unwrap_or_default();
        let api_bases = std::env::vars()
            .filter(|(k, _)| k.ends_with(autotool_policy::hosts::API_BASE_SUFFIX))
            .collect();
        let granting = crate::serving::granting(home);
        let user_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        output.reach = Some(crate::library::declared_reach::view(
            &view.version,
            &crate::library::declared_reach::ViewInputs {
                ledger: registry.ledger(),
                allowlists: &allowlists,
                api_bases: &api_bases,
                allow_all: granting.allow_all.as_deref(),
                trusted_hosts: granting.trusted_hosts.as_deref(),
                homes: user_home.as_deref().map(|h| (h, home.root())),
            },
        ));
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &output)?;
        writeln!(out)?;
        return Ok(());
    }

    match &output.removed_at {
        Some(at) => writeln!(out, "{name} (removed {at})")?,
        None => writeln!(out, "{name}")?,
    }
    if let Some(view) = &output.current {
        let cur = &view.version;
        writeln!(
            out,
            "current version: {} ({})",
            cur.version,
            cur.state.as_str()
        )?;
        if let Some(pin) = &output.pinned {
            writeln!(
                out,
                "{pin}: nothing replaces this version until `autotool tools unpin {name}`"
            )?;
        }
        if let Some(added) = &view.added {
            let mut started = vec![added.entry.clone().unwrap_or_else(|| added.package.clone())];
            started.extend(added.args.iter().cloned());
            writeln!(
                out,
                "origin: {} (added {}{}); starts as: {}",
                added.origin(),
                added.added_at,
                added
                    .imported_from
                    .as_deref()
                    .map(|a| format!(", moved from {a}"))
                    .unwrap_or_default(),
                crate::terminal::escape_line(&started.join(" "))
            )?;
        }
        if !cur.description.is_empty() {
            // Written by an agent, a model or a publisher: each of its lines indented under
            // the heading, so none passes for a line of this report.
            let mut lines = cur.description.lines();
            let first = lines.next().unwrap_or("");
            writeln!(out, "description: {}", crate::terminal::escape_line(first))?;
            for line in lines {
                writeln!(out, "  {}", crate::terminal::escape_line(line))?;
            }
        }
        writeln!(out, "keys: {}", or_none(&cur.required_env))?;
        writeln!(out, "uses: {}", or_none(&cur.uses))?;
        writeln!(
            out,
            "{}",
            baseline::uses_line(output.uses_baseline.as_deref())
        )?;
        packages(cur, out)?;
        if let Some(reach) = &output.reach {
            for line in reach.lines() {
                writeln!(out, "{line}")?;
            }
        }
        writeln!(
            out,
            "code: {}/{} (sha256 {})",
            view.dir,
            crate::version::TOOL_FILE,
            cur.code_hash
        )?;
        writeln!(
            out,
            "pin: {} (code, description and schemas)",
            crate::pin::of(cur)
        )?;
        writeln!(out, "functions:")?;
        for f in &cur.functions.specs() {
            writeln!(
                out,
                "  {}: {}",
                f.name,
                one_line(f.description.as_deref().unwrap_or(""), 90)
            )?;
            writeln!(
                out,
                "    input:  {}",
                serde_json::to_string(&f.input_schema)?
            )?;
            if let Some(o) = &f.output_schema {
                writeln!(out, "    output: {}", serde_json::to_string(o)?)?;
            }
        }
        if !output.verdicts.is_empty() {
            writeln!(out, "verdicts:")?;
            for v in &output.verdicts {
                writeln!(out, "  {}", one_line(&v.to_string(), 160))?;
            }
        }
    }
    writeln!(out, "versions:")?;
    for view in &output.versions {
        let v = &view.version;
        writeln!(
            out,
            "  {:>3}  {}  {}  sha256 {}{}",
            v.version,
            ledger::format_ms(v.created_at),
            v.state.as_str(),
            &v.code_hash[..v.code_hash.len().min(16)],
            match &view.created_by {
                Some(by) if !by.actor.is_empty() =>
                    format!("  by {}", one_line(&by.to_string(), 80)),
                _ => String::new(),
            }
        )?;
        #[cfg(feature = "team")]
        if view.publisher != crate::team::publisher::Publisher::Local {
            writeln!(out, "       published by {}", view.publisher)?;
        }
    }
    if !output.approvals.is_empty() || !output.package_approvals.is_empty() {
        writeln!(out, "approvals:")?;
        for a in &output.approvals {
            writeln!(
                out,
                "  {}  {}  via {}  code {}  {}",
                a.key,
                ledger::format_ms(a.granted_at),
                a.via,
                &a.code_hash[..a.code_hash.len().min(12)],
                match &a.allowlist {
                    Some(l) => format!("allowlist: {}", or_none(l)),
                    None => "no allowlist: this version only".to_string(),
                }
            )?;
        }
        for a in &output.package_approvals {
            writeln!(
                out,
                "  packages {}  {}  via {}  from {}  set {}",
                a.packages,
                ledger::format_ms(a.granted_at),
                a.via,
                a.source,
                &a.digest[..a.digest.len().min(12)]
            )?;
        }
    }
    let s = &output.stats;
    writeln!(out, "calls: {}, failures: {}", s.calls, s.failures)?;
    if let Some(err) = &s.last_error {
        writeln!(out, "last error: {}", one_line(err, 200))?;
    }
    if !output.recent_calls.is_empty() {
        writeln!(out, "recent calls:")?;
        for c in &output.recent_calls {
            writeln!(
                out,
                "  {}  v{} {}  {} ms  {}{}",
                ledger::format_ms(c.started_at),
                c.version,
                c.function,
                c.duration_ms,
                match c.outcome {
                    ledger::CallKind::Ok => "ok",
                    ledger::CallKind::ToolError => "tool error",
                    ledger::CallKind::Failure => "error",
                },
                c.error
                    .as_deref()
                    .map(|e| format!(": {}", one_line(e, 80)))
                    .unwrap_or_default()
            )?;
        }
    }
    if !output.recent_events.is_empty() {
        writeln!(out, "recent events:")?;
        for e in &output.recent_events {
            writeln!(
                out,
                "  {}  {}  {}",
                ledger::format_ms(e.at),
                e.kind,
                one_line(&e.detail, 100)
            )?;
        }
    }
    Ok(())
}
