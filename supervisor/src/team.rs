//! The team library: tools published to, and pulled from, the OCI registry a team already
//! runs. A registry is storage, not an authority. What travels is a verified version's record
//! and code (an OCI artifact, pinned by digest, signed by its publisher); what never travels is
//! trust earned on another machine: approvals, key grants, host allowlists, health. A pulled tool
//! passes this machine's own gate ([`crate::library::Library::create`]) and starts on probation;
//! the publisher's signature only decides whether it may be considered at all. Everything read
//! from a registry is hostile input, bounded and checked by digest.
//!
//! Layout:
//! - [`reference`][]: `oci://HOST[:PORT]/REPO[:TAG|@sha256:…]`;
//! - [`auth`]: credentials as Docker keeps them, and `WWW-Authenticate` challenges;
//! - [`client`]: the distribution API: manifests, blobs, uploads, referrers, auth, redirects;
//! - [`artifact`]: the artifact's layout, built and checked;
//! - [`sign`]: cosign-compatible signatures (ECDSA P-256) and keys;
//! - [`trust`]: this machine's signing key and the publishers it accepts, where, with which keys;
//! - [`publisher`]: who published each version, which signature counts, publisher changes;
//! - [`push`]: `autotool tools push`;
//! - [`pull`]: `autotool tools pull`: fetch, check the signature, verify here;
//! - [`follow`]: `autotool library follow|unfollow|status` and serve's polling of them;
//! - [`retry`]: when a followed library's refused digest is looked at again.

pub mod artifact;
pub mod auth;
pub mod client;
pub mod follow;
pub mod publisher;
pub mod pull;
pub mod push;
pub mod reference;
pub mod retry;
pub mod sign;
pub mod trust;

/// What went wrong, in words a user can act on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TeamError {
    #[error("{0}")]
    Reference(String),
    /// The registry could not be reached or answered an error.
    #[error("{0}")]
    Registry(String),
    /// The registry has no such manifest or blob (404).
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Auth(String),
    /// What the registry sent was refused as hostile or malformed.
    #[error("refused: {0}")]
    Refused(String),
    #[error("{0}")]
    Signature(String),
    /// The artifact carries no signature (yet: a follower retries it soon).
    #[error("{0}")]
    Unsigned(String),
    /// Refused until the user of this machine does what `cure` says.
    #[error("{message}")]
    Waiting { message: String, cure: retry::Cure },
    #[error("{0}")]
    Trust(String),
    #[error("{0}")]
    Tool(String),
    #[error("{0}")]
    Io(String),
}
