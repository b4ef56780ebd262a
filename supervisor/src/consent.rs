//! Consent per tool × key, the part that speaks no protocol: the sealed state of a question
//! ([`Consent`]), which keys the approvals on record leave uncovered ([`uncovered`]), the rows an
//! approval writes ([`rows_for`]), and `autotool tools approve|revoke`.
//!
//! What is asked and when is decided in [`autotool_policy::consent`]; asking a host in its own
//! era (a form elicitation, or an `input_required` result) is the protocol edge's
//! (`crate::mcp::consent`). A sealed question (rmcp's [`RequestStateCodec`]: HMAC-SHA256 under
//! a key drawn at start) is bound to the called tool, a digest of its arguments and the channel
//! the question went out on, valid for [`STATE_TTL`] and for one answer: an answer arriving on
//! another channel (a session a tool might have opened, say) is refused.
//!
//! The value of a key is never asked for, shown, or put in a question: only its name and where
//! it may be sent.

use crate::credentials::KeyStore;
use crate::ledger::{ApprovalRow, now_ms};
use crate::registry::Registry;
use crate::version::Subject;
pub use autotool_policy::consent::Ask;
use autotool_policy::consent::{self as rules, Approval, Verdict, Wanted};
use autotool_policy::hosts::AllowRule;
use autotool_policy::names::KeyName;
use rmcp::model::{JsonObject, RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a sealed consent question stays answerable.
pub const STATE_TTL: Duration = Duration::from_secs(600);

/// How long a host may take to answer an elicitation before the call gives up.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The key of the consent form in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "consent";

/// The sealed state of one `input_required` question.
#[derive(Debug, Serialize, Deserialize)]
pub struct State {
    /// Single use: a nonce is accepted once.
    nonce: String,
    pub tool: String,
    pub code: String,
    pub keys: Vec<KeyName>,
    /// The digest of the package set asked about, if the question was about one.
    #[serde(default)]
    pub packages: Option<String>,
    /// The digest of the reach asked about ([`ReachAsk::digest`]), if the question named any.
    #[serde(default)]
    pub reach: Option<String>,
}

/// Why an echoed `requestState` was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    #[error("it has expired (a question stays answerable for {} minutes); call again to be asked anew", STATE_TTL.as_secs() / 60)]
    Expired,
    #[error("it was not issued by this autotool for this call and these arguments")]
    Forged,
    #[error("it was already used once; call again to be asked anew")]
    Replayed,
}

/// The codec and the nonces already answered.
pub struct Consent {
    codec: RequestStateCodec,
    used: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Consent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consent").finish_non_exhaustive()
    }
}

/// `N` bytes from `/dev/urandom`: the consent sealing key and nonces, the service token, the
/// demo's key.
pub(crate) fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` with every object's keys in order, so equal arguments digest equally however the
/// host ordered them.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// What a sealed state is bound to: the channel it was asked on, the called tool and a digest
/// of its arguments.
fn binding(channel: &str, called: &str, arguments: &JsonObject) -> Vec<u8> {
    let args = canonical(&Value::Object(arguments.clone())).to_string();
    let digest = Sha256::digest(args.as_bytes());
    let channel = hex(&Sha256::digest(channel.as_bytes()));
    format!("autotool/consent/v2|{channel}|{called}|{}", hex(&digest)).into_bytes()
}

impl Consent {
    /// A codec under a fresh random key: states from another process (or an earlier run) are
    /// never accepted.
    pub fn new() -> std::io::Result<Consent> {
        let key: [u8; 32] = random_bytes()?;
        let codec = RequestStateCodec::try_new(key.to_vec())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Consent {
            codec,
            used: Mutex::new(HashMap::new()),
        })
    }

    /// Seal a question about `keys` of `subject` (and its package set `packages`, by digest),
    /// asked on `channel`, for a call of `called` with `arguments`.
    #[allow(clippy::too_many_arguments)]
    pub fn seal(
        &self,
        subject: Subject<'_>,
        keys: &[KeyName],
        packages: Option<&str>,
        reach: Option<&str>,
        channel: &str,
        called: &str,
        arguments: &JsonObject,
    ) -> Result<String, String> {
        let nonce = hex(&random_bytes::<16>().map_err(|e| e.to_string())?);
        let state = State {
            nonce,
            tool: subject.tool.to_string(),
            code: subject.code_hash.to_string(),
            keys: keys.to_vec(),
            packages: packages.map(str::to_string),
            reach: reach.map(str::to_string),
        };
        let ad = binding(channel, called, arguments);
        self.codec
            .seal_json_with(
                &state,
                &SealOptions::new().associated_data(&ad).ttl(STATE_TTL),
            )
            .map_err(|e| e.to_string())
    }

    /// Open an echoed state arriving on `channel` for a call of `called` with `arguments`, and
    /// spend its nonce.
    pub fn open(
        &self,
        sealed: &str,
        channel: &str,
        called: &str,
        arguments: &JsonObject,
    ) -> Result<State, StateError> {
        let ad = binding(channel, called, arguments);
        let state: State = self
            .codec
            .open_json_with(sealed, &ad)
            .map_err(|e| match e {
                rmcp::model::RequestStateError::Expired => StateError::Expired,
                _ => StateError::Forged,
            })?;
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        // A nonce can only be replayed while its state is unexpired; forget older ones.
        used.retain(|_, at| at.elapsed() < STATE_TTL + Duration::from_secs(60));
        if used.insert(state.nonce.clone(), Instant::now()).is_some() {
            return Err(StateError::Replayed);
        }
        Ok(state)
    }
}

/// A package set the user has not approved for a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackagesAsk {
    /// The set's digest.
    pub digest: String,
    /// `install feedparser 6.0.11 from PyPI`.
    pub phrase: String,
    /// The newest set approved before for the tool (`feedparser 6.0.10`), when this one
    /// differs from it.
    pub before: Option<String>,
}

/// Declared reach the user has not granted a tool: hosts it would reach without a key and
/// directories it would read or write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReachAsk {
    /// What is asked: the part of the declaration no grant covers.
    pub reach: autotool_policy::reach::DeclaredReach,
    /// `reach api.open-meteo.com without a key and read ~/notes`.
    pub phrase: String,
    /// sha256 of what is asked, which a sealed question is bound to.
    pub digest: String,
}

impl ReachAsk {
    pub fn new(reach: autotool_policy::reach::DeclaredReach) -> ReachAsk {
        let text = serde_json::to_string(&reach).unwrap_or_default();
        ReachAsk {
            phrase: reach.phrase(),
            digest: crate::version::code_hash(text.as_bytes()),
            reach,
        }
    }
}

/// The question put to the user about the keys `asks` names ([`rules::question`]), the
/// package set `packages` and the declared reach `reach`, each host and directory named with
/// whether it is read or written.
pub fn question(
    tool: &str,
    asks: &[Ask],
    packages: Option<&PackagesAsk>,
    reach: Option<&ReachAsk>,
    uses: &[String],
) -> String {
    let mut q = match reach {
        Some(r) if asks.is_empty() && packages.is_none() => {
            format!("Allow the tool `{tool}` to {}?", r.phrase)
        }
        Some(r) => format!(
            "{} It also asks to {}.",
            question_without_uses(tool, asks, packages),
            r.phrase
        ),
        None => question_without_uses(tool, asks, packages),
    };
    if reach.is_some() {
        q.push_str(
            " Nothing else: without a key it reaches no other host (not even to look a name \
             up), and no other directory of yours.",
        );
    }
    if !uses.is_empty() {
        q.push_str(&format!(
            " It also calls {} (USES): each call runs that tool in its own sandbox with its own \
             keys, which this tool never sees.",
            uses.join(", ")
        ));
    }
    q
}

fn question_without_uses(tool: &str, asks: &[Ask], packages: Option<&PackagesAsk>) -> String {
    let Some(p) = packages else {
        return rules::question(tool, asks);
    };
    let mut how = "autotool installs them itself, wheels only (no install script runs), and \
                   mounts them read-only into the tool's sandbox, where they run confined like the \
                   tool."
        .to_string();
    if let Some(before) = &p.before {
        how.push_str(&format!(
            " Asked again: its packages changed (approved before: {before})."
        ));
    }
    if asks.is_empty() {
        format!("Allow the tool `{tool}` to {}? {how}", p.phrase)
    } else {
        format!(
            "{} It also asks to {}: {how}",
            rules::question(tool, asks),
            p.phrase
        )
    }
}

/// Parse stored allowlist entries (canonical already); an entry that no longer parses makes
/// the list allow nothing, never everything.
pub fn parse_list(entries: &[String]) -> Vec<AllowRule> {
    let mut rules = Vec::new();
    for e in entries {
        match AllowRule::parse(e) {
            Ok(r) => rules.push(r),
            Err(err) => {
                tracing::warn!(
                    "an allowlist entry does not parse ({err}); the list allows nothing"
                );
                return Vec::new();
            }
        }
    }
    rules
}

/// An approval on record; `None` for a row whose key name no longer passes the rule.
fn approval_of(row: &ApprovalRow) -> Option<Approval> {
    Some(Approval {
        key: KeyName::parse(&row.key).ok()?,
        code_hash: row.code_hash.clone(),
        allowlist: row.allowlist.as_deref().map(parse_list),
        declared: row
            .declared
            .iter()
            .filter_map(|k| KeyName::parse(k).ok())
            .collect(),
        sandboxed: row.sandboxed,
    })
}

/// The keys of `subject` among `candidates` that the approvals on record do not cover.
pub fn uncovered(
    subject: Subject<'_>,
    candidates: &[KeyName],
    allowlists: &BTreeMap<KeyName, Vec<AllowRule>>,
    approvals: &[ApprovalRow],
    sandboxed: bool,
) -> Vec<Ask> {
    let approvals: Vec<Approval> = approvals.iter().filter_map(approval_of).collect();
    let declared: BTreeSet<KeyName> = subject.declared.iter().cloned().collect();
    candidates
        .iter()
        .filter_map(|key| {
            let list = allowlists.get(key);
            let wanted = Wanted {
                key,
                code_hash: subject.code_hash,
                allowlist: list.map(Vec::as_slice),
                declared: &declared,
                sandboxed,
            };
            match rules::decide(&wanted, &approvals) {
                Verdict::Approved => None,
                Verdict::Ask(reason) => Some(Ask {
                    key: key.clone(),
                    allowlist: list.cloned(),
                    reason,
                }),
            }
        })
        .collect()
}

/// The rows an approval of `keys` of `subject` writes.
pub fn rows_for(
    subject: Subject<'_>,
    keys: &[KeyName],
    allowlists: &BTreeMap<KeyName, Vec<AllowRule>>,
    sandboxed: bool,
    via: &str,
) -> Vec<ApprovalRow> {
    let now = now_ms();
    keys.iter()
        .map(|key| ApprovalRow {
            tool: subject.tool.to_string(),
            key: key.to_string(),
            code_hash: subject.code_hash.to_string(),
            allowlist: allowlists
                .get(key)
                .map(|l| l.iter().map(ToString::to_string).collect()),
            declared: subject.declared.iter().map(ToString::to_string).collect(),
            sandboxed,
            via: via.to_string(),
            granted_at: now,
        })
        .collect()
}

/// `autotool tools approve TOOL KEY`: approve `key` for the tool's current version and for
/// the question it could not ask, if any. Returns what was approved, for the user.
pub fn approve_from_cli(
    registry: &Registry,
    keys: &KeyStore,
    tool: &str,
    key: &str,
) -> anyhow::Result<String> {
    approve_key(registry, keys, tool, key, "cli")
}

/// Approve `key` for the tool's current version and its waiting question, as the user did
/// through `via` (`cli`, `console`): the one path `tools approve` and the console share.
pub fn approve_key(
    registry: &Registry,
    keys: &KeyStore,
    tool: &str,
    key: &str,
    via: &str,
) -> anyhow::Result<String> {
    let tool = autotool_policy::names::ToolName::parse(tool)?;
    let key = KeyName::parse(key)?;
    let current = registry.get(tool.as_str())?;
    let pending = registry.ledger().pending(tool.as_str())?;
    // (code hash, declared keys) of the current version and of a question waiting for an
    // answer.
    let mut asked: Vec<(String, Vec<KeyName>)> = Vec::new();
    if let Some(v) = &current {
        asked.push((v.code_hash.clone(), v.required_env.clone()));
    }
    if let Some(p) = &pending
        && !asked.iter().any(|(hash, _)| *hash == p.code_hash)
    {
        let declared = p
            .declared
            .iter()
            .filter_map(|k| KeyName::parse(k).ok())
            .collect();
        asked.push((p.code_hash.clone(), declared));
    }
    if asked.is_empty() {
        anyhow::bail!(
            "no tool named {:?}, and no tool of that name waiting for consent (see `autotool \
             tools list`)",
            tool.as_str()
        );
    }
    let declaring: Vec<&(String, Vec<KeyName>)> = asked
        .iter()
        .filter(|(_, declared)| declared.contains(&key))
        .collect();
    if declaring.is_empty() {
        let mut declared: Vec<&str> = asked
            .iter()
            .flat_map(|(_, d)| d.iter().map(KeyName::as_str))
            .collect();
        declared.sort();
        declared.dedup();
        anyhow::bail!(
            "{tool} does not declare {key}; it declares {}",
            if declared.is_empty() {
                "no keys".to_string()
            } else {
                declared.join(", ")
            }
        );
    }
    let list = keys
        .allowlist(key.as_str())?
        .map(|entries| parse_list(&entries));
    let mut allowlists = BTreeMap::new();
    if let Some(l) = &list {
        allowlists.insert(key.clone(), l.clone());
    }
    let mut rows = Vec::new();
    for (code_hash, declared) in declaring {
        let subject = Subject {
            tool: &tool,
            code_hash,
            declared,
            packages: None,
            uses: &[],
            reach: None,
        };
        // Approved for confined use: with an allowlist it holds across rewrites while tools run
        // confined; a server running unconfined still matches it to this code only.
        rows.extend(rows_for(
            subject,
            std::slice::from_ref(&key),
            &allowlists,
            true,
            via,
        ));
    }
    registry.ledger().grant(&rows)?;
    Ok(format!(
        "approved: `{tool}` may use {key}; it can send it {}.\n{}",
        rules::reach(&key, list.as_deref()),
        if list.is_some() {
            "The approval holds for later versions of the tool while the allowlist is not \
             widened and the tool declares no new keys."
        } else {
            "The key has no allowlist, so the approval holds for this version of the tool only."
        }
    ))
}

/// `autotool tools approve TOOL --packages`: approve the package set of the question the tool
/// could not ask, else of its current version. Returns what was approved, for the user.
pub fn approve_packages_from_cli(registry: &Registry, tool: &str) -> anyhow::Result<String> {
    approve_packages(registry, tool, "cli")
}

/// Approve the package set `tool` asked about (else its current version's), as the user did
/// through `via`.
pub fn approve_packages(registry: &Registry, tool: &str, via: &str) -> anyhow::Result<String> {
    let tool = autotool_policy::names::ToolName::parse(tool)?;
    let pending = registry.ledger().pending(tool.as_str())?;
    let from_question: Option<crate::packages::PackageSet> = pending
        .and_then(|p| p.packages)
        .map(|text| serde_json::from_str(&text))
        .transpose()?;
    let set = match from_question {
        Some(set) => set,
        None => match registry.get(tool.as_str())? {
            Some(v) => match &v.packages {
                Some(set) => (**set).clone(),
                None => anyhow::bail!("{tool} declares no packages (REQUIRED_PACKAGES)"),
            },
            None => anyhow::bail!(
                "no tool named {:?}, and no tool of that name waiting for consent (see \
                 `autotool tools list`)",
                tool.as_str()
            ),
        },
    };
    registry
        .ledger()
        .approve_packages(&crate::ledger::approved_now(tool.as_str(), &set, via))?;
    Ok(format!(
        "approved: `{tool}` may {}. The approval holds for this set only: a changed set is \
         asked about again.",
        set.install_phrase()
    ))
}

/// Grant `tool` the reach it declared: that of the question it could not ask, and that of its
/// current version (every host and directory each declares), as the user did through `via`
/// (`cli`, `console`). Returns what was granted, for the user.
pub fn approve_reach(registry: &Registry, tool: &str, via: &str) -> anyhow::Result<String> {
    use autotool_policy::reach::DeclaredReach;
    let tool = autotool_policy::names::ToolName::parse(tool)?;
    let pending = registry.ledger().pending(tool.as_str())?;
    let from_question: Option<DeclaredReach> = pending
        .and_then(|p| p.reach)
        .map(|text| serde_json::from_str(&text))
        .transpose()?;
    let current = registry.get(tool.as_str())?;
    if from_question.is_none() && current.is_none() {
        anyhow::bail!(
            "no tool named {:?}, and no tool of that name waiting for consent (see `autotool \
             tools list`)",
            tool.as_str()
        );
    }
    let items: Vec<_> = from_question
        .iter()
        .chain(current.as_ref().and_then(|v| v.reach.as_ref()))
        .flat_map(DeclaredReach::items)
        .collect();
    let reach = DeclaredReach::from_items(&items);
    if reach.is_empty() {
        let legacy = current.is_some_and(|v| v.reach.is_none());
        anyhow::bail!(
            "{tool} declares no reach (REQUIRED_HOSTS, READ_DIRS, WRITE_DIRS){}",
            if legacy {
                "; it is kept from before reach was declared and reaches any public host: \
                 `autotool tools narrow` limits it to what its code declares"
            } else {
                ": without a key it reaches no host and none of your directories"
            }
        );
    }
    registry.ledger().grant_reach(tool.as_str(), &reach, via)?;
    Ok(format!(
        "granted: `{tool}` may {}. The grant holds for later versions of the tool; a version \
         that declares more is asked again.",
        reach.phrase()
    ))
}

/// `autotool tools narrow TOOL`: a tool kept from before reach was declared reaches, from now
/// on, only what its current code declares (usually nothing without a key). Returns what
/// changed, for the user.
pub fn narrow(registry: &Registry, tool: &str) -> anyhow::Result<String> {
    let tool = autotool_policy::names::ToolName::parse(tool)?;
    let Some(current) = registry.get(tool.as_str())? else {
        anyhow::bail!(
            "no tool named {:?} (see `autotool tools list`)",
            tool.as_str()
        );
    };
    if let Some(reach) = &current.reach {
        return Ok(format!(
            "`{tool}` already reaches only what it declares ({}).",
            if reach.is_empty() {
                "nothing without a key".to_owned()
            } else {
                reach.phrase()
            }
        ));
    }
    let code = std::fs::read_to_string(registry.dir_of(&current).join(crate::version::TOOL_FILE))?;
    let reach = crate::verify::declarations::reach(&code)?;
    let n = registry.ledger().narrow_reach(tool.as_str(), &reach)?;
    Ok(format!(
        "narrowed: {n} version(s) of `{tool}` kept from before declared reach now reach {}. \
         A host it reached before is refused (and shown in `autotool tools show {tool}`); to \
         give it one, rewrite it to declare REQUIRED_HOSTS.",
        if reach.is_empty() {
            "no host without a key".to_owned()
        } else {
            format!(
                "only what the code declares (to {}), once granted",
                reach.phrase()
            )
        }
    ))
}

/// `autotool hosts allow HOST…`: allow hosts for every tool that declares them, so declaring
/// one asks nothing. Each entry parses as an allowlist entry does (public suffixes refused).
pub fn allow_hosts(registry: &Registry, hosts: &[String], via: &str) -> anyhow::Result<String> {
    let entries = hosts
        .iter()
        .map(|h| AllowRule::parse(h).map(|r| r.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    if entries.is_empty() {
        anyhow::bail!("name at least one host: `autotool hosts allow api.open-meteo.com`");
    }
    registry.ledger().allow_hosts(&entries, via)?;
    Ok(format!(
        "allowed for every tool that declares them in REQUIRED_HOSTS (asking nothing): {}. A \
         tool that does not declare a host still cannot reach it.",
        entries.join(", ")
    ))
}

/// `autotool tools revoke TOOL [KEY]`: without KEY, the tool's package approvals go too.
pub fn revoke_from_cli(
    registry: &Registry,
    tool: &str,
    key: Option<&str>,
) -> anyhow::Result<String> {
    revoke(registry, tool, key, "autotool tools revoke")
}

/// Withdraw `tool`'s approval of `key` (of every key and its packages without one), as the
/// user did through `how` (named in the `consent_revoked` events).
pub fn revoke(
    registry: &Registry,
    tool: &str,
    key: Option<&str>,
    how: &str,
) -> anyhow::Result<String> {
    // The same names `approve` takes: a path such as `../../etc` is no tool's name.
    let tool = autotool_policy::names::ToolName::parse(tool)?;
    let key = key.map(KeyName::parse).transpose()?;
    let (tool, key) = (tool.as_str(), key.as_ref().map(KeyName::as_str));
    let known = registry.get(tool)?.is_some() || registry.ledger().pending(tool)?.is_some();
    let why = format!("revoked by the user ({how})");
    let why = why.as_str();
    let mut revoked = registry.ledger().revoke(tool, key, why)?;
    if key.is_none() && registry.ledger().revoke_packages(tool, why)? > 0 {
        revoked.push("its packages".into());
    }
    if key.is_none() && registry.ledger().revoke_reach(tool, why)? > 0 {
        revoked.push("its reach (hosts and directories)".into());
    }
    if revoked.is_empty() && !known {
        anyhow::bail!(
            "no tool named {tool:?}, and no tool of that name waiting for consent (see `autotool \
             tools list`)"
        );
    }
    Ok(if revoked.is_empty() {
        format!(
            "{tool} had no approval{}; nothing changed",
            key.map(|k| format!(" of {k}")).unwrap_or_default()
        )
    } else {
        format!(
            "revoked: `{tool}` may no longer use {}; running servers stop its process and ask \
             again on the next call",
            revoked.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    fn tool() -> autotool_policy::names::ToolName {
        autotool_policy::names::ToolName::parse("weather").unwrap()
    }

    fn key() -> KeyName {
        KeyName::parse("WEATHER_API_KEY").unwrap()
    }

    #[test]
    fn the_question_names_the_functions_a_tool_calls() {
        let asks = [Ask {
            key: key(),
            allowlist: None,
            reason: autotool_policy::consent::Reason::First,
        }];
        let plain = question("trip", &asks, None, None, &[]);
        let composite = question(
            "trip",
            &asks,
            None,
            None,
            &["weather__forecast".to_string()],
        );
        assert_eq!(
            composite,
            format!(
                "{plain} It also calls weather__forecast (USES): each call runs that tool in its \
                 own sandbox with its own keys, which this tool never sees."
            )
        );
        assert!(!plain.contains("USES"), "{plain}");
    }

    #[test]
    fn the_question_names_each_host_and_directory_and_its_mode() {
        let reach = ReachAsk::new(
            autotool_policy::reach::DeclaredReach::parse(
                &["api.open-meteo.com"],
                &["~/notes"],
                &["~/exports"],
            )
            .unwrap(),
        );
        assert_eq!(
            question("weather", &[], None, Some(&reach), &[]),
            "Allow the tool `weather` to reach api.open-meteo.com without a key, read ~/notes \
             and read and write ~/exports? Nothing else: without a key it reaches no other host \
             (not even to look a name up), and no other directory of yours."
        );
        let asks = [Ask {
            key: key(),
            allowlist: None,
            reason: autotool_policy::consent::Reason::First,
        }];
        let both = question("weather", &asks, None, Some(&reach), &[]);
        assert!(
            both.starts_with(&question("weather", &asks, None, None, &[])),
            "{both}"
        );
        assert!(
            both.contains("It also asks to reach api.open-meteo.com"),
            "{both}"
        );
    }

    #[test]
    fn a_state_opens_once_for_the_same_call_on_the_same_channel_only() {
        let c = Consent::new().unwrap();
        let (tool, hash, keys) = (tool(), "ab".repeat(32), vec![key()]);
        let subject = Subject {
            tool: &tool,
            code_hash: &hash,
            declared: &keys,
            packages: None,
            uses: &[],
            reach: None,
        };
        let a = args(serde_json::json!({"city": "Oslo", "days": 3}));
        let sealed = c
            .seal(subject, &keys, None, None, "stdio", "weather__forecast", &a)
            .unwrap();
        // Other arguments, another tool, another channel, or a tampered state: refused.
        let b = args(serde_json::json!({"city": "Bergen", "days": 3}));
        assert_eq!(
            c.open(&sealed, "stdio", "weather__forecast", &b).err(),
            Some(StateError::Forged)
        );
        assert_eq!(
            c.open(&sealed, "stdio", "other__forecast", &a).err(),
            Some(StateError::Forged)
        );
        assert_eq!(
            c.open(&sealed, "http session 2", "weather__forecast", &a)
                .err(),
            Some(StateError::Forged)
        );
        let mut tampered = sealed.clone();
        tampered.insert(tampered.len() / 2, 'x');
        assert_eq!(
            c.open(&tampered, "stdio", "weather__forecast", &a).err(),
            Some(StateError::Forged)
        );
        // Another process's key: refused.
        let other = Consent::new().unwrap();
        assert_eq!(
            other.open(&sealed, "stdio", "weather__forecast", &a).err(),
            Some(StateError::Forged)
        );
        // Key order does not matter; the first open works, the replay does not.
        let reordered = args(serde_json::json!({"days": 3, "city": "Oslo"}));
        let state = c
            .open(&sealed, "stdio", "weather__forecast", &reordered)
            .unwrap();
        assert_eq!(state.keys, keys);
        assert_eq!(state.tool, "weather");
        assert_eq!(
            c.open(&sealed, "stdio", "weather__forecast", &a).err(),
            Some(StateError::Replayed)
        );
    }
}
