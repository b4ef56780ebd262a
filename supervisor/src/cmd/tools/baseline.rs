//! `autotool tools baseline`: what a tool owes its trusted versions, or one obligation
//! dropped.

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
    if json {
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(
            out,
            "{name} owes nothing yet: what a version meets joins its baseline when the version is promoted to active."
        )?;
        return Ok(());
    }
    writeln!(out, "{name} owes, from its trusted versions:")?;
    for r in &rows {
        let ob = &r.obligation;
        let owed = match (&ob.answer, ob.exact) {
            (Some(a), true) => format!(" → {}", one_line(&a.to_string(), 100)),
            (Some(a), false) => format!(" → shape {}", one_line(&a.to_string(), 100)),
            (None, _) => String::new(),
        };
        writeln!(out, "  {}{owed}", ob.shown())?;
    }
    writeln!(
        out,
        "Drop one (for an intended change) with `autotool tools baseline {name} --drop ID`."
    )?;
    Ok(())
}
