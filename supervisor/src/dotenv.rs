//! `.env` files: autotool's own model settings (`$AUTOTOOL_HOME/.env` for `serve`'s
//! `synthesize_tool`, `./.env` for `autotool run`), read into a map of variables.
//!
//! The format is the common one: `KEY=VALUE` per line, blank lines and `#` comments ignored, an
//! optional `export ` before the key, the value optionally in single quotes (taken literally) or
//! double quotes (`\n`, `\t`, `\"`, `\\` understood), and ` # comment` after an unquoted or quoted
//! value. A line that does not parse is skipped and reported by its number alone: values are
//! secrets, so no error, log line or `Debug` output ever contains one.

use std::collections::BTreeMap;
use std::path::Path;

/// Why one line was skipped. Never holds the line's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the .env file was skipped: {why}")]
pub struct LineError {
    /// 1-based.
    pub line: usize,
    pub why: &'static str,
}

/// Why a `.env` file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum DotEnvError {
    #[error("cannot read {path}: {source}; check that it is a file you may read")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A parsed `.env`: the variables, and the lines that were skipped.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DotEnv {
    pub vars: BTreeMap<String, String>,
    pub skipped: Vec<LineError>,
}

impl std::fmt::Debug for DotEnv {
    /// Names only: a value is never formatted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DotEnv")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .field("skipped", &self.skipped)
            .finish()
    }
}

impl DotEnv {
    /// Whether the file set no variable with a non-blank value.
    pub fn is_empty(&self) -> bool {
        self.vars.values().all(|v| v.trim().is_empty())
    }
}

/// Read `path`; `Ok(None)` when there is no such file.
pub fn read(path: &Path) -> Result<Option<DotEnv>, DotEnvError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(parse(&String::from_utf8_lossy(&bytes)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DotEnvError::Read {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Parse the text of a `.env` file. A later line setting the same key wins.
pub fn parse(text: &str) -> DotEnv {
    let mut env = DotEnv::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Ok((key, value)) => {
                env.vars.insert(key.to_string(), value);
            }
            Err(why) => env.skipped.push(LineError { line: i + 1, why }),
        }
    }
    env
}

fn parse_line(line: &str) -> Result<(&str, String), &'static str> {
    let line = line
        .strip_prefix("export")
        .filter(|rest| rest.starts_with([' ', '\t']))
        .map_or(line, str::trim_start);
    let (key, rest) = line.split_once('=').ok_or("it is not KEY=VALUE (no `=`)")?;
    let key = key.trim_end();
    let valid_key = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_key {
        return Err("the name before `=` is not a variable name (letters, digits and `_`)");
    }
    let rest = rest.trim_start();
    let (value, after) = match rest.chars().next() {
        Some('\'') => {
            let end = rest[1..]
                .find('\'')
                .ok_or("a single-quoted value is not closed on its line")?;
            (rest[1..1 + end].to_string(), &rest[end + 2..])
        }
        Some('"') => double_quoted(&rest[1..])?,
        _ => {
            // An unquoted value ends at ` #` (a comment) and loses surrounding blanks.
            let end = rest
                .char_indices()
                .find(|&(i, c)| c == '#' && i > 0 && rest[..i].ends_with([' ', '\t']))
                .map_or(rest.len(), |(i, _)| i);
            (rest[..end].trim_end().to_string(), "")
        }
    };
    let after = after.trim_start();
    if !after.is_empty() && !after.starts_with('#') {
        return Err("there is text after the closing quote");
    }
    Ok((key, value))
}

/// The value of a double-quoted string whose opening quote is already consumed, and the rest of
/// the line after its closing quote.
fn double_quoted(s: &str) -> Result<(String, &str), &'static str> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, 't')) => value.push('\t'),
                Some((_, 'r')) => value.push('\r'),
                Some((_, other)) => value.push(other),
                None => break,
            },
            other => value.push(other),
        }
    }
    Err("a double-quoted value is not closed on its line")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn vars(text: &str) -> Vec<(String, String)> {
        parse(text).vars.into_iter().collect()
    }

    #[test]
    fn the_common_forms() {
        let text = "\
# autotool's model
OPENAI_API_KEY=sk-plain
export OPENAI_LLM = gpt-6-sol  # the default anyway

ANTHROPIC_API_KEY='sk-ant-#not-a-comment'
QUOTED=\"a \\\"b\\\"\\n c\" # after
EMPTY=
HASH=abc#def
exported_lower=1
";
        let got = vars(text);
        let want: Vec<(String, String)> = [
            ("ANTHROPIC_API_KEY", "sk-ant-#not-a-comment"),
            ("EMPTY", ""),
            ("HASH", "abc#def"),
            ("OPENAI_API_KEY", "sk-plain"),
            ("OPENAI_LLM", "gpt-6-sol"),
            ("QUOTED", "a \"b\"\n c"),
            ("exported_lower", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        assert!(parse(text).skipped.is_empty());
    }

    #[test]
    fn bad_lines_are_skipped_by_number_without_their_text() {
        let env = parse(
            "GOOD=1\nsk-secret-without-a-name\n2BAD=x\nOPEN='sk-unclosed\nTAIL=\"v\" junk\nexportX=2\n",
        );
        assert_eq!(
            env.vars.keys().collect::<Vec<_>>(),
            ["GOOD", "exportX"],
            "{env:?}"
        );
        let lines: Vec<usize> = env.skipped.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 4, 5]);
        for e in &env.skipped {
            assert!(!e.to_string().contains("sk-"), "{e}");
        }
    }

    #[test]
    fn debug_shows_names_only_and_later_lines_win() {
        let env = parse("KEY=first-secret\nKEY=second-secret\n");
        assert_eq!(env.vars["KEY"], "second-secret");
        let shown = format!("{env:?}");
        assert!(
            shown.contains("KEY") && !shown.contains("secret"),
            "{shown}"
        );
    }

    #[test]
    fn blank_values_make_an_empty_file() {
        assert!(parse("# nothing\n\nA=\nB=  \n").is_empty());
        assert!(!parse("A=1").is_empty());
    }
}
