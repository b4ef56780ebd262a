//! `autotool events`: the machine-wide event log, every decision across tools (created,
//! verified, state changes, consent asked and answered, egress refused, baseline grown, pulls),
//! each with who caused it and through what, oldest first; `--follow` keeps printing new ones.
//!
//! An event's detail can hold text a tool wrote (an error, a refused host): every line passes
//! the redactor of the key values held now, control characters are shown escaped (as they were
//! when stored, and again here for rows stored before; [`crate::terminal`]), and long fields are
//! cut.

use crate::home::Home;
use crate::ledger::{EventFilter, EventRow, Ledger};
use crate::redact::Redactor;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The most characters of an event's detail printed (text); JSON keeps more.
pub const DETAIL_TEXT: usize = 200;
/// The most characters of an event's detail in `--json`.
pub const DETAIL_JSON: usize = 2000;
/// The most characters of a tool name or actor printed.
const NAME: usize = 64;
/// How many events are printed without `--since` or `--all`: the newest.
pub const DEFAULT_NEWEST: u32 = 50;
/// How often `--follow` looks for new events.
const FOLLOW_POLL: Duration = Duration::from_millis(250);
/// How often `--follow` reads the key values held again (a key added meanwhile is redacted).
const REDACTOR_REFRESH: Duration = Duration::from_secs(10);

/// `autotool events`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    /// Only this tool's events.
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Only events since then: a time ago (30s, 10m, 2h, 7d) or a UTC date or time
    /// (2026-12-01, 2026-12-01T08:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = since_now)]
    pub since: Option<i64>,
    /// Every event selected, not only the newest 50.
    #[arg(long)]
    pub all: bool,
    /// One JSON object a line: id, at, time, tool, kind, actor, surface, detail.
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events as they are written, until interrupted.
    #[arg(long)]
    pub follow: bool,
}

/// Every key value this machine holds, as a redactor (an unreadable keychain gives none, as
/// for serve). What a command prints of the record passes it.
pub fn held_redactor(home: &Home) -> Result<Redactor, String> {
    let (values, _unreadable) = crate::credentials::KeyStore::open(home).known_values();
    Redactor::new(&values).map_err(|e| e.to_string())
}

/// `--since WHEN` read now.
fn since_now(when: &str) -> Result<i64, String> {
    parse_since(when, crate::ledger::now_ms())
}

/// `WHEN` as unix milliseconds: a time ago (`30s`, `10m`, `2h`, `7d`) before `now_ms`, or a
/// UTC date (`2026-12-01`) or time (`2026-12-01T08:00[:00][Z]`).
pub fn parse_since(when: &str, now_ms: i64) -> Result<i64, String> {
    let when = when.trim();
    let bad = || {
        format!(
            "{when:?}: give a time ago (30s, 10m, 2h, 7d) or a UTC date or time \
             (2026-12-01, 2026-12-01T08:00:00Z)"
        )
    };
    if let Some(days) = when.strip_suffix('d')
        && let Ok(days) = days.trim().parse::<i64>()
    {
        return Ok(now_ms - days.saturating_mul(86_400_000));
    }
    if let Ok(ago) = crate::config::duration(when, Duration::ZERO) {
        return Ok(now_ms - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX / 2));
    }
    let (date, time) = when
        .trim_end_matches('Z')
        .split_once(['T', ' '])
        .unwrap_or((when, ""));
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let [y, m, day] = d.as_slice() else {
        return Err(bad());
    };
    let (y, m, day) = (num(y)?, num(m)?, num(day)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    let t: Vec<i64> = if time.is_empty() {
        Vec::new()
    } else {
        time.split(':').map(num).collect::<Result<_, _>>()?
    };
    let secs_of_day = match t.as_slice() {
        [] => 0,
        [h, mi] => h * 3600 + mi * 60,
        [h, mi, s] => h * 3600 + mi * 60 + s,
        _ => return Err(bad()),
    };
    // Days from 1970-01-01 of a civil date (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok((days * 86_400 + secs_of_day) * 1000)
}

/// `s` on one line, control, bidirectional and invisible characters escaped
/// ([`crate::terminal::escape_line`]), cut to `max` characters (with `…`).
pub fn shown(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        let mut buf = [0u8; 4];
        out.push_str(&crate::terminal::escape_line(c.encode_utf8(&mut buf)));
    }
    out
}

/// One event as `autotool events` prints it (redacted, then cut, so no cut leaves a piece of
/// a key behind): a line of text, or with `json` a JSON object.
pub fn render(e: &EventRow, json: bool, redactor: &Redactor) -> String {
    let r = |s: &str| redactor.redact(s).into_owned();
    let e = &EventRow {
        tool: e.tool.as_deref().map(r),
        kind: r(&e.kind),
        detail: r(&e.detail),
        actor: r(&e.actor),
        surface: r(&e.surface),
        ..e.clone()
    };
    let tool = e.tool.as_deref().unwrap_or("");
    if json {
        let cut = |s: &str, max: usize| {
            let mut c: String = s.chars().take(max).collect();
            if c.len() < s.len() {
                c.push('…');
            }
            c
        };
        let v = serde_json::json!({
            "id": e.id,
            "at": e.at,
            "time": crate::ledger::format_ms(e.at),
            "tool": e.tool.as_deref().map(|t| cut(t, NAME)),
            "kind": cut(&e.kind, NAME),
            "actor": cut(&e.actor, NAME),
            "surface": cut(&e.surface, NAME),
            "detail": cut(&e.detail, DETAIL_JSON),
        });
        return v.to_string();
    }
    let who = match (e.actor.as_str(), e.surface.as_str()) {
        ("", _) => "-".to_string(),
        (a, s) if s.is_empty() || s == a => shown(a, NAME),
        (a, s) => format!("{} via {}", shown(a, NAME), shown(s, NAME)),
    };
    let line = format!(
        "{}  {:<16} {:<20} {:<24} {}",
        crate::ledger::format_ms(e.at),
        if tool.is_empty() {
            "-".to_string()
        } else {
            shown(tool, NAME)
        },
        shown(&e.kind, NAME),
        who,
        shown(&e.detail, DETAIL_TEXT)
    );
    line.trim_end().to_string()
}

/// `autotool events …`.
pub fn main(args: EventsArgs, out: &mut impl Write) -> ExitCode {
    match run(&args, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => super::fail("events", &e),
    }
}

fn run(args: &EventsArgs, out: &mut impl Write) -> Result<(), String> {
    let home = Home::from_env().map_err(|e| e.to_string())?;
    let mut redactor = held_redactor(&home)?;
    let ledger = Ledger::open(&home.db_path()).map_err(|e| e.to_string())?;
    let since_ms = args.since;
    let mut filter = EventFilter {
        tool: args.tool.clone(),
        since_ms,
        after_id: None,
        newest: (!args.all && since_ms.is_none()).then_some(DEFAULT_NEWEST),
    };
    let mut last = ledger.last_event_id().map_err(|e| e.to_string())?;
    let write = |out: &mut dyn Write, rows: &[EventRow], redactor: &Redactor| {
        for e in rows {
            match writeln!(out, "{}", render(e, args.json, redactor)) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(false),
                Err(e) => return Err(format!("cannot write the output: {e}")),
                Ok(()) => {}
            }
        }
        out.flush().map_err(|e| e.to_string()).map(|()| true)
    };
    let rows = ledger.event_log(&filter).map_err(|e| e.to_string())?;
    if let Some(e) = rows.last() {
        last = last.max(e.id);
    }
    if !write(out, &rows, &redactor)? || !args.follow {
        if rows.is_empty() && !args.json && !args.follow {
            let _ = writeln!(
                out,
                "No events{}.",
                match &args.tool {
                    Some(t) => format!(" of {}", shown(t, NAME)),
                    None => String::new(),
                }
            );
        }
        return Ok(());
    }
    filter.newest = None;
    let mut refreshed = Instant::now();
    loop {
        std::thread::sleep(FOLLOW_POLL);
        filter.after_id = Some(last);
        let rows = ledger.event_log(&filter).map_err(|e| e.to_string())?;
        let Some(newest) = rows.last() else { continue };
        last = newest.id;
        if refreshed.elapsed() > REDACTOR_REFRESH {
            redactor = held_redactor(&home)?;
            refreshed = Instant::now();
        }
        if !write(out, &rows, &redactor)? {
            return Ok(());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_times_ago_and_utc_dates() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_since("10m", now), Ok(now - 600_000));
        assert_eq!(parse_since("2d", now), Ok(now - 2 * 86_400_000));
        assert_eq!(parse_since("1970-01-02", now), Ok(86_400_000));
        assert_eq!(
            parse_since("2026-12-31T23:59:59Z", now),
            Ok(1_798_761_599_000)
        );
        assert_eq!(parse_since("2000-02-29T00:00", now), Ok(951_782_400_000));
        assert!(parse_since("yesterday", now).is_err());
        assert!(parse_since("2026-13-01", now).is_err());
    }

    #[test]
    fn an_event_is_shown_redacted_escaped_and_cut() {
        let redactor = Redactor::new(&[("K", "sk-live-secret-value-123")]).unwrap();
        let e = EventRow {
            id: 7,
            at: 0,
            tool: Some("t".into()),
            kind: "egress_denied".into(),
            detail: format!(
                "sent sk-live-secret-value-123 \u{1b}[2J{}",
                "x".repeat(DETAIL_JSON * 2)
            ),
            actor: "host:claude-code".into(),
            surface: "stdio".into(),
        };
        let text = render(&e, false, &redactor);
        assert!(!text.contains("sk-live"), "{text}");
        assert!(text.contains("[REDACTED:K]"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("host:claude-code via stdio"), "{text}");
        assert!(text.chars().count() < DETAIL_TEXT + 120, "{text}");
        let json: serde_json::Value = serde_json::from_str(&render(&e, true, &redactor)).unwrap();
        let detail = json["detail"].as_str().unwrap();
        assert!(detail.contains("[REDACTED:K]") && !detail.contains("sk-live"));
        assert!(detail.chars().count() <= DETAIL_JSON + 1);
        assert_eq!(json["actor"], "host:claude-code");
        assert_eq!(json["surface"], "stdio");
        assert_eq!(json["kind"], "egress_denied");
    }
}
