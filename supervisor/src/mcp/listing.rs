//! What hosts are shown: the built-in tools (their input schemas generated from the types their
//! arguments are parsed into, [`super::request`]), each mounted function as
//! `<tool>__<function>`, and the server instructions. Built from a library snapshot; the one
//! render step redacts it on the way out.

use super::request::{
    CreateToolArgs, RunToolArgs, SearchToolsArgs, SynthesizeToolArgs, ToolInfoArgs, schema_of,
};
use crate::library::Snapshot;
use crate::version::{FunctionSpec, Version};
use autotool_policy::names::{KeyName, SEPARATOR};
use rmcp::model::{Tool, ToolAnnotations};
use std::sync::Arc;

/// What `create_tool` tells the agent (the template), before the sentence on keys. It is also
/// the core of the instructions of autotool's own model in `synthesize_tool`.
pub const CREATE_TOOL_DESCRIPTION: &str = "\
Create (or replace) a tool when you need something you have no tool for: a web API, live data, \
a local service. Write a small Python MCP server; autotool lints it, runs it in a sandbox, checks \
its tools and an optional smoke test, probes each function with edge-case input from its schema \
(empty and huge strings, unicode, boundary numbers, missing optional arguments), and mounts each \
function as `<name>__<function>`. On failure you get the stage that failed and the log \
(traceback included): fix the code and call create_tool again with the same name. Template:

```python
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
import os, httpx2

REQUIRED_ENV = [\"WEATHER_API_KEY\"]   # credentials this tool needs (names only; [] if none)
REQUIRED_PACKAGES = []   # packages beyond the standard library, e.g. [\"feedparser==6.0.11\"]
REQUIRED_HOSTS = [\"api.weather.example\"]   # every host it connects to ([] if none)
mcp = MCPServer(\"weather\")

@mcp.tool()
def forecast(city: str, days: int = 3) -> str:
    \"\"\"Forecast for a city.\"\"\"
    base = os.environ.get(\"WEATHER_API_BASE\", \"https://api.weather.example\")
    r = httpx2.get(f\"{base}/forecast\", params={\"q\": city, \"days\": days},
                   headers={\"Authorization\": os.environ[\"WEATHER_API_KEY\"]})
    if r.status_code != 200:
        raise ToolError(f\"weather API said {r.status_code}: {r.text[:200]}\")
    return r.text

if __name__ == \"__main__\":
    mcp.run()
```

Rules: one file, standard library plus `mcp` and `httpx2`, and any package it declares in \
REQUIRED_PACKAGES (a list of names with optional version specifiers, no URLs: autotool asks the \
user, then installs them from the user's package index, wheels only, so pick packages that \
publish wheels; compiled ones such as lxml work); no subprocesses; \
the network only to the hosts it declares in REQUIRED_HOSTS (exact `api.x.com`, `*.x.com` for \
its subdomains, `api.x.com:8443` for another port; no scheme or path): a tool that declares no \
host reaches none, and an undeclared name is refused before it is even looked up; no files \
outside /tmp but the directories it declares, READ_DIRS = [\"~/notes\"] to read and \
WRITE_DIRS = [\"~/exports\"] to write (under the home as `~/…`, or absolute). The user is asked \
once about the hosts and directories, as about keys; type-annotate every argument; raise ToolError for errors the caller should read (an \
unexpected exception on any input the schema accepts fails the probes); read API base URLs from \
`*_API_BASE` variables so the tool can be pointed at a test server. Verdicts no author writes: \
a function must answer according to its arguments (one constant answer to distinct inputs \
fails) and give the same answer to the same arguments, unless it reads a clock or draws random \
numbers and says so at the top level: NONDETERMINISTIC = [\"roll_dice\"]. Declare examples \
the tool must meet, checked at verification: EXAMPLES = [{\"function\": \"to_fahrenheit\", \
\"arguments\": {\"celsius\": 100}, \"expect\": 212}] (literals only; expect is the return \
value; a tool declaring keys has its examples called only with verify \"thorough\"). Declare \
what an answer keeps when an example's input changes: RELATIONS = [{\"function\": \"lookup\", \
\"argument\": \"isbn\", \"transform\": \"prefix\", \"value\": \"ISBN \"}] (transforms: \
surrounding_whitespace, upper, lower, prefix, suffix for strings; reverse, rotate for lists); \
both calls must answer alike. Build on \
tools already mounted: declare the functions a tool calls, USES = [\"weather__forecast\"], and \
call them with `from autotool_uses import call` then `call(\"weather__forecast\", city=\"Paris\")` \
(returns the function's value, or its text; raises with the reason otherwise; the called tool \
runs with its own keys, which the caller never sees; no cycles). State is per \
process: a busy tool runs as several processes at once, each started afresh and stopped when \
idle, so globals and caches are not shared between calls and may vanish; keep what must last \
outside the tool (an API). `name`: 1 to 40 of a-z, \
0-9 and single underscores, starting with a letter, not ending with `_` \
(^[a-z](_?[a-z0-9])*$). `verify`: \"standard\" (default) probes tools that declare \
no keys; \"thorough\" probes even those (it may spend API quota); \"quick\" skips the probes.";

/// What `synthesize_tool` tells the host it does.
pub const SYNTHESIZE_DESCRIPTION: &str = "\
Describe a tool you need in plain words (what it should do, which API or service, which key it \
needs if any) and autotool writes it with its own model: it writes several candidates, \
verifies each, keeps the one that does best across the verdicts (safety first: a leak or a \
regression is never traded for more features), feeds each failure back for repair, and mounts \
the winner as `<tool>__<function>`. Returns what was mounted and why the other candidates lost \
(or each candidate's last failure). Use it instead of create_tool when you would rather not \
write the code yourself.";

/// How many built-in tools every list holds.
pub const BUILTINS: usize = autotool_policy::listing::BUILT_INS;

const SEARCH_TOOLS_DESCRIPTION: &str = "\
Find tools already made, by what they do, before you write one: {query, limit?}. Results are \
ranked by score = 0.5 × text relevance (BM25 and the share of your words each tool has, over its \
name, description, functions and parameters) + 0.35 × observed success rate of its recent calls \
+ 0.15 × trust (active 1, on probation 0.5), so a tool that works beats a better-described one \
that keeps failing. Each result gives the tool's functions with their input schemas, its state, \
success rate and score breakdown, and how to call it: run_tool {tool, function, arguments}, \
which works for every tool, listed or not.";

const TOOL_INFO_DESCRIPTION: &str = "\
Read a created tool's record (read-only): {name}. Its state and why (on probation, quarantined \
after failures, retired), its versions and who made each, what verification found, what it \
owes its trusted versions, its recent failures (redacted), the keys it declared and the hosts \
they may reach (names only), the hosts it may reach without a key and why, the directories \
it may read or write, the destinations its proxy refused lately, its packages, and the sandbox it runs in as measured (can it reach \
the internet or the host's files; limits; when an idle tool is stopped).";

const RUN_TOOL_DESCRIPTION: &str = "\
Call a function of a tool created with create_tool: {tool, function, arguments}. Use it when your \
tool list has not refreshed yet after create_tool, or to call any created tool by name. The \
result is the function's own. A tool that kept failing is quarantined (off the list); `force: \
true` calls it anyway.";

/// The names of the keys available, as the agent is told them.
pub fn keys_sentence(names: &[KeyName]) -> String {
    if names.is_empty() {
        "No keys are available yet: if a tool needs one, ask the user to run `autotool keys add \
         NAME`."
            .to_string()
    } else {
        format!(
            "Keys available (names only; declare the ones a tool needs in REQUIRED_ENV): {}. The \
             user is asked once whether the tool may use them; if they decline or cannot be \
             asked, the result says what they can run. For any other key, ask the user to run \
             `autotool keys add NAME`.",
            names
                .iter()
                .map(KeyName::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// What the agent is told of the list limit (`list_limit` entries, 0: none).
pub fn library_sentence(list_limit: usize) -> String {
    if list_limit == 0 {
        "Before writing a tool, search_tools may find one already made.".to_string()
    } else {
        format!(
            "Before writing a tool, search_tools may find one already made. The tool list holds \
             at most {list_limit} entries: when the library has more tools, only the most used \
             are listed; search_tools finds the others and run_tool calls them."
        )
    }
}

/// The built-in tools; `create_tool`'s description names the keys available and the list
/// limit.
pub fn builtin_tools(key_names: &[KeyName], list_limit: usize) -> Vec<Tool> {
    vec![
        Tool::new(
            "create_tool",
            format!(
                "{CREATE_TOOL_DESCRIPTION}\n\n{}\n\n{}",
                library_sentence(list_limit),
                keys_sentence(key_names)
            ),
            schema_of::<CreateToolArgs>(),
        )
        .annotate(
            ToolAnnotations::with_title("Create a tool")
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(true),
        ),
        Tool::new("run_tool", RUN_TOOL_DESCRIPTION, schema_of::<RunToolArgs>()).annotate(
            ToolAnnotations::with_title("Run a created tool")
                .read_only(false)
                .open_world(true),
        ),
        Tool::new(
            "search_tools",
            SEARCH_TOOLS_DESCRIPTION,
            schema_of::<SearchToolsArgs>(),
        )
        .annotate(
            ToolAnnotations::with_title("Search the created tools")
                .read_only(true)
                .idempotent(true)
                .open_world(false),
        ),
        Tool::new(
            "tool_info",
            TOOL_INFO_DESCRIPTION,
            schema_of::<ToolInfoArgs>(),
        )
        .annotate(
            ToolAnnotations::with_title("Read a tool's record")
                .read_only(true)
                .idempotent(true)
                .open_world(false),
        ),
    ]
}

/// `synthesize_tool`, offered when autotool has a model of its own.
pub fn synthesize_tool() -> Tool {
    Tool::new(
        "synthesize_tool",
        SYNTHESIZE_DESCRIPTION,
        schema_of::<SynthesizeToolArgs>(),
    )
    .annotate(
        ToolAnnotations::with_title("Have autotool write a tool")
            .read_only(false)
            .destructive(false)
            .open_world(true),
    )
}

/// The MCP tool for function `f` of mounted `t`. The tool's own annotations pass through (the
/// render step redacts them like everything else; they are hints, never trusted), except that
/// every created tool is marked as reaching an open world: each can reach the network through
/// its egress proxy.
pub fn mounted_tool(t: &Version, f: &FunctionSpec) -> Tool {
    let description = format!(
        "[{} v{}] {}",
        t.name,
        t.version,
        f.description.clone().unwrap_or_default()
    );
    let mut tool = Tool::new(
        format!("{}{SEPARATOR}{}", t.name, f.name),
        description,
        Arc::new(f.input_schema.clone()),
    );
    if let Some(out) = &f.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(out.clone()));
    }
    tool.title = f.title.clone();
    let own: ToolAnnotations = f
        .annotations
        .clone()
        .and_then(|a| serde_json::from_value(a).ok())
        .unwrap_or_default();
    tool.annotations = Some(ToolAnnotations::from_raw(
        own.title,
        own.read_only_hint,
        own.destructive_hint,
        own.idempotent_hint,
        Some(true),
    ));
    tool
}

/// The tool list for a snapshot: the built-ins (`synthesize_tool` among them when offered)
/// and every function of the tools it shows, sorted by name.
pub fn tool_list(snapshot: &Snapshot, key_names: &[KeyName], list_limit: usize) -> Vec<Tool> {
    let mut tools = builtin_tools(key_names, list_limit);
    if snapshot.synthesize {
        tools.push(synthesize_tool());
    }
    for t in snapshot.shown_versions() {
        for f in t.functions.specs() {
            tools.push(mounted_tool(t, &f));
        }
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// Server instructions: what autotool is, how to find and grow tools.
pub fn instructions(snapshot: &Snapshot, key_names: &[KeyName], list_limit: usize) -> String {
    let names: Vec<&str> = snapshot.shown.iter().map(|n| n.as_str()).collect();
    let library = if snapshot.hidden > 0 {
        format!(
            "Tools in your list now: {}. {} more are in the library but not listed (the list is \
             kept to {list_limit} entries, the most used tools): find them with search_tools and \
             call them with run_tool.",
            if names.is_empty() {
                "none but the built-ins".to_string()
            } else {
                names.join(", ")
            },
            snapshot.hidden,
        )
    } else {
        format!(
            "Tools mounted now: {}.",
            if names.is_empty() {
                "none yet".to_string()
            } else {
                names.join(", ")
            }
        )
    };
    format!(
        "autotool grows tools. When you need something you have no tool for, first \
         search_tools {{query}}: it finds tools already made, by what they do, ranked by \
         relevance, success rate and trust. If none fits, write one with create_tool (a small \
         Python MCP server; the description shows the template); it is verified, sandboxed and \
         mounted as <tool>__<function>, for this and every later session. If your tool list \
         does not refresh, call any created function through run_tool. {library} {}",
        keys_sentence(key_names)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_built_ins_take_the_entries_the_list_limit_counts() {
        assert_eq!(builtin_tools(&[], 40).len(), BUILTINS);
    }

    /// The published input schemas, generated from the argument types, pinned whole.
    #[test]
    fn the_built_in_schemas_are_pinned() {
        let tools = builtin_tools(&[], 40);
        let schema = |name: &str| {
            serde_json::to_value(
                tools
                    .iter()
                    .find(|t| t.name == name)
                    .map(|t| t.input_schema.clone())
                    .unwrap(),
            )
            .unwrap()
        };
        let text = |d: &str| json!({"description": d, "type": "string"});
        assert_eq!(
            schema("create_tool"),
            json!({
                "type": "object",
                "properties": {
                    "name": {
                        "description": "The tool's name; the same name again makes a new version.",
                        "type": "string", "minLength": 1, "maxLength": 40,
                        "pattern": "^[a-z](_?[a-z0-9])*$"
                    },
                    "code": text("The whole Python file."),
                    "description": text("What the tool is for."),
                    "smoke_test": {
                        "description": "A call to make before mounting; a failure fails creation.",
                        "type": "object",
                        "properties": {
                            "function": text("The function to call."),
                            "arguments": {"description": "Its arguments.", "type": "object",
                                          "additionalProperties": true}
                        },
                        "required": ["function"]
                    },
                    "verify": {
                        "description": "Edge-case probes of every function: standard for tools without keys, thorough even with keys, quick none.",
                        "type": "string", "enum": ["quick", "standard", "thorough"],
                        "default": "standard"
                    }
                },
                "required": ["name", "code"]
            }),
            "create_tool"
        );
        assert_eq!(
            schema("run_tool"),
            json!({
                "type": "object",
                "properties": {
                    "tool": text("The tool's name."),
                    "function": text("The function to call."),
                    "arguments": {"description": "Its arguments.", "type": "object",
                                  "additionalProperties": true},
                    "force": {"description": "Call a tool that is quarantined or retired (off the list) anyway.",
                              "type": "boolean"}
                },
                "required": ["tool", "function"]
            }),
            "run_tool"
        );
        assert_eq!(
            schema("search_tools"),
            json!({
                "type": "object",
                "properties": {
                    "query": text("What you need, in a few words."),
                    "limit": {"description": "How many tools to return (default 5).",
                              "type": "integer", "format": "uint64", "minimum": 1, "maximum": 20}
                },
                "required": ["query"]
            }),
            "search_tools"
        );
        assert_eq!(
            serde_json::to_value(synthesize_tool().input_schema).unwrap(),
            json!({
                "type": "object",
                "properties": {
                    "need": text("What the tool should do: the API or service, the functions and their arguments, the key it needs if any.")
                },
                "required": ["need"]
            }),
            "synthesize_tool"
        );
    }
}
