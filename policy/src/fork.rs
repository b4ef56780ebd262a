//! The start request a supervisor sends a tool template to fork one tool.
//!
//! A template is one process that forks every tool of its runtime, so whatever it holds in its
//! memory every later child inherits: it must never hold a part of a tool's launch policy (its
//! keys, its environment, the host paths of its mounts). The request therefore carries only the
//! shape of the descriptors that come with it; the policy itself travels in a descriptor of its
//! own (a sealed memory file) that the template passes to its child unread, and that only the
//! child reads, after the fork, in its own memory.
//!
//! Descriptors, by `SCM_RIGHTS`, in this order: the tool's stdin, stdout and stderr, the status
//! socket, the policy, then the egress report socket when [`StartRequest::report`] is set, then
//! the uses channel when [`StartRequest::uses_fd`] is set (the child puts it at that number).

use crate::LaunchPolicy;
use serde::{Deserialize, Serialize};

/// Index, among a request's descriptors, of the one holding the launch policy.
pub const POLICY_INDEX: usize = 4;

/// Largest launch policy a forked child reads from its policy descriptor.
pub const MAX_POLICY_BYTES: usize = 4 << 20;

/// What a template needs to know to fork a tool: which descriptors come with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// An egress report socket follows the policy descriptor.
    pub report: bool,
    /// The descriptor number the tool's uses channel takes in the child, when it has one.
    pub uses_fd: Option<i32>,
}

impl StartRequest {
    /// The request for a tool launched with `policy`.
    pub fn of(policy: &LaunchPolicy) -> Self {
        StartRequest {
            report: policy.egress.is_some(),
            uses_fd: policy.uses_fd,
        }
    }

    /// How many descriptors come with this request.
    pub fn descriptors(&self) -> usize {
        POLICY_INDEX + 1 + usize::from(self.report) + usize::from(self.uses_fd.is_some())
    }

    /// The message's bytes.
    pub fn to_json(&self) -> Vec<u8> {
        // Two plain fields: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn policy() -> LaunchPolicy {
        LaunchPolicy::new(
            PathBuf::from("/home/u/.autotool/tools/t/1"),
            "tool.py",
            PathBuf::from("/usr/bin/python3"),
            Vec::new(),
        )
    }

    #[test]
    fn a_request_holds_nothing_of_the_policy_but_its_descriptors_shape() {
        let mut p = policy();
        p.env.insert("SECRET_KEY".into(), "value-of-the-key".into());
        p.egress = Some(crate::Egress {
            report_fd: 3,
            port: 8080,
        });
        p.uses_fd = Some(9);
        let request = StartRequest::of(&p);
        assert_eq!(
            request,
            StartRequest {
                report: true,
                uses_fd: Some(9)
            }
        );
        assert_eq!(
            request.to_json(),
            br#"{"report":true,"uses_fd":9}"#.to_vec()
        );
        assert_eq!(request.descriptors(), 7);
        let bare = StartRequest::of(&policy());
        assert_eq!(
            bare.to_json(),
            br#"{"report":false,"uses_fd":null}"#.to_vec()
        );
        assert_eq!(bare.descriptors(), 5);
    }

    #[test]
    fn a_request_with_other_fields_is_refused() {
        let parsed: Result<StartRequest, _> =
            serde_json::from_slice(br#"{"report":false,"uses_fd":null,"env":{"K":"v"}}"#);
        assert!(parsed.is_err());
    }
}
