//! Reading `USES` without running the code: the other tools' functions a tool calls, each a
//! mounted name (`weather__forecast`) as a string literal. What it declares is all its channel
//! offers (`crate::library::uses`).

use super::{DeclarationError, declared_literal, shape};
use autotool_policy::names::MountedName;

/// Refusals of `USES` end with this.
pub const USES_FORM: &str = "Declare the other tools' functions this tool calls once, at the \
top level of the file, as a list of string literals of mounted names: USES = \
[\"weather__forecast\"]; call them with `from autotool_uses import call` and \
`call(\"weather__forecast\", city=\"Paris\")`. Leave USES out if the tool calls no other tool.";

/// Most functions one tool may declare in `USES`.
pub const MAX_USES: usize = 16;

/// The functions a tool declares in `USES`, in order, without repeats; none when it declares
/// none.
pub fn uses(code: &str) -> Result<Vec<MountedName>, DeclarationError> {
    let Some(value) = declared_literal(code, "USES", USES_FORM)? else {
        return Ok(Vec::new());
    };
    let serde_json::Value::Array(items) = value else {
        return Err(shape("USES must be a list".into(), USES_FORM));
    };
    let mut names: Vec<MountedName> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let serde_json::Value::String(s) = item else {
            return Err(shape(
                format!("USES entry {} must be a string, not {item}", i + 1),
                USES_FORM,
            ));
        };
        let Some(name) = MountedName::split(&s) else {
            return Err(shape(
                format!(
                    "USES entry {s:?} is not a mounted function name (`tool__function`, as the \
                     tool list shows it)"
                ),
                USES_FORM,
            ));
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.len() > MAX_USES {
        return Err(shape(
            format!(
                "USES lists {} functions; a tool may call at most {MAX_USES}",
                names.len()
            ),
            USES_FORM,
        ));
    }
    Ok(names)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn read(code: &str) -> Result<Vec<String>, String> {
        uses(code)
            .map(|v| v.iter().map(ToString::to_string).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn mounted_names_are_read_once_each() {
        assert_eq!(
            read("USES = [\"weather__forecast\", 'geo__lookup', \"weather__forecast\"]\n"),
            Ok(vec!["weather__forecast".into(), "geo__lookup".into()])
        );
        assert_eq!(read("x = 1\n"), Ok(vec![]));
    }

    #[test]
    fn anything_else_is_refused_with_the_form() {
        for code in [
            "USES = \"weather__forecast\"\n",
            "USES = [\"weather\"]\n",
            "USES = [\"Weather__x\"]\n",
            "USES = [1]\n",
            "USES = [name]\n",
            "USES = []\nUSES = []\n",
            "def f():\n    USES = []\n",
        ] {
            let e = read(code).unwrap_err();
            assert!(e.ends_with(USES_FORM), "{code:?}: {e}");
        }
        let many: Vec<String> = (0..=MAX_USES).map(|i| format!("\"t{i}__f\"")).collect();
        let e = read(&format!("USES = [{}]\n", many.join(", "))).unwrap_err();
        assert!(e.contains("at most 16"), "{e}");
    }
}
