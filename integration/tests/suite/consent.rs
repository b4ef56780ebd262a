//! The official MCP Python SDK (`mcp` 2.x) answering autotool's consent question as a host
//! would, once per protocol era: `python/consent_flow.py` runs three hosts in turn on one home
//! against a key held in the serve's environment, whose fake API listens here on 127.0.0.1:
//! - a host whose user says yes: the tool is created after one question naming the tool and
//!   the key (never its value), and its call reaches the API with the key, whose echo comes back
//!   redacted;
//! - a host whose user declines: the create is refused with the command the user can run;
//! - a host that cannot ask: refused ("consent needed"); this test runs `autotool tools approve`
//!   while the host waits, and the same create then succeeds.
//!
//! The legacy host is asked through `elicitation/create` while its call waits; the 2026-07-28
//! host gets `input_required`, which the SDK's `Client.call_tool` answers through the same
//! callback and retries with the echoed `requestState`. The script records each round trip.

use autotool_integration::python::Era;
use autotool_integration::{Checks, Need, OwnedChild, TestHome, locate, setup};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bound on one whole run: three hosts, each its own serve, four creates and two calls.
const SESSION_TIMEOUT: Duration = Duration::from_secs(240);

/// The bound on `autotool tools approve`.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// The key, as the serve holds it. It must reach the API and nothing the host sees.
const KEY: &str = "CONSENT_API_KEY";
const SECRET: &str = "sdk-consent-s3cr3t-0417";

/// A fake API on 127.0.0.1 that answers each request with its request line and Authorization
/// header, and keeps them for the test.
struct FakeApi {
    base: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FakeApi {
    fn start() -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(16) {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let Ok(read_half) = stream.try_clone() else {
                    continue;
                };
                let mut reader = BufReader::new(read_half);
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut auth = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        auth = value.trim().to_string();
                    }
                }
                let body = format!("line={} auth={auth}", request_line.trim());
                record
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(body.clone());
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.flush();
                let mut rest = Vec::new();
                let _ = reader.read_to_end(&mut rest);
            }
        });
        FakeApi {
            base: format!("http://127.0.0.1:{port}"),
            seen,
        }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What one run of `consent_flow.py` left.
struct Run {
    summary: Value,
    /// `autotool tools approve` as run for the `approve` event: (exit status, stdout + stderr).
    approve: Option<(Option<i32>, String)>,
    stderr: String,
    elapsed: Duration,
}

/// Run `consent_flow.py --era ERA` on `home`, answering its `approve` event with the CLI.
fn run_flow(home: &TestHome, era: Era, api: &FakeApi) -> anyhow::Result<Run> {
    let s = &home.setup;
    let mut cmd = Command::new(&s.python);
    cmd.arg("-u")
        .arg(locate::python_dir().join("consent_flow.py"))
        .args(["--era", era.arg(), "--sandbox", &s.sandbox, "--autotool"])
        .arg(&s.autotool)
        .current_dir(locate::python_dir())
        .envs(home.env())
        .env(KEY, SECRET)
        .env("CONSENT_API_BASE", &api.base)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME");
    let started = Instant::now();
    let deadline = started + SESSION_TIMEOUT;
    let mut child = OwnedChild::spawn("consent_flow.py", cmd)?;
    let mut approve = None;
    let mut last = None;
    let mut ended = false;
    while Instant::now() < deadline {
        let line = match child.next_line(deadline.saturating_duration_since(Instant::now())) {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(_) => {
                ended = true;
                break;
            }
        };
        let Ok(v) = serde_json::from_str::<Value>(&line.text) else {
            continue;
        };
        if v["event"] == "approve" {
            let (tool, key) = (v["tool"].as_str(), v["key"].as_str());
            let (tool, key) = (tool.unwrap_or_default(), key.unwrap_or_default());
            let outcome = home.cli(&["tools", "approve", tool, key], CLI_TIMEOUT)?;
            approve = Some((outcome.0, format!("{}{}", outcome.1, outcome.2)));
            child.send_line("approved")?;
            child.close_stdin();
            continue;
        }
        last = Some(v);
    }
    let status = child.wait_exit(Duration::from_secs(10))?;
    if !ended {
        child.kill_group();
    }
    let stderr = child.final_stderr();
    let Some(summary) = last.filter(|_| ended) else {
        anyhow::bail!(
            "consent_flow.py ({}) did not finish with a summary within {SESSION_TIMEOUT:?} (exit \
             {status:?}); stderr:\n{stderr}",
            era.arg()
        );
    };
    Ok(Run {
        summary,
        approve,
        stderr,
        elapsed: started.elapsed(),
    })
}

fn is_result(v: &Value) -> bool {
    v["kind"] == "result"
}

fn ok_result(v: &Value) -> bool {
    is_result(v) && v["is_error"] == false
}

fn error_result(v: &Value) -> bool {
    is_result(v) && v["is_error"] == true
}

fn text(v: &Value) -> String {
    v.get("text")
        .or_else(|| v.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The API's echo came back: the call reached it holding the key, which arrives redacted.
fn key_came_back_redacted(v: &Value) -> bool {
    let t = text(v);
    ok_result(v)
        && t.contains("line=GET /echo?key=[REDACTED:CONSENT_API_KEY]")
        && t.contains("auth=Bearer [REDACTED:CONSENT_API_KEY]")
        && !t.contains(SECRET)
}

/// The round trips of one `Client.call_tool`, as `consent_flow.py` recorded them: (what it
/// sent beyond the call, what came back).
fn rounds(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    let sent = match (&r["input_responses"], r["sent_request_state"] == true) {
                        (Value::Null, false) => "call".to_string(),
                        (responses, state) => format!("retry {responses} state={state}"),
                    };
                    let got = match r["got"].as_str() {
                        Some("InputRequiredResult") => format!(
                            "input_required {} state={}",
                            r["input_requests"], r["got_request_state"]
                        ),
                        Some(other) => other.to_string(),
                        None => "nothing".to_string(),
                    };
                    format!("{sent} -> {got}")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One question answered with a yes or a no: the round trips a host of `era` makes.
fn asked_rounds(era: Era) -> Vec<String> {
    match era {
        Era::Legacy => vec!["call -> CallToolResult".to_string()],
        Era::Modern => vec![
            r#"call -> input_required ["consent"] state=true"#.to_string(),
            r#"retry ["consent"] state=true -> CallToolResult"#.to_string(),
        ],
    }
}

/// No question: one round trip.
fn unasked_rounds() -> Vec<String> {
    vec!["call -> CallToolResult".to_string()]
}

/// The approvals on record for `tool`, from `autotool tools show TOOL --json`: how each was given.
fn approvals_via(home: &TestHome, tool: &str) -> Vec<String> {
    let Ok((_, out, _)) = home.cli(&["tools", "show", tool, "--json"], CLI_TIMEOUT) else {
        return vec!["(tools show failed)".to_string()];
    };
    let shown: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    shown["approvals"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    let field = |name: &str| r[name].as_str().unwrap_or("").to_string();
                    format!("{}:{}", field("key"), field("via"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The one question of a host that can ask, checked for what it says and how it came.
fn check_question(c: &mut Checks, era: Era, host: &str, asked: &Value, tool: &str) {
    let questions = asked.as_array().cloned().unwrap_or_default();
    c.check(
        questions.len() == 1,
        &format!("{host}: the callback was asked exactly once"),
        format!("{questions:?}"),
    );
    let Some(q) = questions.first() else { return };
    let message = q["message"].as_str().unwrap_or("");
    c.check(
        message.contains(&format!("`{tool}`")) && message.contains(KEY),
        &format!("{host}: the question names the tool `{tool}` and {KEY}"),
        message,
    );
    c.check(
        !message.contains(SECRET),
        &format!("{host}: the question never holds the key's value"),
        message,
    );
    let schema = &q["requested_schema"];
    c.check(
        q["mode"] == "form"
            && schema["properties"]["allow"]["type"] == "boolean"
            && schema["required"] == json!(["allow"]),
        &format!("{host}: a form with one required boolean, allow"),
        q,
    );
    // The legacy question is a server request (its JSON-RPC id); the 2026 one is the key of
    // the `inputRequests` entry the SDK's driver dispatched.
    let id_ok = match era {
        Era::Legacy => q["request_id"].is_i64() || q["request_id"].is_u64(),
        Era::Modern => q["request_id"] == "consent",
    };
    c.check(
        id_ok,
        &format!(
            "{host}: asked through {}",
            match era {
                Era::Legacy => "an elicitation/create request (a JSON-RPC id)",
                Era::Modern => "the input_required request keyed `consent`",
            }
        ),
        &q["request_id"],
    );
}

fn run(test: &str, era: Era) {
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let api = FakeApi::start();
    let flow = run_flow(&home, era, &api).unwrap();
    let s = &flow.summary;
    eprintln!(
        "{test}: sdk {} {} run in {:.1}s; summary:\n{}",
        setup.sdk_version,
        era.arg(),
        flow.elapsed.as_secs_f64(),
        serde_json::to_string_pretty(s).unwrap_or_default()
    );
    c.check(
        s.get("fatal").is_none()
            && ["yes", "decline", "none"]
                .iter()
                .all(|h| s[h]["fatal"].is_null()),
        "every host ran to its end",
        format!(
            "{} / {} / {} / {}",
            s["fatal"], s["yes"]["fatal"], s["decline"]["fatal"], s["none"]["fatal"]
        ),
    );
    let want_version = match era {
        Era::Legacy => "2025-11-25",
        Era::Modern => "2026-07-28",
    };
    for host in ["yes", "decline", "none"] {
        c.check(
            s[host]["protocol_version"] == want_version,
            &format!("{host}: negotiated {want_version}"),
            &s[host]["protocol_version"],
        );
    }

    // A host whose user says yes.
    let yes = &s["yes"];
    c.check(
        ok_result(&yes["create"]),
        "yes: create_tool consent_yes succeeds",
        &yes["create"],
    );
    c.check(
        yes["create"]["structured"]["keys_granted"] == json!([KEY]),
        "yes: the created tool holds CONSENT_API_KEY",
        &yes["create"]["structured"],
    );
    check_question(&mut c, era, "yes", &yes["asked"], "consent_yes");
    c.check(
        rounds(&yes["create_rounds"]) == asked_rounds(era),
        "yes: the create's round trips in this era",
        format!("{:?}", rounds(&yes["create_rounds"])),
    );
    c.check(
        key_came_back_redacted(&yes["call"]),
        "yes: consent_yes__echo reached the API with the key; it came back redacted",
        &yes["call"],
    );
    c.check(
        yes["asked_after_call"] == 1 && rounds(&yes["call_rounds"]) == unasked_rounds(),
        "yes: calling the approved tool asks nothing",
        format!(
            "asked {} times; {:?}",
            yes["asked_after_call"],
            rounds(&yes["call_rounds"])
        ),
    );
    let via = approvals_via(&home, "consent_yes");
    let want_via = match era {
        Era::Legacy => "elicitation",
        Era::Modern => "input_required",
    };
    c.check(
        via == [format!("{KEY}:{want_via}")],
        &format!("yes: the approval is on record, given via {want_via}"),
        format!("{via:?}"),
    );

    // A host whose user declines.
    let decline = &s["decline"];
    c.check(
        error_result(&decline["create"]),
        "decline: create_tool consent_no is an isError result",
        &decline["create"],
    );
    c.check(
        text(&decline["create"]).contains("`autotool tools approve consent_no CONSENT_API_KEY`")
            && text(&decline["create"]).contains("Nothing ran with the key"),
        "decline: the refusal names `autotool tools approve consent_no CONSENT_API_KEY`",
        text(&decline["create"]),
    );
    check_question(&mut c, era, "decline", &decline["asked"], "consent_no");
    c.check(
        rounds(&decline["create_rounds"]) == asked_rounds(era),
        "decline: the create's round trips in this era",
        format!("{:?}", rounds(&decline["create_rounds"])),
    );
    let listed = decline["list"]["names"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    c.check(
        !listed.is_empty() && !listed.iter().any(|n| n == "consent_no__echo"),
        "decline: the refused tool is not mounted",
        format!("{listed:?}"),
    );
    let via = approvals_via(&home, "consent_no");
    c.check(
        via.is_empty(),
        "decline: no approval on record",
        format!("{via:?}"),
    );

    // A host that cannot ask, answered through the CLI.
    let none = &s["none"];
    let refused = &none["create_refused"];
    c.check(
        error_result(refused)
            && text(refused).contains("consent needed")
            && text(refused).contains("`autotool tools approve consent_cli CONSENT_API_KEY`"),
        "none: create_tool is refused with consent needed and the command",
        refused,
    );
    c.check(
        rounds(&none["create_refused_rounds"]) == unasked_rounds(),
        "none: a host without elicitation gets the refusal at once (no input_required)",
        format!("{:?}", rounds(&none["create_refused_rounds"])),
    );
    let approved = flow.approve.clone().unwrap_or((None, "(never run)".into()));
    c.check(
        approved.0 == Some(0) && approved.1.contains("approved"),
        "none: `autotool tools approve consent_cli CONSENT_API_KEY` succeeds",
        format!("{approved:?}"),
    );
    c.check(
        none["approval"] == "approved",
        "none: the host heard the approval was given",
        &none["approval"],
    );
    c.check(
        ok_result(&none["create"]) && none["create"]["structured"]["keys_granted"] == json!([KEY]),
        "none: the same create_tool then succeeds, holding the key",
        &none["create"],
    );
    c.check(
        rounds(&none["create_rounds"]) == unasked_rounds(),
        "none: the approved create asks nothing",
        format!("{:?}", rounds(&none["create_rounds"])),
    );
    c.check(
        key_came_back_redacted(&none["call"]),
        "none: consent_cli__echo reached the API with the key; it came back redacted",
        &none["call"],
    );
    let via = approvals_via(&home, "consent_cli");
    c.check(
        via == [format!("{KEY}:cli")],
        "none: the approval is on record, given via cli",
        format!("{via:?}"),
    );

    // The API saw the key itself, twice (one call per approved tool); the host never did.
    let seen = api.seen();
    c.check(
        seen.len() == 2
            && seen.iter().all(|r| {
                r.contains(&format!("line=GET /echo?key={SECRET} "))
                    && r.ends_with(&format!("auth=Bearer {SECRET}"))
            }),
        "the fake API received the raw key on exactly the two approved calls",
        format!("{seen:?}"),
    );
    c.check(
        !s.to_string().contains(SECRET),
        "the key's value appears nowhere the host saw",
        "the summary holds it",
    );

    c.check(
        !flow.stderr.contains(SECRET) && !home.log_tail(1 << 20).contains(SECRET),
        "the key's value appears in no log (the serves' stderr, the home's logs)",
        "a log holds it",
    );

    let left = home.wait_idle(Duration::from_secs(10));
    c.check(
        left.is_empty(),
        "no serve still runs on the home after the hosts closed their connections",
        format!("{left:?}"),
    );

    c.finish(test, || {
        format!(
            "client stderr (the serves' stderr included):\n{}\n{}",
            flow.stderr,
            home.log_tail(20_000)
        )
    });
}

#[test]
fn python_sdk_legacy_host_answers_consent() {
    run("python_sdk_legacy_host_answers_consent", Era::Legacy);
}

#[test]
fn python_sdk_modern_host_answers_consent() {
    run("python_sdk_modern_host_answers_consent", Era::Modern);
}
