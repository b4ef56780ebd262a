//! Reading `NPM` without running the code: the declarations file of a server added from npm
//! (`autotool add NAME npm:PACKAGE`) names, in one dict literal, the package, its version and
//! integrity, the lockfile that pins its tree, and the script node runs
//! ([`autotool_policy::added::NpmServer`]). Such a tool runs on node from its package layer;
//! Python never runs the file.

use super::{DeclarationError, declared_literal, shape};
use autotool_policy::added::NpmServer;

/// Refusals of `NPM` end with this.
pub const NPM_FORM: &str = "NPM is written by `autotool add NAME npm:PACKAGE` and names the \
package, its version, integrity and lockfile hash, and the script node runs: NPM = {\"package\": \
\"@scope/name\", \"version\": \"1.2.3\", \"integrity\": \"sha512-…\", \"lock\": \"<sha256>\", \
\"entry\": \"node_modules/@scope/name/dist/index.js\", \"args\": []}. Add the server again \
rather than editing it.";

/// The npm server a file declares in `NPM`; `None` when it declares none.
pub fn npm(code: &str) -> Result<Option<NpmServer>, DeclarationError> {
    let Some(value) = declared_literal(code, "NPM", NPM_FORM)? else {
        return Ok(None);
    };
    let server: NpmServer = serde_json::from_value(value)
        .map_err(|e| shape(format!("NPM is not a server declaration: {e}"), NPM_FORM))?;
    server
        .check()
        .map_err(|e| shape(format!("NPM: {e}"), NPM_FORM))?;
    Ok(Some(server))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dict_literal_is_read_and_checked() {
        let lock = "b".repeat(64);
        let code = format!(
            "import sys\nNPM = {{\"package\": \"is-number\", \"version\": \"7.0.0\", \
             \"integrity\": \"sha512-x\", \"lock\": \"{lock}\", \"entry\": \
             \"node_modules/is-number/index.js\", \"args\": [\"a\"]}}\n"
        );
        let got = npm(&code).unwrap().unwrap();
        assert_eq!(got.entry, "node_modules/is-number/index.js");
        assert_eq!(got.args, vec!["a".to_string()]);
        assert!(npm("x = 1\n").unwrap().is_none());
        let escaping = code.replace("node_modules/is-number/index.js", "../../etc/x.js");
        assert!(npm(&escaping).is_err());
        assert!(npm("NPM = [1]\n").is_err());
        assert!(npm(&format!("{code}NPM = {{}}\n")).is_err());
    }
}
