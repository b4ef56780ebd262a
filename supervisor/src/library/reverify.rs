//! Verifying a tool's current version again, now (`autotool tools verify`): after a runtime
//! change, a key's new value, a kernel update. The gate a new version passes (lint, launch
//! confined with the keys it holds today, `tools/list`, its baseline), on a staging copy of its
//! pinned code; no new version is made and its state is left alone: the outcome is a
//! `verified` or `verification_failed` event and what is reported. The robustness probes are
//! not run again: the code passed them at the level it was created with, which is not
//! recorded (as when serve verifies a pinned version's schemas again).

use super::{CreateError, Library};
use crate::ledger::Event;
use crate::verify::{Thoroughness, Verdict, VerifyRequest};
use std::time::{Duration, Instant};

/// A current version verified again.
#[derive(Debug, Clone)]
pub struct Reverified {
    pub version: u32,
    /// What verification found (redacted).
    pub verdicts: Vec<Verdict>,
    /// What the robustness probes did.
    pub robustness: String,
    pub took: Duration,
}

impl Library {
    /// Verify `name`'s current version again now (see the module); `Ok(None)` when there is
    /// no such live tool.
    pub async fn reverify(&self, name: &str) -> Result<Option<Reverified>, CreateError> {
        let started = Instant::now();
        let Some(current) = self.registry.get(name).map_err(CreateError::Stage)? else {
            return Ok(None);
        };
        let path = self.registry.file_of(&current);
        let code = std::fs::read_to_string(&path)
            .map_err(|e| CreateError::Baseline(format!("cannot read {}: {e}", path.display())))?;
        if crate::version::code_hash(code.as_bytes()) != current.code_hash {
            return Err(CreateError::Baseline(format!(
                "{} no longer holds the code {name} v{} was verified with; serve verifies a \
                 changed file again by itself",
                path.display(),
                current.version
            )));
        }
        let python = self.runtime().await.map_err(CreateError::Runtime)?;
        let grants = self.grants(current.subject());
        let layer = self.layer(name, current.packages.as_deref()).await?;
        let staged = self
            .registry
            .stage_hashed(&current.name, &code, current.code_hash.clone())
            .map_err(CreateError::Stage)?;
        let secrets = self.secrets();
        let spec = self.spec(
            name,
            staged.dir().to_path_buf(),
            python,
            &grants.keys,
            layer,
            self.reach_granted(current.subject()).as_ref(),
        );
        if let Err(e) = self.npm_layer(&spec).await {
            let _ = self.registry.discard(staged);
            return Err(e);
        }
        let mut request = VerifyRequest::new(current.name.clone(), code, spec);
        request.thoroughness = Thoroughness::Quick;
        request.declared = Some(current.required_env.clone());
        request.redactor = secrets.redactor().cloned();
        request.baseline = match self.registry.ledger().baseline(name, false) {
            Ok(rows) => rows.into_iter().map(|r| r.obligation).collect(),
            Err(e) => {
                let _ = self.registry.discard(staged);
                return Err(CreateError::Baseline(e.to_string()));
            }
        };
        let verified = crate::verify::verify(request).await;
        let _ = self.registry.discard(staged);
        match verified {
            Ok(v) => {
                v.process.shutdown().await;
                let verdicts: Vec<Verdict> = v
                    .verdicts
                    .iter()
                    .map(|x| Verdict {
                        detail: secrets.redact(&x.detail),
                        ..x.clone()
                    })
                    .collect();
                self.audit(
                    name,
                    Event::Verified,
                    &format!(
                        "version {} verified again on request: passed ({} verdicts)",
                        current.version,
                        verdicts.len()
                    ),
                );
                Ok(Some(Reverified {
                    version: current.version,
                    verdicts,
                    robustness: v.robustness.to_string(),
                    took: started.elapsed(),
                }))
            }
            Err(failure) => {
                self.audit(
                    name,
                    Event::VerificationFailed,
                    &format!(
                        "version {} verified again on request: {}: {}",
                        current.version, failure.stage, failure.message
                    ),
                );
                Err(CreateError::Verify(failure))
            }
        }
    }
}
