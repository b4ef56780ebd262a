//! `autotool doctor`'s line on autotool's own model (read by `own_model::settings`).

use super::{Check, Status};
use crate::own_model::settings::{State, read};

/// `autotool doctor`'s line on the model in `$AUTOTOOL_HOME/.env`. No request is sent (a
/// request costs the user money; `autotool setup --model` sends one): a model that is not
/// usable is a warning, none at all is fine (`synthesize_tool` is then not offered).
pub(super) fn model_check(home: &crate::home::Home) -> Check {
    let summary = read(&home.env_file());
    let (status, fix) = match &summary.state {
        State::Ready { .. } => (Status::Ok, None),
        State::Absent | State::NoModel => (
            Status::Ok,
            Some("optional: `autotool setup --model` sets one (for synthesize_tool)".to_string()),
        ),
        State::Unreadable(_) | State::Invalid(_) => (
            Status::Warn,
            Some("`autotool setup --model` shows and rewrites it".to_string()),
        ),
    };
    Check {
        name: "model",
        status,
        detail: summary.line(),
        fix,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_doctor_line_warns_only_on_a_model_that_cannot_be_used() {
        let dir = tempfile::tempdir().unwrap();
        let home = crate::home::Home::at(dir.path());
        let none = model_check(&home);
        assert_eq!((none.name, none.status), ("model", Status::Ok));
        assert!(none.detail.contains("does not exist"), "{}", none.detail);
        assert!(none.fix.unwrap().contains("autotool setup --model"));
        std::fs::write(home.env_file(), "OPENAI_BASE_URL=not a url\n").unwrap();
        let bad = model_check(&home);
        assert_eq!(bad.status, Status::Warn, "{}", bad.detail);
        assert!(bad.detail.contains("OPENAI_BASE_URL"), "{}", bad.detail);
        std::fs::write(
            home.env_file(),
            "ANTHROPIC_API_KEY=sk-ant-0123456789abcdef\n",
        )
        .unwrap();
        let ok = model_check(&home);
        assert_eq!(ok.status, Status::Ok);
        assert!(ok.detail.contains("sk-a… (23 chars)"), "{}", ok.detail);
        assert!(!ok.detail.contains("0123456789"));
    }
}
