//! A version's lifecycle state, moved: by the user or a rule (`set_state`, `set_state_from`),
//! and when its code pin breaks (`break_pin`); each change bumps the generation and leaves an
//! event.

use super::*;

impl Ledger {
    /// Set one version's lifecycle state (and bump the generation, with an audit event).
    /// Returns false when there is no such version.
    pub fn set_state(
        &self,
        name: &str,
        version: u32,
        state: State,
        why: &str,
    ) -> Result<bool, LedgerError> {
        self.move_state(name, version, None, state, why)
    }

    /// Move one version from state `from` to `to` (with an audit event and a generation bump);
    /// nothing happens if it is no longer in `from` (another process moved it first). Returns
    /// whether it moved.
    pub fn set_state_from(
        &self,
        name: &str,
        version: u32,
        from: State,
        to: State,
        why: &str,
    ) -> Result<bool, LedgerError> {
        self.move_state(name, version, Some(from), to, why)
    }

    /// [`Ledger::set_state`] and [`Ledger::set_state_from`]: move one version to `to` when it
    /// is in `from` (in any state for `None`), with a generation bump and an audit event.
    fn move_state(
        &self,
        name: &str,
        version: u32,
        from: Option<State>,
        to: State,
        why: &str,
    ) -> Result<bool, LedgerError> {
        self.write(|tx| {
            let n = tx.tx.execute(
                "UPDATE versions SET state = ?4
                 WHERE name = ?1 AND version = ?2 AND (?3 IS NULL OR state = ?3)",
                params![name, version, from.map(State::as_str), to.as_str()],
            )?;
            if n == 0 {
                return Ok(false);
            }
            tx.bump_generation()?;
            tx.event(
                Some(name),
                Event::StateChanged,
                &format!("version {version} is now {}: {why}", to.as_str()),
            )?;
            if to == State::Active {
                tx.adopt_met(name, version)?;
            }
            Ok(true)
        })
    }

    /// A version's pin broke (`reason` says how): it becomes `draft`, off every list and run by
    /// nothing, unless it already is. Returns whether its state changed.
    pub fn break_pin(&self, name: &str, version: u32, reason: &str) -> Result<bool, LedgerError> {
        self.write(|tx| {
            let n = tx.tx.execute(
                "UPDATE versions SET state = 'draft'
                 WHERE name = ?1 AND version = ?2 AND state != 'draft'",
                params![name, version],
            )?;
            if n == 0 {
                return Ok(false);
            }
            tx.bump_generation()?;
            tx.event(
                Some(name),
                Event::PinBroken,
                &format!("version {version}: {reason}"),
            )?;
            tx.event(
                Some(name),
                Event::StateChanged,
                &format!("version {version} is now draft: {reason}; it is verified again before it is listed"),
            )?;
            Ok(true)
        })
    }
}
