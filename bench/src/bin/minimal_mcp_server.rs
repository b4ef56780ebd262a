//! `minimal-mcp-server`: the least an rmcp stdio server can be (no tools, no state), the
//! baseline `startup-bench` measures `autotool serve`'s start beside.

use rmcp::ServiceExt;
use rmcp::model::{ServerCapabilities, ServerConfig};
use std::process::ExitCode;

#[derive(Debug, Clone)]
struct Minimal;

impl rmcp::ServerHandler for Minimal {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn main() -> ExitCode {
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    else {
        return ExitCode::FAILURE;
    };
    runtime.block_on(async {
        match Minimal.serve(rmcp::transport::stdio()).await {
            Ok(running) => {
                let _ = running.waiting().await;
                ExitCode::SUCCESS
            }
            Err(_) => ExitCode::FAILURE,
        }
    })
}
