//! autotool's own model as the adversarial stage's writer of hostile inputs
//! ([`crate::verify::adversary`]): one bounded turn with no tools, its errors redacted of the
//! model's own keys.

use super::agent::Item;
use super::synthesize::OwnModel;
use crate::verify::adversary::{Adversarial, Adversary, BoxFuture};
use std::sync::Arc;

/// The model `model` names, writing hostile inputs.
#[derive(Debug)]
pub struct ModelAdversary {
    model: Arc<OwnModel>,
    provider: Arc<dyn super::agent::Provider>,
}

impl ModelAdversary {
    /// The stage as `model` allows it: on with its provider, or off saying why there is none
    /// (`no_model` words the reason).
    pub fn stage(model: Arc<OwnModel>, no_model: impl Fn(&str) -> String) -> Adversarial {
        match model.provider() {
            Some(provider) => Adversarial::On(Arc::new(ModelAdversary { model, provider })),
            None => Adversarial::Off(no_model(model.why_not())),
        }
    }
}

impl Adversary for ModelAdversary {
    fn describe(&self) -> String {
        self.provider.describe()
    }

    fn ask<'a>(
        &'a self,
        system: &'a str,
        question: String,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let history = [Item::User(question)];
            match self.provider.complete(system, &history, &[]).await {
                Err(e) => Err(self.model.redact(&e.to_string())),
                Ok(turn) => turn
                    .text
                    .ok_or_else(|| "the model answered with no text".into()),
            }
        })
    }
}
