//! `autotool trust …` and `autotool tools push|pull`: the team library's verbs ([`crate::team`];
//! `autotool library …` is [`super::follow`]).

use crate::home::Home;
use crate::library::Library;
use crate::team::pull::{PullOptions, Pulled};
use crate::team::reference::Reference;
use crate::team::trust::{Added, KeyPlace, Scope, Trust, scope_text};
use autotool_policy::names::KeyName;
use clap::Subcommand;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum TrustCmd {
    /// Make this machine's signing key (what `tools push` signs with).
    ///
    /// An ECDSA P-256 key, cosign's format: the private half in the OS keychain, or in
    /// $AUTOTOOL_HOME/trust/signing-key (0600) where no keychain is reachable (or with
    /// AUTOTOOL_TRUST_KEY_FILE=1). `trust show` prints the public half for your team.
    Init {
        /// Replace an existing key (signatures made with the old one no longer count as yours).
        #[arg(long)]
        force: bool,
    },
    /// Print this machine's public key as a PEM block (give it to your team).
    Show,
    /// Accept tools signed by a publisher's key.
    ///
    /// FILE is the PEM block the publisher's `autotool trust show` printed (or a cosign.pub);
    /// `-` reads it from stdin. Without --scope the publisher is believed for every registry.
    /// A NAME that already has another key is refused (`trust replace`).
    Add {
        /// A name for the publisher: lowercase letters, digits, . _ -.
        name: String,
        /// The publisher's public key (PEM), or `-` for stdin.
        file: String,
        /// Believe this publisher only for tools pulled from oci://HOST[:PORT] (a registry) or
        /// oci://HOST[:PORT]/REPO (a repository and those under it); repeat for several.
        #[arg(long = "scope", value_name = "oci://HOST[/REPO]")]
        scopes: Vec<String>,
    },
    /// Replace a trusted publisher's key, showing both fingerprints.
    ///
    /// The old key is kept retired: it still verifies the versions this machine pulled signed
    /// by it (so they can be pulled again), nothing newer. Scopes stay as they were.
    Replace {
        /// The publisher's name, as trusted.
        name: String,
        /// The publisher's new public key (PEM), or `-` for stdin.
        file: String,
    },
    /// List the publishers this machine accepts, with their keys' fingerprints.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop accepting a publisher's signatures (tools already pulled stay).
    Remove {
        /// The publisher's name.
        name: String,
    },
}

/// `autotool trust …`.
pub fn trust(cmd: TrustCmd, out: &mut impl Write) -> ExitCode {
    let result = Home::from_env()
        .map_err(|e| e.to_string())
        .and_then(|home| trust_in(&Trust::of(&home), cmd, out).map_err(|e| e.to_string()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail("trust", &e),
    }
}

fn trust_in(trust: &Trust, cmd: TrustCmd, out: &mut impl Write) -> anyhow::Result<()> {
    match cmd {
        TrustCmd::Init { force } => {
            let (key, place) = trust.init(force)?;
            let kept = match place {
                KeyPlace::Keychain => "its private half is in the OS keychain",
                KeyPlace::File => {
                    "no OS keychain is reachable here (or AUTOTOOL_TRUST_KEY_FILE=1): its \
                     private half is in $AUTOTOOL_HOME/trust/signing-key (0600); anyone who can \
                     read that file can sign as you"
                }
            };
            writeln!(
                out,
                "Made this machine's signing key {}; {kept}.\nGive your team the public key \
                 (`autotool trust show`); they accept it with `autotool trust add NAME FILE`.",
                key.fingerprint()
            )?;
        }
        TrustCmd::Show => write!(out, "{}", trust.public()?.to_pem())?,
        TrustCmd::Add { name, file, scopes } => {
            let text = read_key(&file)?;
            let scopes = scopes
                .iter()
                .map(|s| Scope::parse(s))
                .collect::<Result<Vec<_>, _>>()?;
            match trust.add(&name, &text, &scopes)? {
                Added::New(key) => {
                    let where_ = if scopes.is_empty() {
                        "from every registry (`--scope oci://HOST[/REPO]` limits a publisher \
                         to where they publish)"
                            .to_string()
                    } else {
                        format!("from {} only", scope_text(&scopes))
                    };
                    writeln!(
                        out,
                        "Tools signed by {name} ({}) can now be pulled here {where_}; each is \
                         still verified here, starts on probation and asks for its keys.",
                        key.fingerprint()
                    )?;
                }
                Added::Rescoped { key, before } => writeln!(
                    out,
                    "{name} ({}) was trusted for {}; now for {} only.",
                    key.fingerprint(),
                    scope_text(&before),
                    scope_text(&scopes)
                )?,
                Added::Unchanged(key) => writeln!(
                    out,
                    "{name} is already trusted with this key ({}); nothing changed.",
                    key.fingerprint()
                )?,
            }
        }
        TrustCmd::Replace { name, file } => {
            let text = read_key(&file)?;
            let old = trust
                .publishers()?
                .into_iter()
                .find(|p| p.name == name)
                .map(|p| p.key.fingerprint());
            let home = Home::from_env()?;
            let signed_before = old
                .as_deref()
                .map(|fp| crate::team::publisher::signed_by(&home, &name, fp))
                .unwrap_or_default();
            let count = signed_before.len();
            let (old, new) = trust.replace(&name, &text, signed_before)?;
            writeln!(
                out,
                "Replaced {name}'s key: {} (old) -> {} (new). Signatures by the new key count \
                 as {name}'s from now on; the old key is retired and still verifies only the \
                 {count} version(s) this machine pulled signed by it.",
                old.fingerprint(),
                new.fingerprint()
            )?;
        }
        TrustCmd::List { json } => {
            let publishers = trust.publishers()?;
            if json {
                let list: Vec<_> = publishers
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "name": p.name, "fingerprint": p.key.fingerprint(),
                            "scopes": p.scopes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                            "retired": p.retired.iter().map(|(_, r)| serde_json::json!({
                                "fingerprint": r.fingerprint, "retired_at": r.retired_at,
                                "digests": r.digests,
                            })).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                writeln!(out, "{}", serde_json::json!({"publishers": list}))?;
            } else if publishers.is_empty() {
                writeln!(
                    out,
                    "No publisher is trusted here yet (`autotool trust add NAME FILE`)."
                )?;
            } else {
                for p in publishers {
                    writeln!(
                        out,
                        "{}  {}  for {}",
                        p.name,
                        p.key.fingerprint(),
                        p.scope_text()
                    )?;
                    for (_, r) in &p.retired {
                        writeln!(
                            out,
                            "  retired {} ({}): verifies only {} version(s) pulled before",
                            r.fingerprint,
                            r.retired_at,
                            r.digests.len()
                        )?;
                    }
                }
            }
        }
        TrustCmd::Remove { name } => {
            if trust.remove(&name)? {
                writeln!(out, "Signatures by {name} are no longer accepted here.")?;
            } else {
                writeln!(out, "{name} was not a trusted publisher.")?;
            }
        }
    }
    Ok(())
}

/// A publisher's key from `file`, or stdin for `-`.
fn read_key(file: &str) -> anyhow::Result<String> {
    if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(std::io::stdin(), 64 << 10),
            &mut s,
        )?;
        return Ok(s);
    }
    std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("cannot read {file}: {e}"))
}

/// `autotool tools push|pull`, flattened into `autotool tools`.
#[derive(Debug, Subcommand)]
pub enum ToolsTeamCmd {
    /// Publish a tool's current version to an OCI registry, signed.
    ///
    /// Signed with this machine's key (`autotool trust init`).
    ///
    /// REF is oci://HOST[:PORT]/REPO[:TAG] (tag `latest` by default). Prints the digest. Only
    /// what verification recorded and the code travel: never key values, approvals or health.
    Push {
        /// The tool's name.
        name: String,
        /// oci://HOST[:PORT]/REPO[:TAG].
        reference: String,
        /// Speak plain HTTP to a registry that is not on loopback (loopback always is).
        #[arg(long)]
        plain_http: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fetch a tool from an OCI registry and verify it here.
    ///
    /// Its signature is checked against the publishers `autotool trust` keeps first.
    ///
    /// REF is oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]. The tool passes this machine's own
    /// verification and starts on probation; the keys it declares are asked here. Pulled by
    /// digest, it is pinned: a later pull of another digest does not replace it (`--unpin`).
    Pull {
        /// oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST].
        reference: String,
        /// Speak plain HTTP to a registry that is not on loopback (loopback always is).
        #[arg(long)]
        plain_http: bool,
        /// Take an artifact that carries no signature at all, as a new tool (nobody then
        /// vouches for it); never one signed by a key not trusted here.
        #[arg(long)]
        allow_unsigned: bool,
        /// Replace a tool pinned to another digest.
        #[arg(long)]
        unpin: bool,
        /// Take a version from another publisher than the current version's (or grown here,
        /// or unsigned): from now on the tool is theirs.
        #[arg(long)]
        new_publisher: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

impl ToolsTeamCmd {
    /// Whether `--json` was asked for.
    pub fn json(&self) -> bool {
        match self {
            ToolsTeamCmd::Push { json, .. } | ToolsTeamCmd::Pull { json, .. } => *json,
        }
    }
}

/// `autotool tools push|pull`.
pub fn tools(cmd: ToolsTeamCmd, out: &mut impl Write) -> ExitCode {
    match cmd {
        ToolsTeamCmd::Push {
            name,
            reference,
            plain_http,
            json,
        } => push(&name, &reference, plain_http, json, out),
        ToolsTeamCmd::Pull {
            reference,
            plain_http,
            allow_unsigned,
            unpin,
            new_publisher,
            json,
        } => {
            let options = PullOptions {
                plain_http,
                allow_unsigned,
                unpin,
                new_publisher,
            };
            pull(&reference, options, json, out)
        }
    }
}

/// `autotool tools push NAME REF`.
pub fn push(
    name: &str,
    reference: &str,
    plain_http: bool,
    json: bool,
    out: &mut impl Write,
) -> ExitCode {
    let work = async {
        let home = Home::from_env()?;
        let reference = Reference::parse(reference)?;
        let pushed = crate::team::push::push(&home, name, &reference, plain_http).await?;
        if json {
            writeln!(
                out,
                "{}",
                serde_json::json!({
                    "tool": pushed.tool, "version": pushed.version, "digest": pushed.digest,
                    "reference": pushed.pinned, "tag": pushed.tag, "signer": pushed.signer,
                })
            )?;
        } else {
            writeln!(
                out,
                "Pushed {} version {} to {} (tag {}), signed by {}.\n{}",
                pushed.tool,
                pushed.version,
                pushed.pinned,
                pushed.tag,
                pushed.signer,
                pushed.digest
            )?;
        }
        anyhow::Ok(())
    };
    super::cli::block_on("tools push", work)
}

/// `autotool tools pull REF`.
pub fn pull(reference: &str, options: PullOptions, json: bool, out: &mut impl Write) -> ExitCode {
    let work = async {
        let home = Home::from_env()?;
        let reference = Reference::parse(reference)?;
        if options.allow_unsigned {
            eprintln!(
                "autotool tools pull: --allow-unsigned: an artifact with no signature at all does \
                 not stop this pull (a signature that fails or is by a key not trusted here still \
                 does); nobody vouches for where unsigned code comes from (every other check and \
                 this machine's verification still apply)"
            );
        }
        let config = crate::config::Inputs::from_process(Default::default())
            .and_then(|inputs| crate::config::resolve(&inputs))
            .map_err(|problems| anyhow::anyhow!("{problems}"))?;
        let library = Library::new(config.settings(), home)?;
        library.runtime.start();
        let pulled = crate::team::pull::pull(&library, &reference, options).await;
        // Which of the keys a pulled tool declares this machine holds: its lines say what to
        // run for each key it was not given.
        let stored: Vec<KeyName> = pulled
            .as_ref()
            .ok()
            .and_then(|p| p.created.as_ref())
            .map(|c| {
                let secrets = library.secrets();
                c.required_env
                    .iter()
                    .filter(|k| secrets.has_value(k))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        library
            .runtime
            .shutdown(std::time::Duration::from_secs(2))
            .await;
        library.pool.shutdown().await;
        let pulled = pulled?;
        report(&pulled, &stored, json, out)?;
        anyhow::Ok(())
    };
    super::cli::block_on("tools pull", work)
}

fn report(
    pulled: &Pulled,
    stored: &[KeyName],
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let signer = pulled.signer.as_deref();
    if json {
        let created = pulled.created.as_ref().map(|c| {
            serde_json::json!({
                "tool": c.tool.to_string(), "version": c.version,
                "required_env": c.required_env.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
                "keys_granted": c.keys_granted.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
                "key_notes": c.key_notes,
            })
        });
        writeln!(
            out,
            "{}",
            serde_json::json!({
                "digest": pulled.digest, "signer": signer, "signer_key": pulled.signer_key,
                "publisher_replaced": pulled.replaced, "created": created,
                "unchanged": pulled.unchanged, "publisher_hosts": pulled.key_hosts,
            })
        )?;
        return Ok(());
    }
    let signed = match (signer, &pulled.signer_key) {
        (Some(s), Some(k)) => format!("signed by {s} {k}"),
        (Some(s), None) => format!("signed by {s}"),
        (None, _) => "UNSIGNED (--allow-unsigned)".into(),
    };
    if let Some(was) = &pulled.replaced {
        writeln!(
            out,
            "New publisher (--new-publisher): until now from {was}; from now on from {}.",
            signer.unwrap_or("nobody (unsigned)")
        )?;
    }
    if let Some(why) = &pulled.unchanged {
        writeln!(out, "{} ({signed}): {why}; nothing to do.", pulled.digest)?;
        return Ok(());
    }
    let Some(c) = &pulled.created else {
        return Ok(());
    };
    writeln!(
        out,
        "Pulled {} version {} from {} ({signed}); verified here, on probation.",
        c.tool, c.version, pulled.digest
    )?;
    for (mounted, _) in &c.functions {
        writeln!(out, "  {mounted}")?;
    }
    for line in key_lines(c.tool.as_str(), &c.required_env, &c.keys_granted, stored) {
        writeln!(out, "{line}")?;
    }
    for line in publisher_hosts(&pulled.key_hosts) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// For each key a pulled tool declares and was not given (approvals do not travel), what the
/// person who pulled it can run: the created tool's `key_notes` are worded for an agent ("call
/// create_tool again"), and stay in `--json` for scripts that read them.
fn key_lines(
    tool: &str,
    declared: &[KeyName],
    granted: &[KeyName],
    stored: &[KeyName],
) -> Vec<String> {
    declared
        .iter()
        .filter(|k| !granted.contains(k))
        .map(|k| {
            if stored.contains(k) {
                format!(
                    "{tool} declares {k}, not given to it here yet: your agent app asks you on \
                     its first call, or `autotool tools approve {tool} {k}` gives it now."
                )
            } else {
                format!(
                    "{tool} declares {k}, which this machine does not hold: `autotool keys add \
                     {k}`, then `autotool tools approve {tool} {k}` (or answer your agent app \
                     when it asks)."
                )
            }
        })
        .collect()
}

/// What a pulled tool's publisher allowed each key, and the command that sets the same here.
/// The hosts were read by the allowlist's rule when the artifact was checked
/// ([`crate::team::artifact`]); each argument of the command is shell-quoted all the same.
fn publisher_hosts(key_hosts: &std::collections::BTreeMap<String, Vec<String>>) -> Vec<String> {
    use crate::terminal::{escape_line, shell_words};
    key_hosts
        .iter()
        .map(|(key, hosts)| {
            let command = shell_words(
                &[
                    ["autotool", "keys", "allow", key.as_str()].as_slice(),
                    hosts
                        .iter()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .as_slice(),
                ]
                .concat(),
            );
            format!(
                "Its publisher let {} reach only {}; approvals and allowlists do not travel: \
                 `{}` sets the same here.",
                escape_line(key),
                escape_line(&hosts.join(", ")),
                escape_line(&command)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pulled_tools_keys_are_told_as_commands_to_run_not_as_an_agents_next_call() {
        let key = |k: &str| KeyName::parse(k).unwrap_or_else(|e| panic!("{e}"));
        let declared = [key("HELD_KEY"), key("MISSING_KEY"), key("GIVEN_KEY")];
        let lines = key_lines(
            "weather",
            &declared,
            &[key("GIVEN_KEY")],
            &[key("HELD_KEY"), key("GIVEN_KEY")],
        );
        assert_eq!(
            lines,
            [
                "weather declares HELD_KEY, not given to it here yet: your agent app asks you on \
                 its first call, or `autotool tools approve weather HELD_KEY` gives it now.",
                "weather declares MISSING_KEY, which this machine does not hold: `autotool keys \
                 add MISSING_KEY`, then `autotool tools approve weather MISSING_KEY` (or answer \
                 your agent app when it asks)."
            ]
        );
        assert!(lines.iter().all(|l| !l.contains("create_tool")));
    }

    #[test]
    fn the_suggested_allow_command_quotes_every_host() {
        let hosts = std::collections::BTreeMap::from([(
            "API_KEY".to_string(),
            vec!["api.x.com".to_string(), "*.x.com".to_string()],
        )]);
        assert_eq!(
            publisher_hosts(&hosts),
            [
                "Its publisher let API_KEY reach only api.x.com, *.x.com; approvals and allowlists \
              do not travel: `autotool keys allow API_KEY api.x.com '*.x.com'` sets the same here."
            ]
        );
        // Control: what the check would have let through is inert here too.
        let hostile = std::collections::BTreeMap::from([(
            "API_KEY".to_string(),
            vec!["evil.example; touch /tmp/x\u{1b}[8m".to_string()],
        )]);
        let line = &publisher_hosts(&hostile)[0];
        assert!(
            line.contains(r"`autotool keys allow API_KEY 'evil.example; touch /tmp/x\u001b[8m'`"),
            "{line}"
        );
    }
}
