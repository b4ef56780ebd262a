//! What a tool can and cannot reach here, measured, not asserted: once per serve, when the
//! tool runtime is ready, a probe tool (the standard library only, no key, no tool code of
//! anyone's) is started exactly as a created tool would be (the same launcher, launch policy,
//! limits and egress proxy) and reports what it finds. Its report is what serve's
//! instructions and `tool_info` tell the agent.
//!
//! Nothing the probe does can leave the machine: whether there is a route out is asked with a
//! UDP `connect`, which sends no packet (the kernel only looks the route up; in the sandbox's
//! network namespace there is none), to a documentation address (192.0.2.1, 2001:db8::1);
//! whether the host's files are reachable is asked by looking for the ledger file.

use super::Library;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    /// `strict` or `off`.
    pub sandbox: String,
    /// Whether a tool has a route to an outside address (IPv4 or IPv6) of its own.
    pub route_out: bool,
    /// Whether a tool is pointed at autotool's egress proxy (its only way out when confined).
    pub egress_proxy: bool,
    /// Whether a tool can see the host's files (the ledger file, in the user's home).
    pub host_files: bool,
    /// Whether a tool can write to its own code's directory.
    pub writes_own_code: bool,
    /// How long the measurement took, from start to answer (ms).
    pub took_ms: u64,
    /// When it was measured (RFC 3339 UTC).
    #[serde(default)]
    pub at: String,
}

/// The file the last measurement is kept in (`$AUTOTOOL_HOME/reach.json`), so the next serve
/// can tell a host at once what the last one measured, until it has measured again.
const CACHE: &str = "reach.json";

/// The probe: a minimal MCP server over stdio with one function, `measure`.
const PROBE: &str = r#"import json, os, socket, sys

def route(family, address):
    # A UDP connect sends nothing: the kernel only looks the route up.
    try:
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.connect((address, 9))
        finally:
            s.close()
        return True
    except OSError:
        return False


def measure():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, ".probe-write"), "w"):
            pass
        writes = True
    except OSError:
        writes = False
    return {
        "route_out": route(socket.AF_INET, "192.0.2.1") or route(socket.AF_INET6, "2001:db8::1"),
        "egress_proxy": bool(os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")),
        "host_files": os.path.exists(HOST_FILE_PATH),
        "writes_own_code": writes,
    }


for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "autotool_probe", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "measure", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        found = measure()
        result = {"content": [{"type": "text", "text": json.dumps(found)}], "structuredContent": found}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// How long the whole measurement may take.
const BOUND: Duration = Duration::from_secs(30);

impl Library {
    /// Measure what a tool can reach (see the module), once the runtime is ready; the result
    /// is kept for [`Library::reach`].
    pub async fn measure_reach(&self) -> Result<Reach, String> {
        let found = tokio::time::timeout(BOUND, self.measure_reach_now())
            .await
            .unwrap_or_else(|_| Err(format!("the probe did not answer in {} s", BOUND.as_secs())));
        let kept = found
            .clone()
            .map_err(|e| format!("not measured: {}", self.secrets().redact(&e)));
        *self.reach.write().unwrap_or_else(|p| p.into_inner()) = Some(kept);
        if let Ok(reach) = &found
            && let Ok(text) = serde_json::to_vec(reach)
        {
            let path = self.home.root().join(CACHE);
            let tmp = path.with_extension("json.tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        found
    }

    /// Take the last serve's measurement (`reach.json`) while this one measures again, when
    /// it was made in the same sandbox mode.
    pub fn load_reach(&self) {
        let Ok(text) = std::fs::read(self.home.root().join(CACHE)) else {
            return;
        };
        let Ok(reach) = serde_json::from_slice::<Reach>(&text) else {
            return;
        };
        if reach.sandbox == self.sandbox_word() {
            let mut slot = self.reach.write().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(Ok(reach));
            }
        }
    }

    fn sandbox_word(&self) -> &'static str {
        match self.settings.sandbox {
            crate::tool::process::SandboxMode::Strict => "strict",
            crate::tool::process::SandboxMode::Off => "off",
        }
    }

    /// What [`Library::measure_reach`] found, `None` before it ends.
    pub fn reach(&self) -> Option<Result<Reach, String>> {
        self.reach.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn measure_reach_now(&self) -> Result<Reach, String> {
        let python = self.runtime().await.map_err(|e| e.to_string())?;
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("autotool-probe-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for the probe: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let host_file = serde_json::to_string(&self.home.db_path().display().to_string())
            .map_err(|e| e.to_string())?;
        let code = PROBE.replace("HOST_FILE_PATH", &host_file);
        std::fs::write(dir.path().join(crate::version::TOOL_FILE), code)
            .map_err(|e| e.to_string())?;
        let mut spec = self.spec(
            "autotool_probe",
            dir.path().to_path_buf(),
            python,
            &Default::default(),
            None,
            // Started as a new tool is: declaring nothing, it reaches nothing without a key.
            Some(&Default::default()),
        );
        spec.stderr_file = None;
        let process = crate::tool::process::ToolProcess::start(spec)
            .await
            .map_err(|e| e.to_string())?;
        let answer = process
            .call("measure", Default::default(), Duration::from_secs(10))
            .await;
        process.shutdown().await;
        let answer = answer.map_err(|e| e.to_string())?;
        let found = answer
            .structured_content
            .ok_or("the probe gave no measurement")?;
        let flag = |k: &str| found.get(k).and_then(serde_json::Value::as_bool);
        let (Some(route_out), Some(egress_proxy), Some(host_files), Some(writes_own_code)) = (
            flag("route_out"),
            flag("egress_proxy"),
            flag("host_files"),
            flag("writes_own_code"),
        ) else {
            return Err(format!("the probe answered {found}"));
        };
        Ok(Reach {
            sandbox: self.sandbox_word().into(),
            route_out,
            egress_proxy,
            host_files,
            writes_own_code,
            took_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            at: crate::ledger::format_ms(crate::ledger::now_ms()),
        })
    }
}

impl Reach {
    /// The report in words, for the agent: what was measured, what it means.
    pub fn sentence(&self) -> String {
        let mut said = format!(
            "measured {} by a probe tool launched as yours are (sandbox {}): ",
            if self.at.is_empty() {
                "at start"
            } else {
                &self.at
            },
            self.sandbox
        );
        said.push_str(if self.route_out {
            "a tool HAS a direct route to the internet; "
        } else {
            "a tool has no direct route to the internet (no network but its own loopback); "
        });
        said.push_str(match (self.egress_proxy, self.route_out) {
            (true, false) => {
                "it reaches outside hosts only through autotool's egress proxy, to the hosts \
                 allowed for the keys it holds (a tool without keys may reach any public host \
                 there, never private or metadata addresses); "
            }
            (true, true) => "it is also pointed at autotool's egress proxy; ",
            (false, _) => "no egress proxy is set for it; ",
        });
        said.push_str(if self.host_files {
            "it CAN see the host's files; "
        } else {
            "it cannot see the host's files (only the system and runtime, read-only, and a \
             private temporary directory); "
        });
        said.push_str(if self.writes_own_code {
            "it can write to its own code's directory."
        } else {
            "it cannot change its own code."
        });
        said
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_says_what_was_measured() {
        let confined = Reach {
            sandbox: "strict".into(),
            route_out: false,
            egress_proxy: true,
            host_files: false,
            writes_own_code: false,
            took_ms: 1,
            at: String::new(),
        };
        let s = confined.sentence();
        assert!(
            s.contains("no direct route") && s.contains("egress proxy"),
            "{s}"
        );
        assert!(s.contains("cannot see the host's files"), "{s}");
        let open = Reach {
            sandbox: "off".into(),
            route_out: true,
            host_files: true,
            writes_own_code: true,
            ..confined
        };
        let s = open.sentence();
        assert!(
            s.contains("HAS a direct route") && s.contains("CAN see"),
            "{s}"
        );
    }
}
