//! `autotool add NAME pypi:PACKAGE[==VERSION]|npm:PACKAGE[@VERSION] [--key K] [--host H] [--read D] [--write D]
//! [--env NAME=VALUE] [--entry E] [--upgrade] [--yes] [-- ARGS…]`: an MCP server the user already runs, behind
//! the sandbox ([`crate::added`]).

use crate::added::{self, AddError, AddRequest};
use crate::home::Home;
use crate::library::Library;
use autotool_policy::added::ServerSource;
use autotool_policy::names::{KeyName, ToolName};
use autotool_policy::reach::DeclaredReach;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

/// `autotool add`'s arguments.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The name its functions are mounted under (NAME__function): lower case letters, digits
    /// and `_`.
    pub name: String,
    /// Where the server comes from: `pypi:PACKAGE[==VERSION]` or `npm:PACKAGE[@VERSION]`
    /// (an exact version or a tag). Without a version, the newest one (for PyPI, the newest
    /// that fits the tool runtime), pinned from then on.
    pub source: String,
    /// A key it gets, by environment name (repeat for more). Store the value first with
    /// `autotool keys add KEY`; `autotool keys allow KEY HOST` limits where it may be sent.
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// A host it may reach without a key (repeat for more), as keys' lists spell them:
    /// `api.example.com`, `*.example.com`, `example.com:8443`.
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// A directory it may read (repeat for more): `~/notes` or an absolute path. Nothing else
    /// of the user's files is in its sandbox, whatever its arguments say.
    #[arg(long = "read", value_name = "DIR")]
    pub read: Vec<String>,
    /// A directory it may read and write (repeat for more).
    #[arg(long = "write", value_name = "DIR")]
    pub write: Vec<String>,
    /// A variable it is given that is no key (repeat for more): `MEMORY_FILE_PATH=/home/you/
    /// notes/memory.json`. Not secret: it is written in the tool's file and shown; give a
    /// token with `--key`. The value is taken as written (no `~` expansion).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Which of the package's console scripts starts the server, or `MODULE:FUNCTION`; by
    /// default its only console script (or the one named as the package). For npm: a name of
    /// the package's `bin`, or a script's path inside the package (`dist/index.js`).
    #[arg(long, value_name = "NAME")]
    pub entry: Option<String>,
    /// Replace a server added under this name with this source's version (newest, without
    /// one); what it will install and grant is shown and asked again.
    #[arg(long)]
    pub upgrade: bool,
    /// Do not ask: the answer is yes (for scripts; required without a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Arguments the server is started with.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

fn request(args: &AddArgs) -> anyhow::Result<AddRequest> {
    let name = ToolName::parse(&args.name).map_err(|e| anyhow::anyhow!("{}: {e}", args.name))?;
    let source = ServerSource::parse(&args.source)?;
    let keys = args
        .keys
        .iter()
        .map(|k| KeyName::parse(k).map_err(|e| anyhow::anyhow!("--key {k}: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reach = DeclaredReach::parse(&args.hosts, &args.read, &args.write)?;
    let settings = args
        .env
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow::anyhow!("--env {s:?}: write it NAME=VALUE"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(AddRequest {
        name,
        source,
        entry: args.entry.clone(),
        args: args.args.clone(),
        keys,
        reach,
        settings,
        upgrade: args.upgrade,
        imported_from: None,
    })
}

/// Ask on the terminal (stderr); No is the default.
pub(super) fn ask(question: &str) -> bool {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Plan, ask (or take `--yes`), add, and say what happened.
pub async fn run(
    library: &Library,
    request: AddRequest,
    yes: bool,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<added::Added> {
    let plan = added::plan(library, request).await?;
    let shown = plan.lines(library);
    if json {
        for line in &shown {
            eprintln!("{line}");
        }
    } else {
        for line in &shown {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "nothing was added: there is no terminal to ask at; read the above, then run again \
                 with --yes"
            );
        }
        if !ask("Add it?") {
            anyhow::bail!("nothing was added (you said no)");
        }
    }
    Ok(added::add(library, plan, "autotool add").await?)
}

fn report(added: &added::Added, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let c = &added.created;
    let functions: Vec<String> = c.functions.iter().map(|(m, _)| m.to_string()).collect();
    if json {
        let v = serde_json::json!({
            "tool": c.tool.as_str(), "version": c.version, "origin": added.origin.origin(),
            "functions": functions, "unchanged": c.unchanged, "listed": c.listed,
            "not_relayed": c.not_relayed,
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    if c.unchanged {
        writeln!(
            out,
            "{} is already this server (version {}): nothing changed.",
            c.tool, c.version
        )?;
    } else {
        writeln!(
            out,
            "Added {} (version {}, on probation): {}, verified confined.",
            c.tool,
            c.version,
            added.origin.origin()
        )?;
    }
    writeln!(out, "  functions: {}", functions.join(", "))?;
    if !c.not_relayed.is_empty() {
        writeln!(
            out,
            "  not relayed: {} (it offers them; autotool relays its functions, prompts and \
             resources, and refuses its own sampling and elicitation requests: docs/added.md)",
            c.not_relayed.join(", ")
        )?;
    }
    writeln!(
        out,
        "Every agent's autotool serve on this home mounts it now; `autotool tools show {}` shows \
         its reach and health.",
        c.tool
    )?;
    Ok(())
}

/// `autotool add`.
pub fn main(args: &AddArgs, out: &mut impl Write) -> ExitCode {
    let work = async {
        let request = request(args)?;
        let home = Home::from_env()?;
        let config = crate::config::Inputs::from_process(Default::default())
            .and_then(|inputs| crate::config::resolve(&inputs))
            .map_err(|problems| anyhow::anyhow!("{problems}"))?;
        let library = Library::new(config.settings(), home)?;
        library.runtime.start();
        let result = run(&library, request, args.yes, args.json, out).await;
        library
            .runtime
            .shutdown(std::time::Duration::from_secs(2))
            .await;
        library.pool.shutdown().await;
        let added = result.map_err(|e| match e.downcast::<AddError>() {
            Ok(e) => anyhow::anyhow!("{e}"),
            Err(e) => e,
        })?;
        report(&added, args.json, out)
    };
    super::cli::block_on("add", work)
}
