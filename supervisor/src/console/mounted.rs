//! The console mounted under [`MOUNT`] on the loopback listener of `autotool serve --transport
//! http --console`: the same router and guards as on a listener of its own (Host and Origin,
//! its own secret and cookie, CSRF, the CSP), with a session of its own that serve's bearer
//! token does not stand in for. Its URL, secret included, is kept in
//! `$AUTOTOOL_HOME/console-url` (0600) while serve runs, for `autotool console --url`.

use super::{Console, ConsoleError, handle};
use crate::home::Home;
use crate::listen::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

/// The path a mounted console is served under.
pub const MOUNT: &str = "/console";

/// The console mounted on another autotool server's listener, which hands it every request
/// for a path it [owns](Mounted::owns) before its own checks. It answers on `127.0.0.1:PORT`
/// and `localhost:PORT` of that listener's port only.
#[derive(Debug, Clone)]
pub struct Mounted {
    console: Arc<Console>,
}

impl Mounted {
    /// The console for `home`, for a loopback listener on `port`, with a new session.
    pub fn new(home: Home, port: u16) -> Result<Mounted, ConsoleError> {
        Ok(Mounted {
            console: Arc::new(Console::new(home, port, MOUNT)?),
        })
    }

    /// Whether `path` is the console's: [`MOUNT`] or below it.
    pub fn owns(path: &str) -> bool {
        path.strip_prefix(MOUNT)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// Its URL, this session's secret included.
    pub fn url(&self) -> String {
        self.console.session.url()
    }

    /// Answer one request for a path it [owns](Mounted::owns).
    pub async fn call(&self, req: Request<Incoming>) -> Response<Body> {
        match handle(self.console.clone(), req).await {
            Ok(r) => r,
            Err(never) => match never {},
        }
    }
}

/// `$AUTOTOOL_HOME/console-url`: the mounted console's URL, while a serve that mounts it runs.
pub fn url_file(home: &Home) -> PathBuf {
    home.root().join("console-url")
}

/// Write `url` to [`url_file`], mode 0600 from its creation (a new file renamed into place).
pub fn write_url(home: &Home, url: &str) -> std::io::Result<()> {
    crate::home::write_private(&url_file(home), format!("{url}\n").as_bytes())
}

/// Remove [`url_file`] if it still holds `url` (another serve may have written its own since).
pub fn forget_url(home: &Home, url: &str) {
    let path = url_file(home);
    if std::fs::read_to_string(&path).is_ok_and(|held| held.trim() == url) {
        let _ = std::fs::remove_file(&path);
    }
}

/// The URL in [`url_file`], or why there is none to give: no serve mounts the console, the
/// file is readable by others, or nothing listens at it any more.
pub fn read_url(home: &Home) -> Result<String, String> {
    let path = url_file(home);
    let url = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "no running `autotool serve --transport http --console` has written {} (the \
                 service mounts the console when it listens on 127.0.0.1); or run `autotool \
                 console` for a console of its own",
                path.display()
            ));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mode = std::fs::metadata(&path)
        .map(|m| m.permissions().mode())
        .unwrap_or(0o777);
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} is readable by others (mode {:o}): its secret is spent; restart the serve that \
             wrote it",
            path.display(),
            mode & 0o777
        ));
    }
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| format!("{} does not hold a console URL", path.display()))?;
    if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        return Err(format!(
            "{} names 127.0.0.1:{port}, where nothing listens any more: start the service \
             (`autotool service install`) or `autotool serve --transport http --console`",
            path.display()
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_the_mount_and_below_are_the_console_s() {
        for ours in [
            "/console",
            "/console/",
            "/console/tool/x",
            "/console/api/library",
        ] {
            assert!(Mounted::owns(ours), "{ours}");
        }
        for not in ["/", "/mcp", "/consolex", "/console.css", "/mcp/console", ""] {
            assert!(!Mounted::owns(not), "{not}");
        }
    }

    #[test]
    fn the_url_file_is_private_and_only_a_listening_console_s_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path().to_path_buf());
        assert!(read_url(&home).unwrap_err().contains("no running"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/console/?s=abc");
        write_url(&home, &url).unwrap();
        let mode = std::fs::metadata(url_file(&home))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_url(&home).unwrap(), url);
        // Another's URL is not forgotten; its own is.
        forget_url(&home, "http://127.0.0.1:1/console/?s=other");
        assert!(url_file(&home).exists());
        // Opened to others, the file is refused (the control above passed).
        std::fs::set_permissions(url_file(&home), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_url(&home).unwrap_err().contains("readable by others"));
        std::fs::set_permissions(url_file(&home), std::fs::Permissions::from_mode(0o600)).unwrap();
        // Nothing listening there any more.
        drop(listener);
        assert!(read_url(&home).unwrap_err().contains("nothing listens"));
        forget_url(&home, &url);
        assert!(!url_file(&home).exists());
    }
}
