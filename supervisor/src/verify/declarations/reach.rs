//! Reading a tool's declared reach without running the code: `REQUIRED_HOSTS` (hosts it may
//! reach without a key, each an allowlist entry as `autotool keys allow` takes it), `READ_DIRS`
//! and `WRITE_DIRS` (directories, `~/path` or absolute), each a list of string literals read by
//! the same rules as `REQUIRED_ENV`, `REQUIRED_PACKAGES` and `USES`
//! ([`autotool_policy::reach`]).

use super::{DeclarationError, declared_literal, shape};
use autotool_policy::reach::DeclaredReach;

/// Refusals of the reach declarations end with this.
pub const REACH_FORM: &str = "Declare what the tool reaches besides its keys' hosts once each, \
at the top level of the file, as lists of string literals: REQUIRED_HOSTS = \
[\"api.open-meteo.com\", \"*.wikipedia.org\"] (a host, `*.` for its subdomains, `:port` for a \
port other than 443 and 80; no scheme, no path), READ_DIRS = [\"~/notes\"] and WRITE_DIRS = \
[\"~/exports\"] (under the home as `~/…`, or absolute). A tool that declares no host reaches no \
host without a key; leave a list out if the tool needs none of it.";

/// The strings of the list declared as `name`; none when it is not declared.
fn strings(code: &str, name: &'static str) -> Result<Vec<String>, DeclarationError> {
    let Some(value) = declared_literal(code, name, REACH_FORM)? else {
        return Ok(Vec::new());
    };
    let serde_json::Value::Array(items) = value else {
        return Err(shape(format!("{name} must be a list"), REACH_FORM));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            serde_json::Value::String(s) => Ok(s),
            other => Err(shape(
                format!("{name} entry {} must be a string, not {other}", i + 1),
                REACH_FORM,
            )),
        })
        .collect()
}

/// What the code declares it reaches; empty when it declares none of the three.
pub fn reach(code: &str) -> Result<DeclaredReach, DeclarationError> {
    let hosts = strings(code, "REQUIRED_HOSTS")?;
    let read = strings(code, "READ_DIRS")?;
    let write = strings(code, "WRITE_DIRS")?;
    DeclaredReach::parse(&hosts, &read, &write).map_err(|e| shape(e.to_string(), REACH_FORM))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_three_lists_are_read() {
        let r = reach(
            "REQUIRED_HOSTS = [\"api.open-meteo.com\", '*.wikipedia.org']\n\
             READ_DIRS = [\"~/notes\"]\nWRITE_DIRS = (\"~/exports\",)\nx = 1\n",
        )
        .unwrap();
        assert_eq!(r.hosts, ["api.open-meteo.com", "*.wikipedia.org"]);
        assert_eq!(r.read_dirs, ["~/notes"]);
        assert_eq!(r.write_dirs, ["~/exports"]);
        assert!(reach("x = 1\n").unwrap().is_empty());
    }

    #[test]
    fn anything_else_is_refused_with_the_form() {
        for code in [
            "REQUIRED_HOSTS = \"api.x.com\"\n",
            "REQUIRED_HOSTS = [\"*.com\"]\n",
            "REQUIRED_HOSTS = [\"https://api.x.com/v1\"]\n",
            "REQUIRED_HOSTS = [\"evil.com/.wikipedia.org\"]\n",
            "REQUIRED_HOSTS = [host]\n",
            "REQUIRED_HOSTS = []\nREQUIRED_HOSTS = []\n",
            "def f():\n    REQUIRED_HOSTS = []\n",
            "REQUIRED_HOSTS = []\nREQUIRED_HOSTS.append(\"evil.example\")\n",
            "READ_DIRS = [\"notes\"]\n",
            "WRITE_DIRS = [1]\n",
        ] {
            let e = reach(code).unwrap_err().to_string();
            assert!(e.ends_with(REACH_FORM), "{code:?}: {e}");
        }
    }
}
