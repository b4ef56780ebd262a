//! A process's egress proxy: set up on the listeners the launcher hands over (confined) or on
//! a host listener (unconfined), within the start timeout; a failure stops the process.

use super::error::{describe_exit, secs};
use super::monitor::{Cause, Shared};
use super::{EXIT_GRACE, InitFailure, SandboxMode, ToolProcError, child};
use crate::egress::{EgressConfig, EgressProxy};
use std::time::Duration;

/// Why a process's egress proxy could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EgressSetupError {
    /// The listeners could not be received or served on.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the launcher did not hand over the egress listeners within {}", secs(*after))]
    NotHandedOver { after: Duration },
    #[error("the process stopped before its egress listeners were handed over")]
    Stopped,
}

/// The proxy for a process just spawned: on the listeners the launcher hands over (confined)
/// or on the host listener (unconfined), within `bound`.
pub(super) async fn start_egress(
    end: child::EgressEnd,
    config: EgressConfig,
    shared: &Shared,
    bound: Duration,
) -> Result<EgressProxy, EgressSetupError> {
    let setup = async {
        match end {
            child::EgressEnd::Report(report) => {
                let listeners = crate::egress::receive_listeners(report).await?;
                EgressProxy::serve(listeners, config)
            }
            child::EgressEnd::Host(listener) => EgressProxy::serve_on_host(listener, config),
        }
    };
    tokio::select! {
        biased;
        r = setup => Ok(r?),
        () = tokio::time::sleep(bound) => Err(EgressSetupError::NotHandedOver { after: bound }),
        _ = shared.next_cause() => Err(EgressSetupError::Stopped),
    }
}

/// Stop a process whose proxy could not be set up, and say why: the launcher's own exit (its
/// stderr names the missing kernel feature) when it failed, the proxy's failure otherwise.
pub(super) async fn egress_failed(
    what: EgressSetupError,
    shared: &Shared,
    sandbox: SandboxMode,
) -> ToolProcError {
    let cause = shared.cause_within(EXIT_GRACE).await;
    shared.fail(Cause::Refused(what.to_string()));
    shared.kill.notify_one();
    let _ = shared.exited(EXIT_GRACE).await;
    match cause {
        Some(Cause::Exited(status)) => ToolProcError::Initialize {
            reason: InitFailure::Exited {
                status,
                exit: describe_exit(status, sandbox),
            },
            stderr_tail: shared.tail(),
        },
        _ => ToolProcError::Egress {
            what,
            stderr_tail: shared.tail(),
        },
    }
}
