//! `autotool console [--no-open] [--port N]`: serve the console ([`crate::console`]) on
//! loopback until Ctrl-C. Its URL, the session's secret included, is the first line on stdout
//! and nowhere else; everything else goes to stderr, where logs keep it, so what stderr says
//! names the console's address without the secret ([`without_secret`]). `autotool console
//! --url` prints instead the URL of the console a running `serve --transport http --console`
//! mounts.

use crate::home::Home;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use tokio_util::sync::CancellationToken;

/// `autotool console`.
pub fn main(no_open: bool, port: u16, out: &mut impl Write) -> ExitCode {
    crate::logging::init_stderr("warn");
    let home = match Home::from_env() {
        Ok(h) => h,
        Err(e) => return super::fail("console", &e.to_string()),
    };
    super::cli::block_on("console", async move {
        let stop = CancellationToken::new();
        let signals = {
            let stop = stop.clone();
            tokio::spawn(async move {
                super::serve::wait_for_stop_signal().await;
                stop.cancel();
            })
        };
        let root = home.root().to_path_buf();
        let mut said = Ok(());
        crate::console::serve(home, port, stop, |url| {
            said = writeln!(out, "{url}").and_then(|()| out.flush());
            eprintln!(
                "autotool console: serving on {} (open the URL on stdout: it carries the \
                 session's secret); press Ctrl-C to stop",
                without_secret(url)
            );
            if !no_open {
                open(&root, url);
            }
        })
        .await?;
        signals.abort();
        Ok(said?)
    })
}

/// `url` without its query (`?s=` and the secret): the address alone, for what may be logged.
pub fn without_secret(url: &str) -> &str {
    url.split_once('?').map_or(url, |(at, _)| at)
}

/// `autotool console --url`: the URL of the console a running `serve --transport http
/// --console` mounts (the service does), from `$AUTOTOOL_HOME/console-url`.
pub fn url(out: &mut impl Write) -> ExitCode {
    let said = Home::from_env()
        .map_err(|e| e.to_string())
        .and_then(|home| crate::console::mounted::read_url(&home));
    match said {
        Ok(url) => match writeln!(out, "{url}") {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => super::fail("console", &format!("cannot write the output: {e}")),
        },
        Err(why) => super::fail("console", &why),
    }
}

/// Open the console in the user's browser when there is one (a graphical session and
/// `xdg-open`); never an error when there is not. The URL goes through a 0600 file in the home
/// (a page that sends the browser on), so the secret is on no command line other users can
/// read in `/proc`.
fn open(home: &Path, url: &str) {
    let graphical = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    if !graphical {
        eprintln!("autotool console: no graphical session; open the URL above in a browser");
        return;
    }
    let opened = redirect_page(home, url).and_then(|page| {
        std::process::Command::new("xdg-open")
            .arg(&page)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    });
    if let Err(e) = opened {
        eprintln!("autotool console: cannot open a browser ({e}); open the URL above");
    }
}

/// `$AUTOTOOL_HOME/console.html`, mode 0600: a page that sends the browser to `url`.
fn redirect_page(home: &Path, url: &str) -> std::io::Result<PathBuf> {
    let path = home.join("console.html");
    let _ = std::fs::remove_file(&path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    let url = crate::console::html::escape(url);
    writeln!(
        f,
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={url}\">\
         <title>autotool console</title><a href=\"{url}\">Open the autotool console</a>"
    )?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_may_be_logged_holds_no_secret() {
        let url = "http://127.0.0.1:41873/?s=3f0c9a";
        assert_eq!(without_secret(url), "http://127.0.0.1:41873/");
        assert_eq!(
            without_secret("http://127.0.0.1:8765/console/?s=9a41"),
            "http://127.0.0.1:8765/console/"
        );
        assert_eq!(without_secret("http://127.0.0.1:1/"), "http://127.0.0.1:1/");
    }
}
