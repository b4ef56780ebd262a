//! `autotool tools baseline`: what a tool owes its trusted versions (the obligations, and the
//! functions its trusted versions call, `USES`, which a rewrite may not widen), or one
//! obligation dropped.

use super::{CliError, one_line};
use crate::registry::{Registry, RegistryError};
use std::io::Write;

/// `tools baseline`: list a tool's obligations, or drop one.
pub(super) fn baseline(
    registry: &Registry,
    name: &str,
    drop: Option<i64>,
    why: Option<&str>,
    json: bool,
    out: &mut impl Write,
) -> Result<(), CliError> {
    if registry.tool(name)?.is_none() {
        return Err(RegistryError::NotFound(name.to_string()).into());
    }
    let ledger = registry.ledger();
    if let Some(id) = drop {
        let why = why.unwrap_or("dropped by the user");
        if !ledger.drop_obligation(name, id, why)? {
            return Err(anyhow::anyhow!(
                "{name} owes no obligation #{id}; `autotool tools baseline {name}` lists them"
            )
            .into());
        }
        writeln!(
            out,
            "Dropped obligation #{id} of {name}: later versions no longer owe it."
        )?;
        return Ok(());
    }
    let rows = ledger.baseline(name, json)?;
    let uses = ledger.trusted_uses(name)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    if rows.is_empty() && uses.is_none() {
        writeln!(
            out,
            "{name} owes nothing yet: what a version meets joins its baseline when the version is promoted to active."
        )?;
        return Ok(());
    }
    if !rows.is_empty() {
        writeln!(out, "{name} owes, from its trusted versions:")?;
    }
    for r in &rows {
        let ob = &r.obligation;
        let owed = match (&ob.answer, ob.exact) {
            (Some(a), true) => format!(" → {}", one_line(&a.to_string(), 100)),
            (Some(a), false) => format!(" → shape {}", one_line(&a.to_string(), 100)),
            (None, _) => String::new(),
        };
        // A pulled baseline was written by its publisher: kept on its line.
        writeln!(out, "  {}{owed}", crate::terminal::escape_line(&ob.shown()))?;
    }
    writeln!(out, "{}", uses_line(uses.as_deref()))?;
    if !rows.is_empty() {
        writeln!(
            out,
            "Drop one (for an intended change) with `autotool tools baseline {name} --drop ID`."
        )?;
    }
    Ok(())
}

/// The `uses baseline:` line: the functions the tool's trusted versions call (`None`: no
/// version trusted yet), which a rewrite may call, or fewer, never another.
pub(super) fn uses_line(trusted: Option<&[String]>) -> String {
    match trusted {
        None => "uses baseline: not yet (no version trusted)".to_string(),
        Some([]) => "uses baseline: (none): its trusted versions call no other tool, and a \
                     rewrite may not either"
            .to_string(),
        Some(uses) => format!(
            "uses baseline: {} (what its trusted versions call: a rewrite may call these or \
             fewer, never another)",
            uses.join(", ")
        ),
    }
}
