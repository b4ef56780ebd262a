//! The user's decisions about a tool or a key, whoever takes them: `autotool tools …` and the
//! console share these, so a decision means the same from either, and each is written to the
//! event log naming who took it (`by`: `cli`, `console`).
//!
//! Approving and revoking are [`crate::consent`]'s (`approve_key`, `approve_packages`,
//! `revoke`); rehab and retire, pin and unpin, removal and a key's hosts are here.

use crate::credentials::KeyStore;
use crate::ledger::Event;
use crate::registry::{Registry, RegistryError};
use autotool_policy::lifecycle::Manual;

/// One action of the console, as its confirmation form posts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Approve { tool: String, key: String },
    ApprovePackages { tool: String },
    ApproveReach { tool: String },
    Narrow { tool: String },
    Revoke { tool: String, key: Option<String> },
    Rehab { tool: String },
    Retire { tool: String },
    Pin { tool: String },
    Unpin { tool: String },
    Remove { tool: String },
    Allow { key: String, host: String },
    Disallow { key: String, host: String },
}

impl Action {
    /// The action named `action` with its fields, or why not.
    pub fn parse(fields: &[(String, String)]) -> Result<Action, String> {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let need = |name: &str| get(name).ok_or_else(|| format!("`{name}` is missing"));
        let action = need("action")?;
        Ok(match action.as_str() {
            "approve" => match (get("key"), get("reach")) {
                (Some(key), _) => Action::Approve {
                    tool: need("tool")?,
                    key,
                },
                (None, Some(_)) => Action::ApproveReach {
                    tool: need("tool")?,
                },
                (None, None) => Action::ApprovePackages {
                    tool: need("tool")?,
                },
            },
            "narrow" => Action::Narrow {
                tool: need("tool")?,
            },
            "revoke" => Action::Revoke {
                tool: need("tool")?,
                key: get("key"),
            },
            "rehab" => Action::Rehab {
                tool: need("tool")?,
            },
            "retire" => Action::Retire {
                tool: need("tool")?,
            },
            "pin" => Action::Pin {
                tool: need("tool")?,
            },
            "unpin" => Action::Unpin {
                tool: need("tool")?,
            },
            "remove" => Action::Remove {
                tool: need("tool")?,
            },
            "allow" => Action::Allow {
                key: need("key")?,
                host: need("host")?,
            },
            "disallow" => Action::Disallow {
                key: need("key")?,
                host: need("host")?,
            },
            other => return Err(format!("no action named {other:?}")),
        })
    }

    /// The question the confirmation page asks.
    pub fn question(&self) -> String {
        match self {
            Action::Approve { tool, key } => format!(
                "Allow {tool} to use {key}? It is given the key on its next call, and can send \
                 it only where the key's allowlist permits."
            ),
            Action::ApprovePackages { tool } => format!(
                "Allow {tool} to have the packages it declares installed (as resolved when it \
                 asked)?"
            ),
            Action::ApproveReach { tool } => format!(
                "Let {tool} reach the hosts and directories it declares (REQUIRED_HOSTS, \
                 READ_DIRS, WRITE_DIRS)? A later version that declares more is asked again."
            ),
            Action::Narrow { tool } => format!(
                "Limit {tool}, kept from before declared reach, to what its code declares? It \
                 reaches any public host now; afterwards only the hosts it declares, once granted."
            ),
            Action::Revoke {
                tool,
                key: Some(key),
            } => {
                format!("Withdraw {tool}'s approval of {key}? Its next call asks again.")
            }
            Action::Revoke { tool, key: None } => format!(
                "Withdraw every approval of {tool} (keys, packages and reach)? Its next call asks \
                 again."
            ),
            Action::Rehab { tool } => format!("Put {tool} back on probation?"),
            Action::Retire { tool } => {
                format!("Retire {tool}? It leaves every host's list; rehab brings it back.")
            }
            Action::Pin { tool } => format!(
                "Pin {tool}? Nothing replaces its current version (an agent's rewrite, a pull, a \
                 followed library, a changed file) until you unpin it; rollback and remove still \
                 work."
            ),
            Action::Unpin { tool } => {
                format!("Unpin {tool}? New versions may replace its current version again.")
            }
            Action::Remove { tool } => format!(
                "Remove {tool}? Running servers unmount it and its approvals are revoked; its \
                 versions and history are kept."
            ),
            Action::Allow { key, host } => format!("Allow {key} to be sent to {host}?"),
            Action::Disallow { key, host } => {
                format!("Stop {key} from being sent to {host}?")
            }
        }
    }

    /// Take the decision, as `by` (`console`), with its event; what happened, for the user.
    pub fn run(&self, registry: &Registry, keys: &KeyStore, by: &str) -> anyhow::Result<String> {
        match self {
            Action::Approve { tool, key } => {
                crate::consent::approve_key(registry, keys, tool, key, by)
            }
            Action::ApprovePackages { tool } => {
                crate::consent::approve_packages(registry, tool, by)
            }
            Action::ApproveReach { tool } => crate::consent::approve_reach(registry, tool, by),
            Action::Narrow { tool } => crate::consent::narrow(registry, tool),
            Action::Revoke { tool, key } => {
                crate::consent::revoke(registry, tool, key.as_deref(), by)
            }
            Action::Rehab { tool } => manual(registry, tool, Manual::Rehab, by),
            Action::Retire { tool } => manual(registry, tool, Manual::Retire, by),
            Action::Pin { tool } => pin(registry, tool),
            Action::Unpin { tool } => unpin(registry, tool),
            Action::Remove { tool } => remove(registry, tool, by),
            Action::Allow { key, host } => hosts(registry, keys, key, host, true, by),
            Action::Disallow { key, host } => hosts(registry, keys, key, host, false, by),
        }
    }
}

/// Rehab or retire `name`'s current version by hand, with its `state_changed` event naming
/// `by`. What happened, for the user.
pub fn manual(registry: &Registry, name: &str, action: Manual, by: &str) -> anyhow::Result<String> {
    let Some(current) = registry.get(name)? else {
        return Err(RegistryError::NotFound(name.to_string()).into());
    };
    let (verb, done) = match action {
        Manual::Rehab => ("rehab", "put back on probation"),
        Manual::Retire => ("retire", "retired"),
    };
    let to = autotool_policy::lifecycle::manual(current.state, action)
        .map_err(|why| anyhow::anyhow!("cannot {verb} {name}: {why}"))?;
    registry.ledger().set_state(
        name,
        current.version,
        to,
        &format!("{done} by the user ({by})"),
    )?;
    Ok(format!(
        "{name} v{} is now {}. Running `autotool serve` processes {} within a second.",
        current.version,
        to.as_str(),
        if to.listed() {
            "list it again"
        } else {
            "take it off their lists"
        }
    ))
}

/// Pin `name`: nothing replaces its current version until it is unpinned. Its `pinned` event
/// and the pin name who did it ([`crate::ledger::actor::current`]: `cli`, `console`).
pub fn pin(registry: &Registry, name: &str) -> anyhow::Result<String> {
    let (pin, new) = registry
        .ledger()
        .pin(name, &crate::ledger::actor::current())?;
    let version = registry.get(name)?.map_or(0, |v| v.version);
    Ok(if new {
        format!(
            "{name} v{version} is pinned: nothing replaces it (an agent's rewrite, a pull, a \
             followed library, a changed file) until `autotool tools unpin {name}`. Rollback \
             and remove still work."
        )
    } else {
        format!("{name} was already {pin}; nothing changed.")
    })
}

/// Unpin `name`: new versions may replace its current one again. Its `unpinned` event names
/// who did it.
pub fn unpin(registry: &Registry, name: &str) -> anyhow::Result<String> {
    let had = registry
        .ledger()
        .unpin(name, &crate::ledger::actor::current())?;
    let version = registry.get(name)?.map_or(0, |v| v.version);
    Ok(match had {
        Some(pin) => {
            format!("{name} is unpinned (it was {pin}): new versions may replace v{version} again.")
        }
        None => format!("{name} was not pinned; nothing changed."),
    })
}

/// Remove `name`, its `removed` event naming `by`.
pub fn remove(registry: &Registry, name: &str, by: &str) -> anyhow::Result<String> {
    let name = autotool_policy::names::ToolName::parse(name)?;
    let detail = format!("removed by the user ({by}); history and files kept");
    Ok(if registry.remove_by(name.as_str(), &detail)? {
        format!(
            "Removed {name}. Running `autotool serve` processes unmount it within a few \
             seconds; its versions and history are kept."
        )
    } else {
        format!("{name} was already removed.")
    })
}

/// Add `host` to `key`'s allowlist, or take it off, with an `allowlist_changed` event naming
/// `by`. Taking off the last host is refused: an empty list would lift the limit, letting
/// the key go anywhere (`autotool keys allow KEY` with no hosts does that, on purpose).
pub fn hosts(
    registry: &Registry,
    keys: &KeyStore,
    key: &str,
    host: &str,
    allow: bool,
    by: &str,
) -> anyhow::Result<String> {
    let mut list = keys.allowlist(key)?.unwrap_or_default();
    let rule = autotool_policy::hosts::AllowRule::parse(host)
        .map_err(|e| anyhow::anyhow!("{host:?} is not a host to allow: {e}"))?
        .to_string();
    if allow {
        if list.contains(&rule) {
            return Ok(format!("{key} may already be sent to {rule}."));
        }
        list.push(rule.clone());
    } else {
        if !list.contains(&rule) {
            return Ok(format!("{key} was not allowed to {rule}; nothing changed."));
        }
        if list.len() == 1 {
            anyhow::bail!(
                "{rule} is the only host {key} may be sent to; taking it off would let the key \
                 go to any host. Allow another host first, or lift the limit on purpose with \
                 `autotool keys allow {key}` (no hosts)."
            );
        }
        list.retain(|h| *h != rule);
    }
    let stored = keys.allow(key, &list)?;
    registry.ledger().event(
        None,
        Event::AllowlistChanged,
        &format!(
            "{key}: {} {rule} by the user ({by}); now {}",
            if allow { "allowed" } else { "disallowed" },
            stored.join(" ")
        ),
    )?;
    Ok(format!(
        "{key} may now be sent to: {}. Tools holding it are asked again when the list is \
         widened.",
        stored.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn actions_parse_from_their_forms() {
        assert_eq!(
            Action::parse(&fields(&[
                ("action", "approve"),
                ("tool", "t"),
                ("key", "K")
            ])),
            Ok(Action::Approve {
                tool: "t".into(),
                key: "K".into()
            })
        );
        assert_eq!(
            Action::parse(&fields(&[("action", "approve"), ("tool", "t")])),
            Ok(Action::ApprovePackages { tool: "t".into() })
        );
        assert_eq!(
            Action::parse(&fields(&[("action", "revoke"), ("tool", "t"), ("key", "")])),
            Ok(Action::Revoke {
                tool: "t".into(),
                key: None
            })
        );
        assert_eq!(
            Action::parse(&fields(&[
                ("action", "approve"),
                ("tool", "t"),
                ("reach", "1")
            ])),
            Ok(Action::ApproveReach { tool: "t".into() })
        );
        assert_eq!(
            Action::parse(&fields(&[("action", "narrow"), ("tool", "t")])),
            Ok(Action::Narrow { tool: "t".into() })
        );
        assert!(Action::parse(&fields(&[("action", "allow"), ("key", "K")])).is_err());
        assert!(Action::parse(&fields(&[("action", "format_disk")])).is_err());
        assert!(Action::parse(&fields(&[])).is_err());
    }
}
