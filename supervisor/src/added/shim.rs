//! The Python file an added PyPI server becomes: it declares what the server may hold and
//! reach, as any tool does, and starts the package's own server. Everything in it that came
//! from the user, a config file or a registry is written as a Python literal
//! ([`autotool_policy::added::python_literal`]), so nothing can end a string and become code.

use autotool_policy::added::{python_dict, python_list, python_literal};
use autotool_policy::packages::Requirement;
use autotool_policy::reach::DeclaredReach;

/// What the file says.
#[derive(Debug, Clone)]
pub struct Shim<'a> {
    /// The requirement, pinned to one version once it is resolved.
    pub requirement: &'a Requirement,
    /// A console script's name, or `module:function`; `None`: the package's only console
    /// script (or the one named as the package).
    pub entry: Option<&'a str>,
    /// The arguments the server is started with.
    pub args: &'a [String],
    /// Its keys, by name.
    pub keys: &'a [String],
    pub reach: &'a DeclaredReach,
    /// Variables it is given that are no keys (`--env NAME=VALUE`).
    pub settings: &'a [(String, String)],
}

/// The whole file.
pub fn render(shim: &Shim<'_>) -> String {
    let req = shim.requirement;
    let source = format!("pypi:{req}");
    format!(
        r#""""{name}: the MCP server {source}, added with `autotool add`.

This file only starts the package's own server. autotool runs it confined like every tool:
with the keys, hosts and directories declared below, and nothing else.
"""

import errno
import importlib
import sys
from importlib.metadata import distribution

SOURCE = {source_lit}
REQUIRED_PACKAGES = {packages}
REQUIRED_ENV = {keys}
REQUIRED_HOSTS = {hosts}
READ_DIRS = {read}
WRITE_DIRS = {write}
SETTINGS = {settings}
PACKAGE = {package}
ENTRY = {entry}
ARGS = {args}


def _no_programs(event, args):
    """The sandbox lets no tool start a program: say so as "not found", which is what a server
    that looks for an optional program (`node -v`) expects when there is none, and fall back."""
    if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.system"):
        program = str(args[0]) if args else "?"
        raise FileNotFoundError(
            errno.ENOENT, "no program can be started in this server's sandbox", program
        )


def _server():
    """The package's server function, and the name it is started under."""
    if ":" in ENTRY:
        module, _, function = ENTRY.partition(":")
        return getattr(importlib.import_module(module), function), PACKAGE
    scripts = [e for e in distribution(PACKAGE).entry_points if e.group == "console_scripts"]
    chosen = [e for e in scripts if e.name == ENTRY] if ENTRY else scripts
    if len(chosen) > 1:
        chosen = [e for e in chosen if e.name == PACKAGE] or chosen
    if len(chosen) != 1:
        names = ", ".join(sorted(e.name for e in scripts)) or "none"
        sys.exit(
            f"{{PACKAGE}} has no single console script to start (it has: {{names}}); "
            "name one with `autotool add --entry NAME` or `--entry MODULE:FUNCTION`"
        )
    return chosen[0].load(), chosen[0].name


if __name__ == "__main__":
    sys.addaudithook(_no_programs)
    server, name = _server()
    sys.argv = [name, *ARGS]
    sys.exit(server())
"#,
        name = req.name,
        source_lit = python_literal(&source),
        packages = python_list(&[req.to_string()]),
        keys = python_list(shim.keys),
        hosts = python_list(&shim.reach.hosts),
        read = python_list(&shim.reach.read_dirs),
        write = python_list(&shim.reach.write_dirs),
        settings = python_dict(shim.settings),
        package = python_literal(&req.name),
        entry = python_literal(shim.entry.unwrap_or("")),
        args = python_list(shim.args),
    )
}

/// The declarations file of a server added from npm: the same declarations as a PyPI
/// server's file, and `NPM`, which says what node runs ([`autotool_policy::added::NpmServer`]).
/// Python never runs it (autotool starts node on the script instead); run by hand, it says so.
pub fn render_npm(
    server: &autotool_policy::added::NpmServer,
    keys: &[String],
    reach: &DeclaredReach,
    settings: &[(String, String)],
) -> String {
    let source = format!("npm:{}@{}", server.package, server.version);
    let npm = format!(
        "{{\"package\": {}, \"version\": {}, \"integrity\": {}, \"lock\": {}, \"entry\": {}, \
         \"args\": {}}}",
        python_literal(&server.package),
        python_literal(&server.version),
        python_literal(&server.integrity),
        python_literal(&server.lock),
        python_literal(&server.entry),
        python_list(&server.args),
    );
    format!(
        r#""""{package}: the MCP server {source}, added with `autotool add`.

This file only declares. autotool runs the server with node (--jitless) from its read-only
package layer, confined like every tool: with the keys, hosts and directories declared below,
and nothing else.
"""

import sys

SOURCE = {source_lit}
REQUIRED_ENV = {keys}
REQUIRED_HOSTS = {hosts}
READ_DIRS = {read}
WRITE_DIRS = {write}
SETTINGS = {settings}
NPM = {npm}


if __name__ == "__main__":
    sys.exit("this server runs on node: autotool starts it from its package layer")
"#,
        package = server.package,
        source_lit = python_literal(&source),
        keys = python_list(keys),
        hosts = python_list(&reach.hosts),
        read = python_list(&reach.read_dirs),
        write = python_list(&reach.write_dirs),
        settings = python_dict(settings),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn render_with(args: &[String], entry: Option<&str>) -> String {
        let req = Requirement::parse("mcp-server-time==2026.10.19").unwrap();
        let reach = DeclaredReach::parse(&["api.example.com"], &["~/notes"], &["~/out"]).unwrap();
        render(&Shim {
            requirement: &req,
            entry,
            args,
            keys: &["GITHUB_TOKEN".to_string()],
            reach: &reach,
            settings: &[("LOG_LEVEL".to_string(), "debug\"\nimport os".to_string())],
        })
    }

    #[test]
    fn the_file_declares_what_the_server_holds_and_reaches() {
        let code = render_with(&["--local-timezone".into(), "Etc/UTC".into()], None);
        for line in [
            "SOURCE = \"pypi:mcp-server-time==2026.10.19\"",
            "REQUIRED_PACKAGES = [\"mcp-server-time==2026.10.19\"]",
            "REQUIRED_ENV = [\"GITHUB_TOKEN\"]",
            "REQUIRED_HOSTS = [\"api.example.com\"]",
            "READ_DIRS = [\"~/notes\"]",
            "WRITE_DIRS = [\"~/out\"]",
            "PACKAGE = \"mcp-server-time\"",
            "ENTRY = \"\"",
            "ARGS = [\"--local-timezone\", \"Etc/UTC\"]",
            "SETTINGS = {\"LOG_LEVEL\": \"debug\\\"\\x0aimport os\"}",
        ] {
            assert!(code.lines().any(|l| l == line), "{line}\n{code}");
        }
        // The declarations are read back by the verifier's own parser.
        let env = crate::verify::required_env(&code).unwrap();
        assert_eq!(env.len(), 1);
        let packages = crate::verify::required_packages(&code).unwrap();
        assert_eq!(packages.len(), 1);
        let reach = crate::verify::declarations::reach(&code).unwrap();
        assert_eq!(reach.hosts, vec!["api.example.com".to_string()]);
        let settings = crate::verify::declarations::settings(&code).unwrap();
        assert_eq!(settings.get("LOG_LEVEL").unwrap(), "debug\"\nimport os");
        assert_eq!(reach.write_dirs, vec!["~/out".to_string()]);
    }

    #[test]
    fn hostile_arguments_stay_strings() {
        let evil = "\"]\nimport os\nos.system('id')\n#".to_string();
        let code = render_with(std::slice::from_ref(&evil), Some("x\"\nimport os"));
        assert!(!code.lines().any(|l| l == "import os"), "{code}");
        assert!(!code.contains("os.system('id')\n"), "{code}");
        assert!(code.contains("ARGS = [\"\\\"]\\x0aimport os\\x0aos.system('id')\\x0a#\"]"));
    }

    #[test]
    fn an_npm_servers_file_declares_and_never_runs_it() {
        let reach = DeclaredReach::parse::<&str>(&[], &[], &["~/notes"]).unwrap();
        let server = autotool_policy::added::NpmServer {
            package: "@modelcontextprotocol/server-filesystem".into(),
            version: "2026.8.31".into(),
            integrity: "sha512-kK==".into(),
            lock: "c".repeat(64),
            entry: "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js".into(),
            args: vec!["~/notes".into(), "\"}\nimport os".into()],
        };
        let code = render_npm(
            &server,
            &[],
            &reach,
            &[("MEMORY_FILE_PATH".into(), "/v/m.json".into())],
        );
        assert!(!code.lines().any(|l| l == "import os"), "{code}");
        assert_eq!(
            crate::verify::declarations::npm(&code).unwrap(),
            Some(server)
        );
        let reach = crate::verify::declarations::reach(&code).unwrap();
        assert_eq!(reach.write_dirs, vec!["~/notes".to_string()]);
        assert!(crate::verify::required_packages(&code).unwrap().is_empty());
        assert!(crate::verify::required_env(&code).unwrap().is_empty());
        let settings = crate::verify::declarations::settings(&code).unwrap();
        assert_eq!(settings.get("MEMORY_FILE_PATH").unwrap(), "/v/m.json");
    }
}
