//! Reading `REQUIRED_PACKAGES` without running the code: a list of string literals, each a
//! requirement `autotool_policy::packages` accepts (a name and version specifiers, nothing that
//! could name where a package comes from).

use super::{DeclarationError, declared_literal, shape};
use autotool_policy::packages::{Requirement, parse_all};

/// Refusals of `REQUIRED_PACKAGES` end with this.
pub const PACKAGES_FORM: &str = "Declare the packages a tool needs beyond the standard \
library, mcp and httpx2 once, at the top level of the file, as a list of string literals, \
each a name with optional version specifiers: REQUIRED_PACKAGES = [\"feedparser==6.0.11\", \
\"beautifulsoup4>=4.12\"]. autotool installs them (wheels only) from the user's package \
index; leave REQUIRED_PACKAGES out if the tool needs none.";

/// The packages a tool declares in `REQUIRED_PACKAGES`, in order; none when it declares none.
pub fn required_packages(code: &str) -> Result<Vec<Requirement>, DeclarationError> {
    let Some(value) = declared_literal(code, "REQUIRED_PACKAGES", PACKAGES_FORM)? else {
        return Ok(Vec::new());
    };
    let serde_json::Value::Array(items) = value else {
        return Err(shape(
            "REQUIRED_PACKAGES must be a list".into(),
            PACKAGES_FORM,
        ));
    };
    let mut entries = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            serde_json::Value::String(s) => entries.push(s),
            other => {
                return Err(shape(
                    format!(
                        "REQUIRED_PACKAGES entry {} must be a string, not {other}",
                        i + 1
                    ),
                    PACKAGES_FORM,
                ));
            }
        }
    }
    parse_all(&entries).map_err(|e| shape(e.to_string(), PACKAGES_FORM))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_requirements_is_read() {
        let code =
            "import mcp\nREQUIRED_PACKAGES = [\"feedparser==6.0.11\", 'Beautiful_Soup4 >= 4.12']\n";
        let got: Vec<String> = required_packages(code)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["feedparser==6.0.11", "beautiful-soup4>=4.12"]);
        assert!(required_packages("x = 1\n").unwrap().is_empty());
    }

    #[test]
    fn what_cannot_be_read_or_names_a_source_is_refused_with_the_form() {
        for (code, says) in [
            ("REQUIRED_PACKAGES = \"feedparser\"\n", "must be a list"),
            ("REQUIRED_PACKAGES = [1]\n", "must be a string"),
            (
                "REQUIRED_PACKAGES = [\"evil @ https://evil.example/x.whl\"]\n",
                "REQUIRED_PACKAGES",
            ),
            (
                "REQUIRED_PACKAGES = [\"--index-url=https://evil.example\"]\n",
                "REQUIRED_PACKAGES",
            ),
            (
                "REQUIRED_PACKAGES = [\"a\"]\nREQUIRED_PACKAGES = [\"b\"]\n",
                "more than once",
            ),
            (
                "REQUIRED_PACKAGES = [\"a\"]\nREQUIRED_PACKAGES.append(\"b\")\n",
                "only place",
            ),
            ("REQUIRED_PACKAGES = [n for n in x]\n", "REQUIRED_PACKAGES"),
        ] {
            let e = required_packages(code).unwrap_err().to_string();
            assert!(e.contains(says), "{code}: {e}");
            assert!(e.ends_with(PACKAGES_FORM), "{code}: {e}");
        }
    }
}
