//! What a host asks of autotool, parsed once into types: a `tools/call` becomes one
//! [`Request`] (a built-in with its typed arguments, or a mounted function), and the published
//! input schema of each built-in is generated from the same type it is parsed into, so the two
//! cannot disagree.
//!
//! A built-in's arguments that do not fit its type get an error naming the argument and what
//! was wrong (`create_tool needs `code`: …`), never a protocol error: the agent reads it and
//! calls again.

use crate::library::CreateRequest;
use crate::library::search::{SEARCH_DEFAULT, SEARCH_MAX};
use crate::verify::{SmokeTest, Thoroughness};
use autotool_policy::names::{MountedName, TOOL_NAME_PATTERN, ToolName};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// `create_tool`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CreateToolArgs {
    /// The tool's name; the same name again makes a new version.
    #[schemars(regex(pattern = TOOL_NAME_PATTERN), length(min = 1, max = 40))]
    pub name: String,
    /// The whole Python file.
    pub code: String,
    /// What the tool is for.
    #[serde(default)]
    pub description: Option<String>,
    /// A call to make before mounting; a failure fails creation.
    #[serde(default)]
    pub smoke_test: Option<SmokeTestArgs>,
    /// Edge-case probes of every function: standard for tools without keys, thorough even with keys, quick none.
    #[serde(default)]
    #[schemars(extend("default" = "standard"))]
    pub verify: Option<VerifyLevel>,
}

/// `create_tool`'s `smoke_test`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SmokeTestArgs {
    /// The function to call.
    pub function: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Option<JsonObject>,
}

/// How hard verification probes a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerifyLevel {
    Quick,
    Standard,
    Thorough,
}

impl From<VerifyLevel> for Thoroughness {
    fn from(v: VerifyLevel) -> Self {
        match v {
            VerifyLevel::Quick => Thoroughness::Quick,
            VerifyLevel::Standard => Thoroughness::Standard,
            VerifyLevel::Thorough => Thoroughness::Thorough,
        }
    }
}

/// `run_tool`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RunToolArgs {
    /// The tool's name.
    pub tool: String,
    /// The function to call.
    pub function: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Option<JsonObject>,
    /// Call a tool that is quarantined or retired (off the list) anyway.
    #[serde(default)]
    pub force: Option<bool>,
}

/// `search_tools`' arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SearchToolsArgs {
    /// What you need, in a few words.
    pub query: String,
    /// How many tools to return (default 5).
    #[schemars(range(min = 1, max = 20))]
    #[serde(default)]
    pub limit: Option<u64>,
}

/// `synthesize_tool`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SynthesizeToolArgs {
    /// What the tool should do: the API or service, the functions and their arguments, the key it needs if any.
    pub need: String,
}

/// `tool_info`'s arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ToolInfoArgs {
    /// The tool's name.
    pub name: String,
}

/// One `tools/call`, parsed.
#[derive(Debug, Clone)]
pub enum Request {
    Create(CreateRequest),
    Run {
        tool: String,
        function: String,
        arguments: JsonObject,
        force: bool,
    },
    Search {
        query: String,
        limit: usize,
    },
    Synthesize {
        need: String,
    },
    /// `tool_info`: a tool's record, read-only.
    Info {
        name: String,
    },
    /// `<tool>__<function>`: a mounted function, by its mounted name.
    Mounted {
        name: MountedName,
        arguments: JsonObject,
    },
}

/// Why a call could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// A built-in called with arguments that do not fit: an `isError` result with this text.
    Arguments(String),
    /// No tool of that name (a protocol error, -32602).
    UnknownTool(String),
}

/// `args` as `T`, or the path of the first argument that does not fit and serde's reason.
fn typed<T: serde::de::DeserializeOwned>(args: &JsonObject) -> Result<T, (String, String)> {
    let value = Value::Object(args.clone());
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        (path, e.into_inner().to_string())
    })
}

/// What is wrong with `create_tool`'s arguments (the path serde stopped at, and its reason), in
/// the words the agent is told.
fn create_error(path: &str, why: &str, args: &JsonObject) -> String {
    let shown = |v: Option<&Value>| v.map(Value::to_string).unwrap_or_else(|| "\"\"".into());
    match path {
        "." if why.contains("missing field `name`") => ToolName::parse("")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default(),
        "name" => {
            let given = args.get("name").map(Value::to_string).unwrap_or_default();
            ToolName::parse(&given)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "create_tool needs `name` (a string)".into())
        }
        "code" | "." => "create_tool needs `code`: the whole Python file, as a string".into(),
        "smoke_test" if why.contains("missing field `function`") => {
            "smoke_test needs `function` (a string)".into()
        }
        "smoke_test" => "smoke_test must be an object {function, arguments}".into(),
        p if p.starts_with("smoke_test.function") => {
            "smoke_test needs `function` (a string)".into()
        }
        p if p.starts_with("smoke_test.arguments") => {
            "smoke_test.arguments must be an object".into()
        }
        p if p.starts_with("smoke_test") => {
            "smoke_test must be an object {function, arguments}".into()
        }
        "verify" => format!(
            "verify must be \"quick\" (no probes), \"standard\" (the default: probes for tools \
             that declare no keys) or \"thorough\" (probes even with keys), not {}",
            shown(args.get("verify"))
        ),
        "description" => "description must be a string".into(),
        other => format!("create_tool: the argument `{other}` does not fit"),
    }
}

const RUN_SHAPE: &str =
    "run_tool needs {\"tool\": string, \"function\": string, \"arguments\": object}";

impl Request {
    /// Parse a `tools/call` of `name` with `args`. A name that is neither a built-in nor a
    /// mounted name's shape is an unknown tool; whether a mounted name names a function that
    /// exists is the library's to say.
    pub fn parse(name: &str, args: &JsonObject, synthesize: bool) -> Result<Request, ParseError> {
        match name {
            "create_tool" => {
                // A missing `code` is named before a name problem: both need fixing, and the
                // code is the bigger one.
                if !args.get("code").is_some_and(Value::is_string) {
                    return Err(ParseError::Arguments(create_error("code", "", args)));
                }
                let a: CreateToolArgs = typed(args).map_err(|(path, why)| {
                    ParseError::Arguments(create_error(&path, &why, args))
                })?;
                let name =
                    ToolName::parse(&a.name).map_err(|e| ParseError::Arguments(e.to_string()))?;
                // Only `autotool add` writes a file that runs an npm server, or that gives a
                // server settings, after the user's yes.
                if crate::verify::declarations::npm(&a.code).is_ok_and(|n| n.is_some()) {
                    return Err(ParseError::Arguments(
                        "NPM is declared only by the file `autotool add NAME npm:PACKAGE` writes \
                         for a server the user added; an agent's tool is Python: leave NPM out"
                            .into(),
                    ));
                }
                if crate::verify::declarations::settings(&a.code).is_ok_and(|s| !s.is_empty()) {
                    return Err(ParseError::Arguments(
                        "SETTINGS is declared only by the file `autotool add NAME … --env` writes \
                         for a server the user added; an agent's tool reads its own settings: \
                         leave SETTINGS out"
                            .into(),
                    ));
                }
                Ok(Request::Create(CreateRequest {
                    name,
                    code: a.code,
                    description: a.description.unwrap_or_default(),
                    smoke_test: a.smoke_test.map(|s| SmokeTest {
                        function: s.function,
                        arguments: s.arguments.unwrap_or_default(),
                    }),
                    thoroughness: a.verify.map(Thoroughness::from).unwrap_or_default(),
                }))
            }
            "run_tool" => {
                let a: RunToolArgs = typed(args).map_err(|(path, why)| {
                    ParseError::Arguments(format!("{RUN_SHAPE} (`{path}`: {why})"))
                })?;
                Ok(Request::Run {
                    tool: a.tool,
                    function: a.function,
                    arguments: a.arguments.unwrap_or_default(),
                    force: a.force.unwrap_or(false),
                })
            }
            "search_tools" => {
                const NEEDS_QUERY: &str = "search_tools needs `query`: words for what you need, \
                                           for example \"weather forecast for a city\"";
                let a: SearchToolsArgs = typed(args).map_err(|(path, why)| {
                    ParseError::Arguments(if why.contains("missing field `query`") {
                        NEEDS_QUERY.to_string()
                    } else {
                        format!(
                            "search_tools needs {{\"query\": string, \"limit\"?: integer}} (`{path}`: {why})"
                        )
                    })
                })?;
                let query = a.query.trim().to_string();
                if query.is_empty() {
                    return Err(ParseError::Arguments(NEEDS_QUERY.into()));
                }
                let limit = match a.limit {
                    None => SEARCH_DEFAULT,
                    Some(n) if (1..=SEARCH_MAX as u64).contains(&n) => {
                        usize::try_from(n).unwrap_or(SEARCH_DEFAULT)
                    }
                    Some(_) => {
                        return Err(ParseError::Arguments(format!(
                            "limit must be an integer from 1 to {SEARCH_MAX}"
                        )));
                    }
                };
                Ok(Request::Search { query, limit })
            }
            "tool_info" => {
                let a: ToolInfoArgs = typed(args).map_err(|(path, why)| {
                    ParseError::Arguments(format!(
                        "tool_info needs {{\"name\": string}}: a tool's name (`{path}`: {why})"
                    ))
                })?;
                Ok(Request::Info { name: a.name })
            }
            "synthesize_tool" if synthesize => {
                const NEEDS_NEED: &str =
                    "synthesize_tool needs `need`: what the tool should do, in plain words";
                let a: SynthesizeToolArgs = typed(args).map_err(|(path, why)| {
                    ParseError::Arguments(if why.contains("missing field `need`") {
                        NEEDS_NEED.to_string()
                    } else {
                        format!("synthesize_tool needs {{\"need\": string}} (`{path}`: {why})")
                    })
                })?;
                let need = a.need.trim().to_string();
                if need.is_empty() {
                    return Err(ParseError::Arguments(NEEDS_NEED.into()));
                }
                Ok(Request::Synthesize { need })
            }
            other => match MountedName::split(other) {
                Some(name) => Ok(Request::Mounted {
                    name,
                    arguments: args.clone(),
                }),
                None => Err(ParseError::UnknownTool(other.to_string())),
            },
        }
    }
}

/// The published input schema of a built-in, generated from the type its arguments are parsed
/// into: subschemas inlined (no `$ref`, which some hosts do not follow), an optional argument
/// described by its own type (hosts read "not required" as optional; `null` is accepted anyway),
/// no `$schema`, no title or description of the whole.
pub fn schema_of<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or_default();
    tidy(&mut value);
    match value {
        Value::Object(mut o) => {
            o.remove("title");
            o.remove("description");
            Arc::new(o)
        }
        _ => Arc::new(JsonObject::new()),
    }
}

/// Drop what `Option` adds to a schema: `null` among the types, an `anyOf` of a schema and
/// `null`, and a `null` default.
fn tidy(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    o.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = o.get("anyOf")
                && any.len() == 2
                && let Some(i) = any
                    .iter()
                    .position(|s| s.get("type") == Some(&Value::from("null")))
            {
                let kept = any[1 - i].clone();
                o.remove("anyOf");
                if let Value::Object(k) = kept {
                    for (key, value) in k {
                        o.entry(key).or_insert(value);
                    }
                }
            }
            if let Some(Value::Array(values)) = o.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            if o.get("default") == Some(&Value::Null) {
                o.remove("default");
            }
            for value in o.values_mut() {
                tidy(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap()
    }

    fn arguments_error(name: &str, v: Value) -> String {
        match Request::parse(name, &obj(v), true) {
            Err(ParseError::Arguments(e)) => e,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn an_agents_tool_cannot_declare_an_npm_server() {
        let code = format!(
            "NPM = {{\"package\": \"x\", \"version\": \"1.0.0\", \"integrity\": \
             \"sha512-a\", \"lock\": \"{}\", \"entry\": \"node_modules/x/x.js\"}}\n",
            "a".repeat(64)
        );
        let e = arguments_error("create_tool", json!({"name": "a", "code": code}));
        assert!(e.contains("autotool add"), "{e}");
        // Control: the same file without it is a request.
        let plain = json!({"name": "a", "code": "x = 1\n"});
        assert!(Request::parse("create_tool", &obj(plain), true).is_ok());
    }

    #[test]
    fn create_tool_arguments_are_named_when_wrong() {
        let code = "x = 1";
        for (args, needle) in [
            (json!({"name": "a"}), "create_tool needs `code`"),
            (json!({"name": "a", "code": 5}), "create_tool needs `code`"),
            (json!({"code": code}), "invalid tool name \"\""),
            (json!({"name": 7, "code": code}), "invalid tool name \"7\""),
            (
                json!({"name": "a__b", "code": code}),
                "invalid tool name \"a__b\"",
            ),
            (
                json!({"name": "a_", "code": code}),
                "invalid tool name \"a_\"",
            ),
            (
                json!({"name": "a", "code": code, "smoke_test": "f"}),
                "smoke_test must be an object",
            ),
            (
                json!({"name": "a", "code": code, "smoke_test": {}}),
                "smoke_test needs `function`",
            ),
            (
                json!({"name": "a", "code": code, "smoke_test": {"function": "f", "arguments": [1]}}),
                "smoke_test.arguments must be an object",
            ),
            (
                json!({"name": "a", "code": code, "verify": "always"}),
                "verify must be \"quick\"",
            ),
        ] {
            let e = arguments_error("create_tool", args.clone());
            assert!(e.contains(needle), "{args}: {e}");
        }
        let Ok(Request::Create(c)) = Request::parse(
            "create_tool",
            &obj(json!({"name": "weather", "code": code, "verify": "quick",
                        "smoke_test": {"function": "f"}})),
            false,
        ) else {
            panic!("a good create_tool did not parse");
        };
        assert_eq!(c.name, "weather");
        assert_eq!(c.thoroughness, Thoroughness::Quick);
        assert_eq!(c.smoke_test.unwrap().function, "f");
    }

    #[test]
    fn other_built_ins_and_mounted_names() {
        for args in [
            json!({"function": "add"}),
            json!({"tool": 5, "function": "add"}),
            json!({"tool": "t", "function": "add", "arguments": [1]}),
        ] {
            let e = arguments_error("run_tool", args.clone());
            assert!(
                e.contains("run_tool needs") && e.contains("\"arguments\": object"),
                "{e}"
            );
        }
        assert!(arguments_error("search_tools", json!({})).contains("needs `query`"));
        assert!(
            arguments_error("search_tools", json!({"query": "x", "limit": 0}))
                .contains("from 1 to 20")
        );
        assert!(arguments_error("synthesize_tool", json!({"need": " "})).contains("needs `need`"));
        // synthesize_tool is a name like any other when it is not offered.
        assert_eq!(
            Request::parse("synthesize_tool", &obj(json!({})), false).err(),
            Some(ParseError::UnknownTool("synthesize_tool".into()))
        );
        for unknown in ["no_such_tool", "healthy__", "__add", "", "a_b__", "a___b"] {
            assert_eq!(
                Request::parse(unknown, &obj(json!({})), true).err(),
                Some(ParseError::UnknownTool(unknown.into())),
                "{unknown:?}"
            );
        }
        let Ok(Request::Mounted { name, .. }) =
            Request::parse("hn__top_stories", &obj(json!({})), true)
        else {
            panic!("a mounted name did not parse");
        };
        assert_eq!(
            (name.tool().as_str(), name.function().as_str()),
            ("hn", "top_stories")
        );
    }
}
