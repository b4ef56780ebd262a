//! [`RawServe`]: one `autotool serve` spoken to in raw JSON-RPC lines on its stdin and stdout,
//! for tests that need a tool created (or a request answered) without a client library.

use crate::child::OwnedChild;
use crate::home::TestHome;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

/// A serve on a test's home, initialized (2025-11-25).
#[derive(Debug)]
pub struct RawServe {
    serve: OwnedChild,
    next_id: i64,
}

impl RawServe {
    /// Start `autotool serve` on `home` and initialize a session.
    pub fn start(home: &TestHome) -> Result<RawServe> {
        let s = &home.setup;
        let mut cmd = Command::new(&s.autotool);
        cmd.args(["serve", "--sandbox", &s.sandbox])
            .envs(home.env());
        let mut me = RawServe {
            serve: OwnedChild::spawn("autotool serve", cmd)?,
            next_id: 1,
        };
        me.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "autotool-raw", "version": "0"}}),
        )?;
        me.serve
            .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(me)
    }

    /// Send a request and wait (60 s at most) for the response with its id.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.serve.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(line) = self.serve.next_line(left)? else {
                bail!(
                    "no answer to {method} within 60 s; serve's stderr:\n{}",
                    self.serve.stderr()
                );
            };
            let v: Value = serde_json::from_str(&line.text)
                .with_context(|| format!("serve wrote a non-JSON line: {:?}", line.text))?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    }

    /// `create_tool {name, code}`: the response.
    pub fn create_tool(&mut self, name: &str, code: &str) -> Result<Value> {
        self.request(
            "tools/call",
            json!({"name": "create_tool", "arguments": {"name": name, "code": code}}),
        )
    }

    /// Close stdin and wait for the serve to end (10 s at most).
    pub fn finish(mut self) -> String {
        self.serve.close_stdin();
        let _ = self.serve.wait_exit(Duration::from_secs(10));
        self.serve.final_stderr()
    }
}
