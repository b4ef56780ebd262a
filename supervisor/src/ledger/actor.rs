//! Who caused an event, and through which surface: stored with every event and with every
//! version (its provenance).
//!
//! Each process names its own default ([`set_default`]: `cli` for a command, `serve` for a
//! supervisor's own decisions); work done for one request runs inside [`scope`], which names
//! the host that asked (`host:<client name>` from its `initialize` or its request's `_meta`)
//! and the transport it came on. [`current`] is what an event written now is attributed to.

use serde::{Deserialize, Serialize};
use std::sync::RwLock;

/// The longest client name kept (characters); the rest is cut.
pub const MAX_CLIENT_NAME: usize = 48;

/// Who caused an event (`cli`, `host:claude-code`, `console`, `serve`, `follow`) and the
/// surface it came through (`cli`, `stdio`, `http`, `console`, `serve`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub actor: String,
    pub surface: String,
}

impl Actor {
    /// An actor and its surface as given.
    pub fn new(actor: impl Into<String>, surface: impl Into<String>) -> Actor {
        Actor {
            actor: actor.into(),
            surface: surface.into(),
        }
    }

    /// A command the user ran.
    pub fn cli() -> Actor {
        Actor::new("cli", "cli")
    }

    /// A supervisor's own decision (health, a broken pin, a tool stopped).
    pub fn serve() -> Actor {
        Actor::new("serve", "serve")
    }

    /// A supervisor following a team library.
    pub fn follow() -> Actor {
        Actor::new("follow", "serve")
    }

    /// The web console.
    pub fn console() -> Actor {
        Actor::new("console", "console")
    }

    /// A host app on `transport` (`stdio`, `http`), named by the client name it gave
    /// (untrusted: only letters, digits and `._-` are kept, the rest become `_`, cut to
    /// [`MAX_CLIENT_NAME`]); `host:unnamed` when it gave none.
    pub fn host(client_name: Option<&str>, transport: &str) -> Actor {
        let name: String = client_name
            .unwrap_or("")
            .trim()
            .chars()
            .take(MAX_CLIENT_NAME)
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name = if name.is_empty() { "unnamed" } else { &name };
        Actor::new(format!("host:{name}"), transport)
    }
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.surface.is_empty() || self.surface == self.actor {
            f.write_str(&self.actor)
        } else {
            write!(f, "{} via {}", self.actor, self.surface)
        }
    }
}

tokio::task_local! {
    static CURRENT: Actor;
}

static DEFAULT: RwLock<Option<Actor>> = RwLock::new(None);

/// Name this process's actor for events written outside any [`scope`].
pub fn set_default(actor: Actor) {
    *DEFAULT.write().unwrap_or_else(|p| p.into_inner()) = Some(actor);
}

/// Who an event written now is attributed to: the [`scope`] around this task, else the
/// process's default, else `autotool` (a process that named none).
pub fn current() -> Actor {
    CURRENT.try_with(Clone::clone).unwrap_or_else(|_| {
        DEFAULT
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| Actor::new("autotool", ""))
    })
}

/// Run `f` with events attributed to `actor`.
pub async fn scope<F: std::future::Future>(actor: Actor, f: F) -> F::Output {
    CURRENT.scope(actor, f).await
}

/// Run `f` (synchronous) with events attributed to `actor`.
pub fn sync_scope<T>(actor: Actor, f: impl FnOnce() -> T) -> T {
    CURRENT.sync_scope(actor, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_name_is_kept_to_a_safe_short_word() {
        assert_eq!(
            Actor::host(Some("claude-code"), "stdio").actor,
            "host:claude-code"
        );
        assert_eq!(
            Actor::host(Some("evil\u{1b}[31m name\nx"), "http").actor,
            "host:evil__31m_name_x"
        );
        assert_eq!(Actor::host(None, "stdio").actor, "host:unnamed");
        let long = "a".repeat(500);
        assert_eq!(
            Actor::host(Some(&long), "stdio").actor.len(),
            5 + MAX_CLIENT_NAME
        );
    }

    #[test]
    fn a_scope_names_the_actor_and_falls_back_outside_it() {
        let inside = sync_scope(Actor::console(), current);
        assert_eq!(inside, Actor::console());
        assert_ne!(current(), Actor::console());
    }
}
