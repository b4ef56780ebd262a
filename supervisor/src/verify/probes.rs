//! The robustness stage ([`Stage::Robustness`](super::Stage::Robustness)): edge-case calls
//! derived from each function's input schema, made on the verified process before it is mounted.
//!
//! [`plan`] is a pure function of the listed functions (schemas in, calls out): every required
//! argument at a plain value with the optional ones left out, every argument given, then one
//! argument at a time at an edge: empty, huge, non-ASCII and right-to-left strings; 0, -1 and
//! ±2^53 (±1e308 for numbers) and the schema's own bounds; both booleans; empty arrays and
//! objects; `null` where allowed; each other value of an enum. Values the schema refuses are
//! never sent: refusing them is the SDK's job, and its refusal is the caller's mistake, not the
//! tool's. At most [`MAX_PER_FUNCTION`] calls per function and [`MAX_PER_TOOL`] per tool.
//!
//! [`run`] makes the calls one at a time on the running process, each within a per-probe timeout
//! and all within a time budget (probes not started when it runs out are left out, which is no
//! failure). A probe fails the tool when the function crashes on it (an unexpected exception,
//! which the SDK words apart from a `ToolError`: [`CallOutcome::unexpected`]), the process dies,
//! or no answer comes in time.

use super::verdicts::Answer;
use super::{Stage, VerifyFailure, cap_tail, split, traceback_summary};
use crate::tool::process::{CallOutcome, ToolInfo, ToolProcError, ToolProcess};
use rmcp::model::JsonObject;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Most calls planned for one function.
pub const MAX_PER_FUNCTION: usize = 12;
/// Most calls planned for one tool, shared out among its functions.
pub const MAX_PER_TOOL: usize = 40;
/// Default bound on one probe's answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default bound on starting probes: none starts after it (one in flight may take its timeout).
pub const PROBE_BUDGET: Duration = Duration::from_secs(10);
/// The size of the huge string.
pub const HUGE_STRING_BYTES: usize = 100 << 10;
/// Accented letters, a symbol outside ASCII and an emoji outside the BMP.
const UNICODE: &str = "ünï © 😀";
/// Arabic, a right-to-left override, Hebrew.
const RIGHT_TO_LEFT: &str = "مرحبا \u{202E}שלום";
/// How deep `$ref`s and nested objects are followed to build a value.
const MAX_DEPTH: usize = 4;
/// At most this many other values of an enum are tried.
const MAX_ENUM_EDGES: usize = 3;
/// Strings longer than this are elided when a probe is shown.
const SHOWN_STRING: usize = 64;
/// Longest shown probe.
const SHOWN_MAX: usize = 300;

/// One call to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub function: String,
    pub arguments: JsonObject,
    /// What it tries, in a few words: `text: empty string`, `optional arguments left out`.
    pub what: String,
}

impl Probe {
    /// `function({"arg":…})`, long strings elided, at most [`SHOWN_MAX`] bytes.
    pub fn shown(&self) -> String {
        let args = elide(&Value::Object(self.arguments.clone()));
        let mut shown = format!("{}({args})", self.function);
        if shown.len() > SHOWN_MAX {
            let mut end = SHOWN_MAX;
            while !shown.is_char_boundary(end) {
                end -= 1;
            }
            shown.truncate(end);
            shown.push_str("…)");
        }
        shown
    }
}

fn elide(value: &Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > SHOWN_STRING => {
            let head: String = s.chars().take(16).collect();
            Value::String(format!("{head}… [{} characters]", s.chars().count()))
        }
        Value::Array(items) => Value::Array(items.iter().map(elide).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), elide(v))).collect())
        }
        other => other.clone(),
    }
}

/// The calls to make on a tool offering `tools`, in the order to make them: each function's
/// most telling calls first (its plain call, then each argument's first edge, …), the functions
/// taking turns, so a cut keeps every function probed.
pub fn plan(tools: &[ToolInfo]) -> Vec<Probe> {
    let per_function: Vec<Vec<Probe>> = tools.iter().map(plan_function).collect();
    let longest = per_function.iter().map(Vec::len).max().unwrap_or(0);
    let mut probes = Vec::new();
    for rank in 0..longest {
        for list in &per_function {
            if let Some(probe) = list.get(rank) {
                if probes.len() == MAX_PER_TOOL {
                    return probes;
                }
                probes.push(probe.clone());
            }
        }
    }
    probes
}

/// One function's calls, at most [`MAX_PER_FUNCTION`]; none when a required argument has a
/// schema no value could be built for.
fn plan_function(tool: &ToolInfo) -> Vec<Probe> {
    let root = &tool.input_schema;
    let empty = JsonObject::new();
    let properties = root
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let any = json!({});
    let schema_of = |name: &str| properties.get(name).unwrap_or(&any);

    let mut base = JsonObject::new();
    for name in &required {
        match Arg::of(schema_of(name), root, 0).and_then(|a| a.plain(root, 0)) {
            Some(value) => base.insert((*name).to_string(), value),
            None => return Vec::new(),
        };
    }
    let optional: Vec<&String> = properties
        .keys()
        .filter(|k| !required.contains(&k.as_str()))
        .collect();
    let probe = |arguments: JsonObject, what: String| Probe {
        function: tool.name.clone(),
        arguments,
        what,
    };
    let mut probes = vec![probe(
        base.clone(),
        if optional.is_empty() {
            "plain arguments".into()
        } else {
            "optional arguments left out".into()
        },
    )];
    if !optional.is_empty() {
        let mut every = base.clone();
        for name in &optional {
            if let Some(value) = Arg::of(schema_of(name), root, 0).and_then(|a| a.plain(root, 0)) {
                every.insert((*name).clone(), value);
            }
        }
        probes.push(probe(every, "every argument given".into()));
    }

    let edges: Vec<(&String, Vec<(Value, String)>)> = properties
        .iter()
        .map(|(name, schema)| {
            let edges = Arg::of(schema, root, 0)
                .map(|a| a.edges())
                .unwrap_or_default();
            (name, edges)
        })
        .collect();
    let deepest = edges.iter().map(|(_, e)| e.len()).max().unwrap_or(0);
    for rank in 0..deepest {
        for (name, list) in &edges {
            let Some((value, label)) = list.get(rank) else {
                continue;
            };
            let mut arguments = base.clone();
            arguments.insert((*name).clone(), value.clone());
            if probes.iter().any(|p| p.arguments == arguments) {
                continue;
            }
            probes.push(probe(arguments, format!("{name}: {label}")));
            if probes.len() == MAX_PER_FUNCTION {
                return probes;
            }
        }
    }
    probes
}

/// What kind of value a schema takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    Null,
    /// No type said (`Any`): anything goes.
    Any,
}

impl Kind {
    fn named(name: &str) -> Kind {
        match name {
            "string" => Kind::String,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "boolean" => Kind::Boolean,
            "array" => Kind::Array,
            "object" => Kind::Object,
            "null" => Kind::Null,
            _ => Kind::Any,
        }
    }
}

/// One argument's schema with `$ref`s followed and `null` split off: `Optional[str]` is a
/// string that may also be `null`.
#[derive(Debug)]
struct Arg<'a> {
    schema: &'a JsonObject,
    kind: Kind,
    nullable: bool,
}

/// `schema` with its `$ref` (or a lone `allOf` member) followed, within `root`'s `$defs`.
fn resolve<'a>(schema: &'a Value, root: &'a JsonObject, depth: usize) -> Option<&'a JsonObject> {
    let object = schema.as_object()?;
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        let (defs, name) = reference
            .strip_prefix("#/$defs/")
            .map(|n| ("$defs", n))
            .or_else(|| {
                reference
                    .strip_prefix("#/definitions/")
                    .map(|n| ("definitions", n))
            })?;
        let target = root.get(defs)?.get(name)?;
        return resolve(target, root, depth + 1);
    }
    if let Some([only]) = object
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        && !object.contains_key("type")
    {
        return resolve(only, root, depth + 1);
    }
    Some(object)
}

impl<'a> Arg<'a> {
    fn of(schema: &'a Value, root: &'a JsonObject, depth: usize) -> Option<Arg<'a>> {
        let schema = resolve(schema, root, depth)?;
        let branches = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(branches) = branches {
            let is_null = |b: &Value| {
                resolve(b, root, depth + 1)
                    .is_some_and(|b| b.get("type").and_then(Value::as_str) == Some("null"))
            };
            let nullable = branches.iter().any(is_null);
            return match branches.iter().find(|b| !is_null(b)) {
                Some(first) => Arg::of(first, root, depth + 1).map(|arg| Arg {
                    nullable: nullable || arg.nullable,
                    ..arg
                }),
                None => Some(Arg {
                    schema,
                    kind: Kind::Null,
                    nullable: true,
                }),
            };
        }
        let (kind, nullable) = match schema.get("type") {
            Some(Value::String(t)) => (Kind::named(t), false),
            Some(Value::Array(types)) => {
                let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                let nullable = names.contains(&"null");
                let kind = names
                    .iter()
                    .find(|t| **t != "null")
                    .map_or(Kind::Null, |t| Kind::named(t));
                (kind, nullable)
            }
            _ if schema.contains_key("properties") => (Kind::Object, false),
            _ => (Kind::Any, false),
        };
        Some(Arg {
            schema,
            kind,
            nullable,
        })
    }

    fn choices(&self) -> Option<Vec<Value>> {
        if let Some(c) = self.schema.get("const") {
            return Some(vec![c.clone()]);
        }
        self.schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
            .cloned()
    }

    fn number(&self, key: &str) -> Option<f64> {
        self.schema.get(key).and_then(Value::as_f64)
    }

    fn length(&self, key: &str) -> Option<usize> {
        self.schema
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    }

    /// `x` is within the schema's bounds (and whole, for an integer).
    fn admits(&self, x: f64) -> bool {
        (self.kind != Kind::Integer || x.fract() == 0.0)
            && self.number("minimum").is_none_or(|m| x >= m)
            && self.number("maximum").is_none_or(|m| x <= m)
            && self.number("exclusiveMinimum").is_none_or(|m| x > m)
            && self.number("exclusiveMaximum").is_none_or(|m| x < m)
    }

    fn admits_string(&self, s: &str) -> bool {
        let n = s.chars().count();
        self.length("minLength").is_none_or(|m| n >= m)
            && self.length("maxLength").is_none_or(|m| n <= m)
    }

    fn numeric(&self, x: f64) -> Value {
        if self.kind == Kind::Integer {
            // Whole and within ±2^53: exact as an i64.
            json!(x as i64)
        } else {
            json!(x)
        }
    }

    /// An ordinary value the schema accepts.
    fn plain(&self, root: &JsonObject, depth: usize) -> Option<Value> {
        if let Some(choices) = self.choices() {
            return choices.into_iter().next();
        }
        if depth > MAX_DEPTH {
            return self.nullable.then_some(Value::Null);
        }
        let value = match self.kind {
            Kind::String => Some(Value::String(self.plain_string())),
            Kind::Integer | Kind::Number => {
                let low = self
                    .number("minimum")
                    .or_else(|| self.number("exclusiveMinimum").map(|m| m.floor() + 1.0));
                let high = self
                    .number("maximum")
                    .or_else(|| self.number("exclusiveMaximum").map(|m| m.ceil() - 1.0));
                let middle = low.zip(high).map(|(l, h)| ((l + h) / 2.0).floor());
                [Some(1.0), low, high, middle]
                    .into_iter()
                    .flatten()
                    .find(|x| self.admits(*x) && x.abs() <= 2f64.powi(53))
                    .map(|x| self.numeric(x))
            }
            Kind::Boolean => Some(Value::Bool(true)),
            Kind::Null => Some(Value::Null),
            Kind::Any => Some(Value::String("probe".into())),
            Kind::Array => self.plain_array(root, depth),
            Kind::Object => self.plain_object(root, depth),
        };
        value.or_else(|| self.nullable.then_some(Value::Null))
    }

    fn plain_string(&self) -> String {
        let by_format = match self.schema.get("format").and_then(Value::as_str) {
            Some("date-time") => Some("2024-01-01T00:00:00Z"),
            Some("date") => Some("2024-01-01"),
            Some("time") => Some("12:00:00"),
            Some("uri" | "url") => Some("https://example.com/"),
            Some("email") => Some("probe@example.com"),
            Some("uuid") => Some("00000000-0000-4000-8000-000000000000"),
            _ => None,
        };
        if let Some(s) = by_format {
            return s.to_string();
        }
        let plain = "probe";
        let n = plain.len();
        match (self.length("minLength"), self.length("maxLength")) {
            (Some(min), _) if min > n => "p".repeat(min.min(HUGE_STRING_BYTES)),
            (_, Some(max)) if max < n => "p".repeat(max),
            _ => plain.to_string(),
        }
    }

    fn plain_array(&self, root: &JsonObject, depth: usize) -> Option<Value> {
        if let Some(prefix) = self.schema.get("prefixItems").and_then(Value::as_array) {
            let items: Option<Vec<Value>> = prefix
                .iter()
                .map(|s| Arg::of(s, root, depth + 1).and_then(|a| a.plain(root, depth + 1)))
                .collect();
            return items.map(Value::Array);
        }
        let count = self.length("minItems").unwrap_or(0).min(3);
        if count == 0 {
            return Some(json!([]));
        }
        let item = Arg::of(self.schema.get("items")?, root, depth + 1)?.plain(root, depth + 1)?;
        Some(Value::Array(vec![item; count]))
    }

    fn plain_object(&self, root: &JsonObject, depth: usize) -> Option<Value> {
        let mut object = JsonObject::new();
        let properties = self.schema.get("properties").and_then(Value::as_object);
        let required = self.schema.get("required").and_then(Value::as_array);
        for name in required.into_iter().flatten().filter_map(Value::as_str) {
            let any = json!({});
            let schema = properties.and_then(|p| p.get(name)).unwrap_or(&any);
            let value = Arg::of(schema, root, depth + 1)?.plain(root, depth + 1)?;
            object.insert(name.to_string(), value);
        }
        Some(Value::Object(object))
    }

    /// Edge values the schema accepts, the most telling first, each with a few words saying
    /// what it is.
    fn edges(&self) -> Vec<(Value, String)> {
        let mut edges: Vec<(Value, String)> = Vec::new();
        if let Some(choices) = self.choices() {
            for other in choices.into_iter().skip(1).take(MAX_ENUM_EDGES) {
                let label = format!("the choice {other}");
                edges.push((other, label));
            }
        } else {
            match self.kind {
                Kind::String => {
                    // A pattern or a format would refuse these: the SDK answers, nothing runs.
                    if !self.schema.contains_key("pattern") && !self.schema.contains_key("format") {
                        let huge = huge_string();
                        for (s, label) in [
                            (String::new(), "empty string".to_string()),
                            (huge, format!("a {} KiB string", HUGE_STRING_BYTES >> 10)),
                            (UNICODE.to_string(), "non-ASCII text".into()),
                            (RIGHT_TO_LEFT.to_string(), "right-to-left text".into()),
                        ] {
                            if self.admits_string(&s) {
                                edges.push((Value::String(s), label));
                            }
                        }
                    }
                }
                Kind::Integer | Kind::Number => {
                    let integer = self.kind == Kind::Integer;
                    let big = if integer { 2f64.powi(53) } else { 1e308 };
                    let named = [
                        (0.0, "0".to_string()),
                        (-1.0, "-1".to_string()),
                        (
                            big,
                            if integer {
                                "2^53".into()
                            } else {
                                "1e308".into()
                            },
                        ),
                        (
                            -big,
                            if integer {
                                "-2^53".into()
                            } else {
                                "-1e308".into()
                            },
                        ),
                    ];
                    let bounds = [
                        self.number("minimum")
                            .map(|m| (m, format!("its minimum {m}"))),
                        self.number("maximum")
                            .map(|m| (m, format!("its maximum {m}"))),
                    ];
                    for (x, label) in named.into_iter().chain(bounds.into_iter().flatten()) {
                        if self.admits(x) && (!integer || x.abs() <= 2f64.powi(53)) {
                            edges.push((self.numeric(x), label));
                        }
                    }
                }
                Kind::Boolean => {
                    edges.push((Value::Bool(false), "false".into()));
                    edges.push((Value::Bool(true), "true".into()));
                }
                Kind::Array => {
                    if self.length("minItems").unwrap_or(0) == 0 {
                        edges.push((json!([]), "empty array".into()));
                    }
                }
                Kind::Object => {
                    let required = self
                        .schema
                        .get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| !r.is_empty());
                    if !required && self.length("minProperties").unwrap_or(0) == 0 {
                        edges.push((json!({}), "empty object".into()));
                    }
                }
                Kind::Null | Kind::Any => {}
            }
        }
        if self.nullable {
            edges.push((Value::Null, "null".into()));
        }
        edges
    }
}

/// Words and punctuation, [`HUGE_STRING_BYTES`] long.
fn huge_string() -> String {
    let unit = "lorem ipsum, dolor sit amet. ";
    let mut s = unit.repeat(HUGE_STRING_BYTES / unit.len() + 1);
    s.truncate(HUGE_STRING_BYTES);
    s
}

/// Make `probes` on `process`, one at a time, each within `timeout`, none started after
/// `budget`. Returns the answer to each probe made, in order (a JSON-RPC refusal is no
/// answer); the first that crashes the function, kills the process or gets no answer fails the
/// stage.
pub async fn run(
    process: &ToolProcess,
    probes: &[Probe],
    timeout: Duration,
    budget: Duration,
    tool_file: &str,
) -> Result<Vec<(usize, Option<Answer>)>, VerifyFailure> {
    let t0 = Instant::now();
    let mut made = Vec::new();
    for (i, probe) in probes.iter().enumerate() {
        if t0.elapsed() >= budget {
            break;
        }
        made.push((i, call(process, probe, timeout, tool_file).await?));
    }
    if !process.is_alive() {
        return Err(VerifyFailure::new(
            Stage::Robustness,
            "the tool process ended after answering the probes; a function must not end the process",
            process.stderr_tail(),
        ));
    }
    Ok(made)
}

/// Make one probe: its answer (`None` when the tool refused it with a JSON-RPC error), or the
/// failure a crash, a dead process or a missing answer is.
pub(super) async fn call(
    process: &ToolProcess,
    probe: &Probe,
    timeout: Duration,
    tool_file: &str,
) -> Result<Option<Answer>, VerifyFailure> {
    match process
        .call(&probe.function, probe.arguments.clone(), timeout)
        .await
    {
        Ok(outcome) if outcome.unexpected() => Err(crashed(probe, &outcome, tool_file)),
        // A result, a ToolError, or the tool refusing with a JSON-RPC error: an answer.
        Ok(outcome) => Ok(Some(Answer::of(&outcome))),
        Err(ToolProcError::Rejected { .. }) => Ok(None),
        Err(e) => {
            let (message, log) = split(e);
            let raised = traceback_summary(&log, tool_file)
                .map(|r| format!("; it raised {r}"))
                .unwrap_or_default();
            Err(VerifyFailure::new(
                Stage::Robustness,
                format!(
                    "the probe {} ({}) failed: {message}{raised}",
                    probe.shown(),
                    probe.what
                ),
                log,
            ))
        }
    }
}

fn crashed(probe: &Probe, outcome: &CallOutcome, tool_file: &str) -> VerifyFailure {
    let shown = probe.shown();
    let what = &probe.what;
    let message = match traceback_summary(&outcome.stderr, tool_file) {
        Some(raised) => format!(
            "the probe {shown} ({what}) raised {raised} (the traceback is below); a function must answer every input its schema accepts with a result or a ToolError"
        ),
        None => format!(
            "the probe {shown} ({what}) crashed with an unexpected exception (the tool's stderr is below); a function must answer every input its schema accepts with a result or a ToolError"
        ),
    };
    VerifyFailure::new(Stage::Robustness, message, cap_tail(&outcome.stderr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            title: None,
            description: None,
            input_schema: match schema {
                Value::Object(m) => m,
                _ => JsonObject::new(),
            },
            output_schema: None,
            annotations: None,
        }
    }

    fn calls(probes: &[Probe]) -> Vec<(String, Value, String)> {
        probes
            .iter()
            .map(|p| {
                (
                    p.function.clone(),
                    Value::Object(p.arguments.clone()),
                    p.what.clone(),
                )
            })
            .collect()
    }

    fn call(function: &str, arguments: Value, what: &str) -> (String, Value, String) {
        (function.into(), arguments, what.into())
    }

    #[test]
    fn a_string_and_an_integer_get_their_edges_in_turn() {
        let f = function(
            "pick",
            json!({"type": "object", "properties": {
                "text": {"type": "string"},
                "n": {"type": "integer", "default": 3}
            }, "required": ["text"]}),
        );
        let huge = huge_string();
        assert_eq!(
            calls(&plan(&[f])),
            vec![
                call(
                    "pick",
                    json!({"text": "probe"}),
                    "optional arguments left out"
                ),
                call(
                    "pick",
                    json!({"text": "probe", "n": 1}),
                    "every argument given"
                ),
                call("pick", json!({"text": "probe", "n": 0}), "n: 0"),
                call("pick", json!({"text": ""}), "text: empty string"),
                call("pick", json!({"text": "probe", "n": -1}), "n: -1"),
                call("pick", json!({"text": huge}), "text: a 100 KiB string"),
                call(
                    "pick",
                    json!({"text": "probe", "n": 9_007_199_254_740_992_i64}),
                    "n: 2^53"
                ),
                call("pick", json!({"text": UNICODE}), "text: non-ASCII text"),
                call(
                    "pick",
                    json!({"text": "probe", "n": -9_007_199_254_740_992_i64}),
                    "n: -2^53"
                ),
                call(
                    "pick",
                    json!({"text": RIGHT_TO_LEFT}),
                    "text: right-to-left text"
                ),
            ]
        );
        assert_eq!(huge.len(), HUGE_STRING_BYTES);
    }

    #[test]
    fn numbers_booleans_arrays_and_nulls() {
        let f = function(
            "f",
            json!({"type": "object", "properties": {
                "x": {"type": "number"},
                "flag": {"type": "boolean", "default": false},
                "items": {"type": "array", "items": {"type": "string"}, "default": []},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
            }, "required": ["x"]}),
        );
        let probes = plan(&[f]);
        let whats: Vec<&str> = probes.iter().map(|p| p.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "optional arguments left out",
                "every argument given",
                "flag: false",
                "items: empty array",
                "note: empty string",
                "x: 0",
                "flag: true",
                "note: a 100 KiB string",
                "x: -1",
                "note: non-ASCII text",
                "x: 1e308",
                "note: right-to-left text",
            ]
        );
        assert_eq!(
            Value::Object(probes[1].arguments.clone()),
            json!({"x": 1.0, "flag": true, "items": [], "note": "probe"})
        );
        assert_eq!(probes.len(), MAX_PER_FUNCTION);
    }

    #[test]
    fn values_the_schema_refuses_are_not_probes() {
        let f = function(
            "bounded",
            json!({"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "code": {"type": "string", "minLength": 2, "maxLength": 8},
                "slug": {"type": "string", "pattern": "^[a-z]+$"},
                "when": {"type": "string", "format": "date-time"},
                "x": {"type": "number", "exclusiveMinimum": 0}
            }, "required": ["n", "code", "slug", "when", "x"]}),
        );
        let probes = plan(&[f]);
        assert_eq!(
            Value::Object(probes[0].arguments.clone()),
            json!({"n": 1, "code": "probe", "slug": "probe", "when": "2024-01-01T00:00:00Z", "x": 1.0})
        );
        let whats: Vec<&str> = probes.iter().map(|p| p.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "plain arguments",
                "code: non-ASCII text",
                "x: 1e308",
                "n: its maximum 10",
            ],
            "0, -1 and ±2^53 are out of n's range; \"\" and 100 KiB out of code's; the pattern \
             and the format would refuse any edge; x must be over 0"
        );
    }

    #[test]
    fn enums_refs_and_nested_models() {
        let f = function(
            "order",
            json!({"type": "object", "properties": {
                "size": {"enum": ["s", "m", "l", "xl", "xxl"], "type": "string"},
                "where": {"$ref": "#/$defs/Address"},
                "gift": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null}
            }, "required": ["size", "where"],
            "$defs": {"Address": {"type": "object", "properties": {
                "street": {"type": "string"}, "zip": {"type": "integer", "default": 0}
            }, "required": ["street"]}}}),
        );
        let probes = plan(&[f]);
        assert_eq!(
            calls(&probes),
            vec![
                call(
                    "order",
                    json!({"size": "s", "where": {"street": "probe"}}),
                    "optional arguments left out"
                ),
                call(
                    "order",
                    json!({"size": "s", "where": {"street": "probe"}, "gift": {"street": "probe"}}),
                    "every argument given"
                ),
                call(
                    "order",
                    json!({"size": "s", "where": {"street": "probe"}, "gift": null}),
                    "gift: null"
                ),
                call(
                    "order",
                    json!({"size": "m", "where": {"street": "probe"}}),
                    "size: the choice \"m\""
                ),
                call(
                    "order",
                    json!({"size": "l", "where": {"street": "probe"}}),
                    "size: the choice \"l\""
                ),
                call(
                    "order",
                    json!({"size": "xl", "where": {"street": "probe"}}),
                    "size: the choice \"xl\""
                ),
            ]
        );
    }

    #[test]
    fn a_function_without_arguments_is_called_once() {
        let f = function("now", json!({"type": "object", "properties": {}}));
        assert_eq!(
            calls(&plan(&[f])),
            vec![call("now", json!({}), "plain arguments")]
        );
    }

    #[test]
    fn many_functions_share_the_tool_budget_in_turns() {
        let functions: Vec<ToolInfo> = (0..10)
            .map(|i| {
                function(
                    &format!("f{i}"),
                    json!({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}, "required": ["s", "n"]}),
                )
            })
            .collect();
        let probes = plan(&functions);
        assert_eq!(probes.len(), MAX_PER_TOOL);
        for i in 0..10 {
            let name = format!("f{i}");
            let mine: Vec<&Probe> = probes.iter().filter(|p| p.function == name).collect();
            assert_eq!(mine.len(), 4, "{name}");
            assert_eq!(mine[0].what, "plain arguments");
        }
        // The first round is every function's plain call.
        assert!(probes[..10].iter().all(|p| p.what == "plain arguments"));
    }

    #[test]
    fn probes_are_shown_short() {
        let probe = Probe {
            function: "echo".into(),
            arguments: match json!({"text": huge_string()}) {
                Value::Object(m) => m,
                _ => JsonObject::new(),
            },
            what: "text: a 100 KiB string".into(),
        };
        assert_eq!(
            probe.shown(),
            "echo({\"text\":\"lorem ipsum, dol… [102400 characters]\"})"
        );
        let many = Probe {
            function: "f".into(),
            arguments: (0..100)
                .map(|i| (format!("argument_{i}"), json!(i)))
                .collect(),
            what: String::new(),
        };
        assert!(many.shown().len() <= SHOWN_MAX + 4, "{}", many.shown());
        assert!(many.shown().ends_with("…)"));
    }
}
