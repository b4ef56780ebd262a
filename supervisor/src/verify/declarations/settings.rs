//! Reading `SETTINGS` without running the code: the variables an added server is given that
//! are no keys (the file it keeps its data in, a log level), written by `autotool add NAME …
//! --env NAME=VALUE` after the user's yes, as one dict literal of strings. Each is checked by
//! [`autotool_policy::added::setting_problem`]: nothing autotool or the sandbox sets, nothing
//! that changes the interpreter, the loader or the network path.

use super::{DeclarationError, declared_literal, shape};
use autotool_policy::added::{MAX_SETTINGS, setting_problem};
use std::collections::BTreeMap;

/// Refusals of `SETTINGS` end with this.
pub const SETTINGS_FORM: &str = "SETTINGS is written by `autotool add NAME … --env NAME=VALUE` \
for a server the user added, as one dict literal of strings: SETTINGS = {\"MEMORY_FILE_PATH\": \
\"/home/you/notes/memory.json\"}. Keys are never settings (REQUIRED_ENV names them); add the \
server again rather than editing it.";

/// The settings a file declares; empty when it declares none.
pub fn settings(code: &str) -> Result<BTreeMap<String, String>, DeclarationError> {
    let Some(value) = declared_literal(code, "SETTINGS", SETTINGS_FORM)? else {
        return Ok(BTreeMap::new());
    };
    let serde_json::Value::Object(items) = value else {
        return Err(shape("SETTINGS must be a dict".into(), SETTINGS_FORM));
    };
    if items.len() > MAX_SETTINGS {
        return Err(shape(
            format!(
                "SETTINGS holds {} variables; at most {MAX_SETTINGS}",
                items.len()
            ),
            SETTINGS_FORM,
        ));
    }
    let mut out = BTreeMap::new();
    for (name, value) in items {
        let serde_json::Value::String(value) = value else {
            return Err(shape(
                format!("SETTINGS[{name:?}] must be a string, not {value}"),
                SETTINGS_FORM,
            ));
        };
        if let Some(problem) = setting_problem(&name, &value) {
            return Err(shape(format!("SETTINGS: {problem}"), SETTINGS_FORM));
        }
        out.insert(name, value);
    }
    Ok(out)
}

/// [`settings`], refused when one is named as a key the file declares too (the key would be
/// shadowed, or its value written in the file).
pub fn settings_beside(
    code: &str,
    keys: &[autotool_policy::names::KeyName],
) -> Result<BTreeMap<String, String>, DeclarationError> {
    let settings = settings(code)?;
    if let Some(clash) = settings
        .keys()
        .find(|s| keys.iter().any(|k| k.as_str() == s.as_str()))
    {
        return Err(shape(
            format!(
                "{clash} is declared both in REQUIRED_ENV and in SETTINGS: a key is never a setting"
            ),
            SETTINGS_FORM,
        ));
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dict_of_strings_is_read_and_each_is_checked() {
        let got = settings("SETTINGS = {\"MEMORY_FILE_PATH\": \"/v/m.json\", \"LEVEL\": \"\"}\n")
            .unwrap();
        assert_eq!(got.get("MEMORY_FILE_PATH").unwrap(), "/v/m.json");
        assert_eq!(got.get("LEVEL").unwrap(), "");
        assert!(settings("x = 1\n").unwrap().is_empty());
        for bad in [
            "SETTINGS = [\"A\"]\n",
            "SETTINGS = {\"A\": 1}\n",
            "SETTINGS = {\"LD_PRELOAD\": \"/x.so\"}\n",
            "SETTINGS = {\"PYTHONPATH\": \"/x\"}\n",
            "SETTINGS = {\"https_proxy\": \"http://x\"}\n",
            "SETTINGS = {\"A-B\": \"x\"}\n",
            "SETTINGS = {\"A\": \"x\"}\nSETTINGS = {}\n",
        ] {
            assert!(settings(bad).is_err(), "{bad}");
        }
        let key = autotool_policy::names::KeyName::parse("MEMORY_FILE_PATH").unwrap();
        let code = "SETTINGS = {\"MEMORY_FILE_PATH\": \"/v\"}\n";
        assert!(settings_beside(code, std::slice::from_ref(&key)).is_err());
        assert!(settings_beside(code, &[]).is_ok());
    }
}
