//! The console's pages, read from the ledger, the tools directory and the key store on each
//! request: the library, one tool, the keys, the pending consent questions, and the
//! confirmation and outcome of an action. Everything a tool wrote (names, descriptions,
//! errors, events, diffs) goes through [`Html::text`]: redacted, cut and escaped.

use super::actions::Action;
use super::html::{CUT, Html, escape, page};
use crate::consent::parse_list;
use crate::credentials::KeyStore;
use crate::ledger::{self, CallKind};
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::version::{PackageSet, Version};
use autotool_policy::names::{KeyName, ToolName};
use serde::Serialize;
use std::collections::BTreeMap;

/// How many days the calls chart spans.
const CHART_DAYS: u32 = 30;
/// How many events and calls a tool's page lists.
const RECENT: u32 = 25;
/// How many events are searched for egress refusals.
const EVENTS_SEARCHED: u32 = 500;
/// How many lines of a diff between versions are shown.
const DIFF_LINES: usize = 120;

/// A tool's question still waiting for the user: the tool, the keys not approved, the package
/// set not approved.
pub type Waiting = (String, Vec<KeyName>, Option<PackageSet>);

/// What a page needs: the registry, the keys and a redactor of every value they hold now.
#[derive(Debug)]
pub struct View<'a> {
    pub registry: &'a Registry,
    pub keys: &'a KeyStore,
    pub redactor: &'a Redactor,
    pub csrf: &'a str,
    pub home: &'a crate::home::Home,
    /// What the running serves grant without asking.
    pub granting: crate::serving::Granting,
    pub user_home: Option<std::path::PathBuf>,
}

/// One tool of the library, as the library page and `/api/library` show it.
#[derive(Debug, Serialize)]
pub struct LibraryRow {
    pub name: String,
    pub version: u32,
    pub state: &'static str,
    /// How far it is trusted: `trusted` (active), `on trial` (draft, probation) or `not
    /// trusted` (quarantined, retired), with the obligations its trusted versions left.
    pub trust: String,
    pub calls: u64,
    pub failures: u64,
    /// Share of calls that succeeded, all versions; `None` before the first call.
    pub success_rate: Option<f64>,
    pub last_call: Option<String>,
    pub packages: Vec<String>,
    pub keys: Vec<String>,
    pub description: String,
    /// The user's pin (nothing replaces this version until unpinned); `null` when not pinned.
    pub pinned: Option<ledger::Pin>,
    /// What it may reach and why (hosts with and without a key, directories and their mode),
    /// and the destinations its egress proxy refused lately.
    pub reach: crate::library::declared_reach::ReachView,
}

fn trust(v: &Version, obligations: usize) -> String {
    use autotool_policy::lifecycle::State;
    let word = match v.state {
        State::Active => "trusted",
        State::Draft | State::Probation => "on trial",
        State::Quarantined | State::Retired => "not trusted",
    };
    match obligations {
        0 => word.to_string(),
        1 => format!("{word}, 1 obligation"),
        n => format!("{word}, {n} obligations"),
    }
}

fn packages_of(v: &Version) -> Vec<String> {
    v.packages
        .as_ref()
        .map(|p| p.declared.clone())
        .unwrap_or_default()
}

impl View<'_> {
    /// What `v` may reach and why, from what is on record (grants, hosts allowed for every
    /// tool, key allowlists, widened deny rules) and what the running serves grant without
    /// asking ([`crate::serving::granting`]); serve's environment is not known here.
    fn reach_of(&self, v: &Version) -> anyhow::Result<crate::library::declared_reach::ReachView> {
        let allowlists = self.keys.allowlists()?;
        let mut view = crate::library::declared_reach::view(
            v,
            &crate::library::declared_reach::ViewInputs {
                ledger: self.registry.ledger(),
                allowlists: &allowlists,
                api_bases: &BTreeMap::new(),
                allow_all: self.granting.allow_all.as_deref(),
                trusted_hosts: self.granting.trusted_hosts.as_deref(),
                homes: self.user_home.as_deref().map(|h| (h, self.home.root())),
            },
        );
        // Refusals quote what the tool asked for: redacted and cut like every tool-written text.
        for r in &mut view.refused {
            r.why = super::html::cut(&self.redactor.redact(&r.why), CUT);
            r.target = super::html::cut(&self.redactor.redact(&r.target), CUT);
        }
        Ok(view)
    }

    /// Every current tool, for the library page and `/api/library`. Tool-written text in it is
    /// redacted (and cut) here, so the JSON carries no value either.
    pub fn library(&self) -> anyhow::Result<Vec<LibraryRow>> {
        let mut rows = Vec::new();
        let mut pins = self.registry.ledger().pins()?;
        for v in self.registry.current()? {
            let name = v.name.as_str();
            let stats = self.registry.stats(name)?;
            let obligations = self.registry.ledger().baseline(name, false)?.len();
            rows.push(LibraryRow {
                name: name.to_string(),
                version: v.version,
                state: v.state.as_str(),
                trust: trust(&v, obligations),
                calls: stats.calls,
                failures: stats.failures,
                success_rate: (stats.calls > 0).then(|| {
                    ((stats.calls - stats.failures) as f64 / stats.calls as f64 * 1000.0).round()
                        / 1000.0
                }),
                last_call: stats.last_call_at.map(ledger::format_ms),
                packages: packages_of(&v),
                keys: v.required_env.iter().map(ToString::to_string).collect(),
                description: super::html::cut(&self.redactor.redact(&v.description), CUT),
                pinned: pins.remove(name),
                reach: self.reach_of(&v)?,
            });
        }
        Ok(rows)
    }

    pub fn library_page(&self) -> anyhow::Result<String> {
        let rows = self.library()?;
        let waiting = self.pending()?.len();
        let mut h = Html::new(self.redactor);
        h.raw("<h1>Library</h1>");
        if waiting > 0 {
            h.raw("<p class=\"notice\"><a href=\"/consent\">")
                .show(waiting)
                .raw(if waiting == 1 {
                    " tool is waiting for consent</a></p>"
                } else {
                    " tools are waiting for consent</a></p>"
                });
        }
        if rows.is_empty() {
            h.raw("<p>No tools yet. An agent connected to <code>autotool serve</code> creates one with <code>create_tool</code>.</p>");
            return Ok(page("Library", &h.finish()));
        }
        h.raw("<table><thead><tr><th>Tool</th><th>State</th><th>Trust</th><th>Success</th><th>Last call</th><th>Packages</th><th>Keys declared</th></tr></thead><tbody>\n");
        for r in &rows {
            h.raw("<tr><td>")
                .link(&format!("/tool/{}", r.name), &r.name)
                .raw(" v")
                .show(r.version)
                .raw("<div class=\"muted\">")
                .text(&r.description, 120)
                .raw("</div></td><td>")
                .esc(r.state);
            if let Some(pin) = &r.pinned {
                h.raw("<div class=\"muted\">pinned by ")
                    .text(&pin.by, 60)
                    .raw("</div>");
            }
            h.raw("</td><td>").esc(&r.trust).raw("</td><td>");
            match r.success_rate {
                Some(rate) => h
                    .show(format!("{:.0}%", rate * 100.0))
                    .raw(" of ")
                    .show(r.calls),
                None => h.raw("no calls"),
            };
            h.raw("</td><td>")
                .esc(r.last_call.as_deref().unwrap_or("never"))
                .raw("</td><td>")
                .text(&list(&r.packages), CUT)
                .raw("</td><td>")
                .text(&list(&r.keys), CUT)
                .raw("</td></tr>\n");
        }
        h.raw("</tbody></table>");
        Ok(page("Library", &h.finish()))
    }

    /// One tool's page, or `None` when there is no tool of that name.
    pub fn tool_page(&self, name: &str) -> anyhow::Result<Option<String>> {
        let Ok(name) = ToolName::parse(name) else {
            return Ok(None);
        };
        let name = name.as_str();
        let Some(tool) = self.registry.tool(name)? else {
            return Ok(None);
        };
        let ledger = self.registry.ledger();
        let versions = self.registry.versions(name)?;
        let current = tool
            .current_version
            .and_then(|c| versions.iter().find(|v| v.version == c));
        let mut h = Html::new(self.redactor);
        h.raw("<h1>").text(name, CUT).raw("</h1>");
        if let Some(at) = tool.removed_at {
            h.raw("<p class=\"notice\">Removed ")
                .esc(&ledger::format_ms(at))
                .raw("</p>");
        }
        if let Some(v) = current {
            h.raw("<p>")
                .text(&v.description, CUT)
                .raw("</p><p>v")
                .show(v.version)
                .raw(", ")
                .esc(v.state.as_str());
            if let Some(why) = ledger.state_reason(name)? {
                h.raw(": ").text(&why, CUT);
            }
            h.raw("</p><p>Keys declared: ")
                .text(&list(&v.required_env), CUT)
                .raw(". Packages: ")
                .text(&list(&packages_of(v)), CUT)
                .raw(".</p>");
            let pin = ledger.pin_of(name)?;
            if let Some(pin) = &pin {
                h.raw("<p class=\"pinned\">Pinned: ")
                    .text(&pin.to_string(), CUT)
                    .raw(". Nothing replaces this version (an agent's rewrite, a pull, a followed library, a changed file) until it is unpinned.</p>");
            }
            h.raw("<p>");
            if tool.removed_at.is_none() {
                match pin {
                    Some(_) => h.action("Unpin", "unpin", &[("tool", name)]),
                    None => h.action("Pin", "pin", &[("tool", name)]),
                };
                h.action("Rehab", "rehab", &[("tool", name)])
                    .action("Retire", "retire", &[("tool", name)])
                    .action("Remove", "remove", &[("tool", name)]);
            }
            h.raw("</p>");
        }
        if let Some(v) = current {
            self.reach_section(&mut h, v, tool.removed_at.is_none())?;
        }
        self.approvals(&mut h, name, current)?;
        let stats = self.registry.stats(name)?;
        h.raw("<h2>Calls, last 30 days</h2><div class=\"chart\">")
            .chart(&ledger.calls_per_day(name, CHART_DAYS)?)
            .raw("<p>")
            .show(format!("{} calls, {} failed", stats.calls, stats.failures))
            .raw("</p></div>");
        self.versions(&mut h, &versions)?;
        if let Some(v) = current {
            h.raw("<h2>Verdicts</h2><ul>");
            for verdict in ledger.verdicts(name, v.version)? {
                h.raw("<li>").text(&verdict.to_string(), CUT).raw("</li>");
            }
            h.raw("</ul>");
        }
        h.raw("<h2>Baseline obligations</h2><ul>");
        for row in ledger.baseline(name, false)? {
            h.raw("<li>")
                .text(&row.obligation.shown(), CUT)
                .raw("</li>");
        }
        h.raw("</ul><h2>Egress refusals</h2><ul>");
        for e in ledger
            .events(Some(name), EVENTS_SEARCHED)?
            .iter()
            .filter(|e| e.kind == ledger::Event::EgressDenied)
            .take(RECENT as usize)
        {
            h.raw("<li>")
                .esc(&ledger::format_ms(e.at))
                .raw(" ")
                .text(&e.detail, CUT)
                .raw("</li>");
        }
        h.raw("</ul><h2>Recent calls</h2><table><tbody>");
        for c in self.registry.recent_calls(name, RECENT)? {
            h.raw("<tr><td>")
                .esc(&ledger::format_ms(c.started_at))
                .raw("</td><td>v")
                .show(c.version)
                .raw(" ")
                .text(&c.function, CUT)
                .raw("</td><td>")
                .show(c.duration_ms)
                .raw(" ms</td><td>")
                .esc(match c.outcome {
                    CallKind::Ok => "ok",
                    CallKind::ToolError => "tool error",
                    CallKind::Failure => "error",
                })
                .raw("</td><td>")
                .text(c.error.as_deref().unwrap_or(""), CUT)
                .raw("</td></tr>");
        }
        h.raw("</tbody></table><h2>Events</h2><table><tbody>");
        for e in ledger.events(Some(name), RECENT)? {
            h.raw("<tr><td>")
                .esc(&ledger::format_ms(e.at))
                .raw("</td><td>")
                .text(&e.kind, 40)
                .raw("</td><td>")
                .text(&e.detail, CUT)
                .raw("</td></tr>");
        }
        h.raw("</tbody></table>");
        Ok(Some(page(name, &h.finish())))
    }

    /// What a tool may reach and why, its directories, and the action that narrows a tool
    /// kept from before declared reach.
    fn reach_section(&self, h: &mut Html<'_>, v: &Version, live: bool) -> anyhow::Result<()> {
        let name = v.name.as_str();
        let reach = self.reach_of(v)?;
        h.raw("<h2>Reach</h2>");
        if let Some(any) = &reach.any_public_host {
            h.raw("<p class=\"notice\">Without a key it reaches ")
                .esc(any)
                .raw(". ");
            if live {
                h.action("Narrow to what it declares", "narrow", &[("tool", name)]);
            }
            h.raw("</p>");
        } else if reach.hosts.is_empty() {
            h.raw("<p>It declares no host: without a key it reaches none.</p>");
        }
        h.raw("<ul>");
        for host in &reach.hosts {
            h.raw("<li>")
                .esc(&host.host)
                .raw(": ")
                .esc(&host.why)
                .raw(if host.reachable { "" } else { " (refused)" })
                .raw("</li>");
        }
        h.raw("</ul><p>Directories: ");
        if reach.directories.is_empty() {
            h.raw("none.");
        }
        for d in &reach.directories {
            h.text(&d.path, CUT)
                .raw(" (")
                .esc(&d.mode)
                .raw(if d.granted { "" } else { ", not granted yet" });
            if let Some(why) = &d.not_mounted {
                h.raw(", granted but not mounted: ").text(why, CUT);
            }
            h.raw(") ");
        }
        h.raw("</p>");
        let waiting = reach
            .hosts
            .iter()
            .any(|x| !x.reachable && x.why.contains("not granted"))
            || reach.directories.iter().any(|d| !d.granted);
        if waiting && live {
            h.raw("<p>")
                .action(
                    "Grant its declared reach",
                    "approve",
                    &[("tool", name), ("reach", "1")],
                )
                .raw("</p>");
        }
        Ok(())
    }

    /// A tool's approvals, each with its revoke action, and the keys it declares without one.
    fn approvals(
        &self,
        h: &mut Html<'_>,
        name: &str,
        current: Option<&Version>,
    ) -> anyhow::Result<()> {
        let ledger = self.registry.ledger();
        let approvals = ledger.approvals(name)?;
        h.raw("<h2>Approvals</h2><ul>");
        for a in &approvals {
            h.raw("<li>")
                .text(&a.key, CUT)
                .raw(" via ")
                .text(&a.via, 40)
                .raw(", ")
                .esc(&ledger::format_ms(a.granted_at))
                .raw(" ")
                .action("Revoke", "revoke", &[("tool", name), ("key", &a.key)])
                .raw("</li>");
        }
        for a in ledger.package_approvals(name)? {
            h.raw("<li>packages ")
                .text(&a.packages, CUT)
                .raw(" via ")
                .text(&a.via, 40)
                .raw("</li>");
        }
        if let Some(v) = current {
            for key in &v.required_env {
                if !approvals.iter().any(|a| a.key == key.as_str()) {
                    h.raw("<li>")
                        .esc(key.as_str())
                        .raw(": not approved ")
                        .action(
                            "Approve",
                            "approve",
                            &[("tool", name), ("key", key.as_str())],
                        )
                        .raw("</li>");
                }
            }
        }
        h.raw("</ul>");
        Ok(())
    }

    /// Every version, newest first, and the diff of each from the one before.
    fn versions(&self, h: &mut Html<'_>, versions: &[Version]) -> anyhow::Result<()> {
        h.raw("<h2>Versions</h2>");
        let mut previous: Option<String> = None;
        let mut shown = Vec::new();
        for v in versions {
            let code = std::fs::read_to_string(self.registry.file_of(v)).unwrap_or_default();
            let diff = previous.as_ref().map(|before| {
                let d = similar::TextDiff::from_lines(before.as_str(), code.as_str());
                let text = d.unified_diff().context_radius(2).to_string();
                let mut lines: Vec<&str> = text.lines().take(DIFF_LINES + 1).collect();
                let more = lines.len() > DIFF_LINES;
                lines.truncate(DIFF_LINES);
                let mut out = lines.join("\n");
                if more {
                    out.push_str("\n…");
                }
                out
            });
            shown.push((v, diff));
            previous = Some(code);
        }
        for (v, diff) in shown.into_iter().rev() {
            h.raw("<details><summary>v")
                .show(v.version)
                .raw(" · ")
                .esc(&ledger::format_ms(v.created_at))
                .raw(" · ")
                .esc(v.state.as_str())
                .raw(" · sha256 ")
                .esc(crate::pin::short(&v.code_hash))
                .raw("</summary>");
            match diff {
                Some(d) => h.raw("<pre>").text(&d, usize::MAX).raw("</pre>"),
                None => h.raw("<p>the first version</p>"),
            };
            h.raw("</details>");
        }
        Ok(())
    }

    /// The keys: names, where each comes from, where it may be sent. Never a value.
    pub fn keys_page(&self) -> anyhow::Result<String> {
        let mut h = Html::new(self.redactor);
        h.raw("<h1>Keys</h1><p>Names only: a value is never shown here. Add one with <code>autotool keys add NAME</code>.</p><table><thead><tr><th>Key</th><th>Source</th><th>Hosts allowed</th><th>Allow a host</th></tr></thead><tbody>\n");
        for k in self.keys.list()? {
            h.raw("<tr><td>").esc(&k.name).raw("</td><td>");
            match k.source {
                Some(s) => h.show(s),
                None => h.raw("not stored"),
            };
            h.raw("</td><td>");
            match &k.allowed_hosts {
                None => {
                    h.raw("any host (no limit)");
                }
                Some(hosts) => {
                    for host in hosts {
                        h.esc(host).raw(" ").action(
                            "Disallow",
                            "disallow",
                            &[("key", &k.name), ("host", host)],
                        );
                        h.raw("<br>");
                    }
                }
            }
            h.raw("</td><td><form method=\"get\" action=\"/confirm\"><input type=\"hidden\" name=\"action\" value=\"allow\"><input type=\"hidden\" name=\"key\" value=\"")
                .esc(&k.name)
                .raw("\"><input name=\"host\" placeholder=\"api.example.com\" aria-label=\"host\"> <button type=\"submit\">Allow…</button></form></td></tr>\n");
        }
        h.raw("</tbody></table>");
        Ok(page("Keys", &h.finish()))
    }

    /// The questions tools could not ask their host, with what is still unanswered in each:
    /// `(tool, keys not approved, packages not approved)`.
    pub fn pending(&self) -> anyhow::Result<Vec<Waiting>> {
        let ledger = self.registry.ledger();
        let allowlists: BTreeMap<KeyName, Vec<autotool_policy::hosts::AllowRule>> = self
            .keys
            .allowlists()?
            .into_iter()
            .filter_map(|(k, l)| Some((KeyName::parse(&k).ok()?, parse_list(&l))))
            .collect();
        let mut out = Vec::new();
        for p in ledger.pendings(None)? {
            let Ok(tool) = ToolName::parse(&p.tool) else {
                continue;
            };
            let declared: Vec<KeyName> = p
                .declared
                .iter()
                .filter_map(|k| KeyName::parse(k).ok())
                .collect();
            let subject = crate::version::Subject {
                tool: &tool,
                code_hash: &p.code_hash,
                declared: &declared,
                packages: None,
                uses: &[],
                reach: None,
            };
            let approvals = ledger.approvals(tool.as_str())?;
            let keys: Vec<KeyName> =
                crate::consent::uncovered(subject, &declared, &allowlists, &approvals, true)
                    .into_iter()
                    .map(|a| a.key)
                    .collect();
            let packages = match p
                .packages
                .as_deref()
                .map(serde_json::from_str::<PackageSet>)
            {
                Some(Ok(set)) if !ledger.packages_approved(tool.as_str(), &set.digest)? => {
                    Some(set)
                }
                _ => None,
            };
            if !keys.is_empty() || packages.is_some() {
                out.push((p.tool, keys, packages));
            }
        }
        Ok(out)
    }

    /// The questions about declared reach tools could not ask: `(tool, what is not granted)`.
    pub fn pending_reach(
        &self,
    ) -> anyhow::Result<Vec<(String, autotool_policy::reach::DeclaredReach)>> {
        let ledger = self.registry.ledger();
        let pre: Vec<autotool_policy::hosts::AllowRule> = ledger
            .allowed_hosts()?
            .iter()
            .filter_map(|h| autotool_policy::hosts::AllowRule::parse(&h.entry).ok())
            .collect();
        let mut out = Vec::new();
        for p in ledger.pendings(None)? {
            let Some(Ok(declared)) = p
                .reach
                .as_deref()
                .map(serde_json::from_str::<autotool_policy::reach::DeclaredReach>)
            else {
                continue;
            };
            let grants: Vec<_> = ledger
                .reach_grants(&p.tool)?
                .into_iter()
                .map(|g| g.item)
                .collect();
            let ask = declared.uncovered(&grants, &pre);
            if !ask.is_empty() {
                out.push((p.tool, ask));
            }
        }
        Ok(out)
    }

    pub fn consent_page(&self) -> anyhow::Result<String> {
        let mut h = Html::new(self.redactor);
        h.raw("<h1>Pending consent</h1>");
        let pending = self.pending()?;
        let reach = self.pending_reach()?;
        if pending.is_empty() && reach.is_empty() {
            h.raw("<p>No tool is waiting for consent.</p>");
        }
        for (tool, ask) in &reach {
            h.raw("<section class=\"question\"><h2>")
                .link(&format!("/tool/{tool}"), tool)
                .raw("</h2><p>Allow ")
                .text(tool, CUT)
                .raw(" to ")
                .text(&ask.phrase(), 2 * CUT)
                .raw("? Without a key it reaches nothing else. ")
                .action(
                    "Grant this reach",
                    "approve",
                    &[("tool", tool), ("reach", "1")],
                )
                .raw("</p></section>");
        }
        for (tool, keys, packages) in &pending {
            h.raw("<section class=\"question\"><h2>")
                .link(&format!("/tool/{tool}"), tool)
                .raw("</h2>");
            for key in keys {
                let list = self.keys.allowlist(key.as_str())?;
                h.raw("<p>Allow ")
                    .text(tool, CUT)
                    .raw(" to use ")
                    .esc(key.as_str())
                    .raw("? It can send it ")
                    .esc(&match &list {
                        Some(l) if !l.is_empty() => format!("only to {}", l.join(", ")),
                        _ => "to any host (the key has no allowlist)".to_string(),
                    })
                    .raw(". ")
                    .action(
                        &format!("Approve {key}"),
                        "approve",
                        &[("tool", tool), ("key", key.as_str())],
                    )
                    .raw("</p>");
            }
            if let Some(set) = packages {
                h.raw("<p>Allow ")
                    .text(tool, CUT)
                    .raw(" to ")
                    .text(&set.install_phrase(), CUT)
                    .raw("? ")
                    .action("Approve packages", "approve", &[("tool", tool)])
                    .raw("</p>");
            }
            h.raw("</section>");
        }
        Ok(page("Pending consent", &h.finish()))
    }

    /// The confirmation of `action`: its question and the form that posts it.
    pub fn confirm_page(&self, action: &Action, fields: &[(String, String)]) -> String {
        let mut h = Html::new(self.redactor);
        h.raw("<h1>Confirm</h1><form method=\"post\" action=\"/action\"><p>")
            .text(&action.question(), 2 * CUT)
            .raw("</p>");
        for (k, v) in fields {
            if k != "csrf" {
                h.raw("<input type=\"hidden\" name=\"")
                    .esc(k)
                    .raw("\" value=\"")
                    .esc(v)
                    .raw("\">");
            }
        }
        h.raw("<input type=\"hidden\" name=\"csrf\" value=\"")
            .esc(self.csrf)
            .raw("\"><button type=\"submit\" id=\"confirm\">Yes</button> <a href=\"/\">Cancel</a></form>");
        page("Confirm", &h.finish())
    }

    /// What an action did (or why it did not).
    pub fn outcome_page(&self, ok: bool, said: &str) -> String {
        let mut h = Html::new(self.redactor);
        h.raw(if ok { "<h1>Done</h1><p class=\"done\">" } else { "<h1>Not done</h1><p class=\"notice\">" })
            .text(said, 2 * CUT)
            .raw("</p><p><a href=\"/\">Library</a> · <a href=\"/consent\">Pending consent</a> · <a href=\"/keys\">Keys</a></p>");
        page(if ok { "Done" } else { "Not done" }, &h.finish())
    }
}

fn list<T: AsRef<str>>(items: &[T]) -> String {
    super::html::joined_or(items, "none")
}

/// A page whose text the console wrote (a refusal, a missing page), escaped.
pub fn message(title: &str, text: &str) -> String {
    page(
        title,
        &format!("<h1>{}</h1><p>{}</p>", escape(title), escape(text)),
    )
}
