//! Logs: every line passes the redactor of the keys autotool holds now.

use crate::redact::Redactor;
use std::sync::{Arc, RwLock};

static CURRENT: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// The redactor every log line passes from now on (the key snapshot sets it when keys change).
pub fn set_redactor(redactor: Option<Arc<Redactor>>) {
    *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = redactor;
}

/// The redactor log lines pass now.
pub fn current_redactor() -> Option<Arc<Redactor>> {
    CURRENT.read().unwrap_or_else(|p| p.into_inner()).clone()
}
