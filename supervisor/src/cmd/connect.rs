//! `autotool connect`: a stdio bridge to the autotool service, for hosts that only spawn stdio
//! servers. It speaks MCP on stdin/stdout and relays every message, both ways and both eras, to
//! the service's unix socket (`$AUTOTOOL_HOME/service.sock`) over streamable HTTP, with the
//! service token. One service then serves every host on the machine.

use rmcp::RoleServer;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, Transport};
use std::path::Path;

/// Relay stdin/stdout to the service at `socket` until either side ends.
pub async fn bridge(socket: &Path, token: Option<String>) -> anyhow::Result<()> {
    if std::os::unix::net::UnixStream::connect(socket).is_err() {
        anyhow::bail!(
            "the autotool service is not answering on {}: start it with `autotool service \
             install` (or `autotool serve --transport http --listen unix:{}`), and check it with \
             `autotool service status`",
            socket.display(),
            socket.display()
        );
    }
    let socket = socket
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("the socket path {} is not UTF-8", socket.display()))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!(
        "http://localhost{}",
        crate::mcp::http::MCP_PATH
    ));
    config.auth_header = token;
    let mut service = StreamableHttpClientTransport::from_unix_socket_with_config(socket, config);
    let mut host = IntoTransport::<RoleServer, _, _>::into_transport(rmcp::transport::io::stdio());
    // Sends complete in order, one after another, off the main loop: the transport takes a
    // message when its send is first polled, so order must be kept (`initialize`, then
    // `notifications/initialized`, then the rest); a send finishes once the service has
    // accepted the POST (a call's answer streams back on its own), so none holds up the next
    // for long.
    let (queue, mut sends) = tokio::sync::mpsc::unbounded_channel();
    let sender = tokio::spawn(async move {
        while let Some(sending) = sends.recv().await {
            let sending: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>> = sending;
            if let Err(e) = sending.await {
                tracing::warn!("relaying to the service: {e}");
            }
        }
    });
    loop {
        tokio::select! {
            from_host = host.receive() => match from_host {
                Some(message) => {
                    if queue.send(Box::pin(service.send(message))).is_err() {
                        break;
                    }
                }
                None => break,
            },
            from_service = service.receive() => match from_service {
                Some(message) => host.send(message).await?,
                None => {
                    tracing::warn!("the service closed the connection");
                    break;
                }
            },
        }
    }
    drop(queue);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), sender).await;
    let _ = service.close().await;
    Ok(())
}

/// `autotool connect`.
pub fn main() -> std::process::ExitCode {
    let home = match crate::home::Home::from_env() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("autotool connect: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Logs only to stderr: stdout is the host's JSON-RPC channel.
    crate::logging::init_stderr("warn");
    let token = std::fs::read_to_string(crate::mcp::http::token_path(&home))
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    let socket = crate::mcp::http::service_socket(&home);
    super::cli::block_on("connect", bridge(&socket, token))
}
