//! The names autotool gives meaning to, each a type with its one rule: a tool's name
//! ([`ToolName`]), a function's name as a tool reports it ([`FunctionName`]), the name a
//! function is mounted under for hosts ([`MountedName`]), and a key's name ([`KeyName`]).
//!
//! Every way a name enters (an agent's `create_tool`, a directory placed by hand, the ledger, the
//! command line, `REQUIRED_ENV`) parses it with these types, so the rules cannot disagree. The
//! one property they exist for: a mounted name splits back into exactly the tool and function it
//! was made of ([`MountedName::split`] is the inverse of [`MountedName::join`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Separator between a tool's name and its function's in a mounted name.
pub const SEPARATOR: &str = "__";

/// Longest tool name.
pub const MAX_TOOL_NAME: usize = 40;

/// Longest mounted name hosts accept for a tool (Claude Code, Cursor and the OpenAI APIs refuse
/// longer ones).
pub const MAX_MOUNTED_NAME: usize = 64;

/// Longest key name.
pub const MAX_KEY_NAME: usize = 128;

/// The published pattern of a tool name (for schemas and messages).
pub const TOOL_NAME_PATTERN: &str = "^[a-z](_?[a-z0-9])*$";

/// Why a name was refused. The message says the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "invalid tool name {0:?}: it must be 1 to {MAX_TOOL_NAME} characters of a-z, 0-9 and \
         single underscores, start with a letter and not end with an underscore \
         ({TOOL_NAME_PATTERN}; for example `weather` or `hacker_news`)"
    )]
    Tool(String),
    #[error(
        "function name {0:?} is not allowed: a name starts with a letter and holds only letters, \
         digits, `_` and `-`, at most {MAX_MOUNTED_NAME} characters; rename the function (or pass \
         name=\"...\" to @mcp.tool())"
    )]
    Function(String),
    #[error(
        "`{tool}{SEPARATOR}{function}` is longer than the {MAX_MOUNTED_NAME} characters hosts \
         accept for a tool name; shorten the tool or the function name"
    )]
    Mounted { tool: String, function: String },
    #[error(
        "invalid key name {0:?}: use upper-case letters, digits and `_`, starting with a letter \
         (for example `TAVILY_API_KEY`), at most {MAX_KEY_NAME} characters"
    )]
    Key(String),
}

macro_rules! name_type {
    ($ty:ident) => {
        impl $ty {
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl std::str::FromStr for $ty {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                $ty::parse(s)
            }
        }

        impl TryFrom<String> for $ty {
            type Error = NameError;
            fn try_from(s: String) -> Result<Self, NameError> {
                $ty::parse(&s)
            }
        }

        impl From<$ty> for String {
            fn from(n: $ty) -> String {
                n.0
            }
        }
    };
}

/// A tool's name: `^[a-z](_?[a-z0-9])*$`, at most [`MAX_TOOL_NAME`] characters. No `__` (the
/// separator) and no trailing `_`, so the first `__` of a mounted name is always the separator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolName(String);
name_type!(ToolName);

impl ToolName {
    /// Parse `s` under the rule.
    pub fn parse(s: &str) -> Result<ToolName, NameError> {
        let b = s.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= MAX_TOOL_NAME
            && b[0].is_ascii_lowercase()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
            && !s.contains(SEPARATOR)
            && !s.ends_with('_');
        if ok {
            Ok(ToolName(s.to_string()))
        } else {
            Err(NameError::Tool(s.to_string()))
        }
    }

    /// Whether `s` is a valid tool name.
    pub fn valid(s: &str) -> bool {
        Self::parse(s).is_ok()
    }
}

/// A function's name as the tool reports it in `tools/list`: `^[A-Za-z][A-Za-z0-9_-]*$` (what a
/// Python identifier of ASCII letters gives, and the `-` many servers' names hold:
/// `get-annotated-message`), at most [`MAX_MOUNTED_NAME`] characters; with its tool's name the
/// mounted name must also fit ([`MountedName::join`]). What every host accepts in a tool's name
/// (`^[a-zA-Z0-9_-]{1,64}$`, the strictest of them); no `.`, which some refuse.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FunctionName(String);
name_type!(FunctionName);

impl FunctionName {
    /// Parse `s` under the rule (its length is checked with the tool's, [`MountedName::join`]).
    pub fn parse(s: &str) -> Result<FunctionName, NameError> {
        let b = s.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= MAX_MOUNTED_NAME
            && b[0].is_ascii_alphabetic()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-');
        if ok {
            Ok(FunctionName(s.to_string()))
        } else {
            Err(NameError::Function(s.to_string()))
        }
    }
}

/// `<tool>__<function>`: the name a created function is mounted under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MountedName {
    tool: ToolName,
    function: FunctionName,
}

impl MountedName {
    /// The mounted name of `function` of `tool`, when it fits in [`MAX_MOUNTED_NAME`].
    pub fn join(tool: &ToolName, function: &FunctionName) -> Result<MountedName, NameError> {
        if tool.0.len() + SEPARATOR.len() + function.0.len() > MAX_MOUNTED_NAME {
            return Err(NameError::Mounted {
                tool: tool.0.clone(),
                function: function.0.clone(),
            });
        }
        Ok(MountedName {
            tool: tool.clone(),
            function: function.clone(),
        })
    }

    /// Split a mounted name into its tool and function; `None` when it is not one.
    pub fn split(s: &str) -> Option<MountedName> {
        let (tool, function) = s.split_once(SEPARATOR)?;
        let tool = ToolName::parse(tool).ok()?;
        let function = FunctionName::parse(function).ok()?;
        Self::join(&tool, &function).ok()
    }

    pub fn tool(&self) -> &ToolName {
        &self.tool
    }

    pub fn function(&self) -> &FunctionName {
        &self.function
    }
}

impl fmt::Display for MountedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{SEPARATOR}{}", self.tool, self.function)
    }
}

/// A key's name: `^[A-Z][A-Z0-9_]*$`, at most [`MAX_KEY_NAME`] characters. The same rule for
/// `autotool keys`, `REQUIRED_ENV`, approvals and allowlists, so a key is one name everywhere.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct KeyName(String);
name_type!(KeyName);

impl KeyName {
    /// Parse `s` under the rule.
    pub fn parse(s: &str) -> Result<KeyName, NameError> {
        let b = s.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= MAX_KEY_NAME
            && b[0].is_ascii_uppercase()
            && b.iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_');
        if ok {
            Ok(KeyName(s.to_string()))
        } else {
            Err(NameError::Key(s.to_string()))
        }
    }

    /// Whether `s` is a valid key name.
    pub fn valid(s: &str) -> bool {
        Self::parse(s).is_ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tool_names() {
        for ok in ["a", "weather", "hacker_news", "a1_b2", &"x".repeat(40)] {
            assert!(ToolName::valid(ok), "{ok}");
        }
        for bad in [
            "",
            "1a",
            "_a",
            "a_",
            "a__b",
            "foo__bar",
            "Weather",
            "we-ather",
            "we.ather",
            "wé",
            "../etc",
            &"x".repeat(41),
        ] {
            assert!(!ToolName::valid(bad), "{bad}");
        }
    }

    #[test]
    fn function_names() {
        for ok in [
            "f",
            "forecast",
            "get_top_stories",
            "v1_2",
            "Search",
            "a__b",
            "b_",
            "a-b",
            "get-annotated-message",
            "x-",
        ] {
            assert!(FunctionName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "_private", "9lives", "-a", "v1.2", "a b", "naïve", "a/b", "a\u{0}",
        ] {
            assert!(FunctionName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_names() {
        for ok in ["K", "TAVILY_API_KEY", "A1", "X_"] {
            assert!(KeyName::valid(ok), "{ok}");
        }
        for bad in [
            "",
            "tavily_api_key",
            "Tavily",
            "1KEY",
            "_KEY",
            "KEY-1",
            "KEY 1",
        ] {
            assert!(!KeyName::valid(bad), "{bad}");
        }
        assert!(!KeyName::valid(&"K".repeat(MAX_KEY_NAME + 1)));
    }

    /// Every pair of valid names joins into a name that splits back into the same pair, and a
    /// name that splits joins back into itself.
    #[test]
    fn a_mounted_name_splits_into_what_it_was_made_of() {
        let tools = ["a", "ab", "a_b", "x1", "hacker_news", "t2_0"];
        let functions = [
            "f", "_", "a__b", "b_", "x_y", "9", "F_1", "__", "_x", "a-b", "a-_-b", "-", "z-",
        ];
        for t in tools {
            for f in functions {
                let (Ok(tool), Ok(function)) = (ToolName::parse(t), FunctionName::parse(f)) else {
                    continue;
                };
                let joined = MountedName::join(&tool, &function).unwrap();
                let text = joined.to_string();
                assert_eq!(MountedName::split(&text), Some(joined), "{text}");
            }
        }
        // A directory named like a mounted name is no tool name, so it cannot shadow one.
        assert!(!ToolName::valid("foo__bar"));
        assert_eq!(
            MountedName::split("foo__bar__baz").map(|m| m.function().to_string()),
            Some("bar__baz".to_string())
        );
        assert_eq!(MountedName::split("foo"), None);
        assert_eq!(MountedName::split("foo___bar"), None);
        assert_eq!(MountedName::split("create_tool"), None);
    }

    #[test]
    fn the_mounted_length_is_bounded() {
        let tool = ToolName::parse(&"t".repeat(40)).unwrap();
        let fits = FunctionName::parse(&"f".repeat(22)).unwrap();
        let long = FunctionName::parse(&"f".repeat(23)).unwrap();
        assert!(MountedName::join(&tool, &fits).is_ok());
        let err = MountedName::join(&tool, &long).unwrap_err();
        assert!(
            err.to_string().contains("longer than the 64 characters"),
            "{err}"
        );
    }

    #[test]
    fn serde_applies_the_rule() {
        let ok: ToolName = serde_json::from_str("\"weather\"").unwrap();
        assert_eq!(ok, "weather");
        assert!(serde_json::from_str::<ToolName>("\"foo__bar\"").is_err());
        assert!(serde_json::from_str::<KeyName>("\"lower\"").is_err());
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"weather\"");
    }
}
