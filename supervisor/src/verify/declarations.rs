//! Reading a tool's `REQUIRED_ENV` from its source, without running any of it.
//!
//! A small Python tokenizer (strings with every prefix, f-strings with nested fields, comments,
//! brackets, line continuations, indentation) turns the source into tokens with their line,
//! bracket depth and whether they start a top-level logical line. The reader then looks at
//! every place the name `REQUIRED_ENV` appears (attribute names like `self.REQUIRED_ENV` aside):
//!
//! - **Accepted:** at most one declaration, a logical line at column 0 of the form
//!   `REQUIRED_ENV = [...]` or `REQUIRED_ENV = (...)` (an annotation such as
//!   `REQUIRED_ENV: list[str] = [...]` is allowed), whose elements are plain string literals
//!   (`"X"`, `'X'`, `r"X"`, `u"X"`, triple-quoted) of names matching `^[A-Z][A-Z0-9_]*$`, comma
//!   separated, a trailing comma and comments allowed, nothing after the closing bracket. No
//!   declaration means the tool needs no keys. A name listed twice counts once.
//! - **Refused, with the expected form in the message:** any other value (a variable, a call, a
//!   set, a bare string, `("X")` which is a string, f-strings, bytes, `+` or implicit
//!   concatenation, comprehensions); a name that is not an upper-case environment variable name;
//!   a second top-level declaration (which one counts would depend on running the code); and any
//!   other binding or change of the name anywhere: inside a function, class or block, after other
//!   code on its line, `+=`, `:=`, `REQUIRED_ENV[i] = …`, `.append` and the other list methods
//!   that change it, `global`, `del`, `import`, `as`, `for REQUIRED_ENV in …`, a parameter of
//!   that name. Reading the list (`for k in REQUIRED_ENV`) is fine.
//!
//! The keys a tool receives are fixed when it is launched, so changing the list at run time could
//! never grant more; the refusals keep the declaration honest and the reader simple.

use autotool_policy::names::{KeyName, MAX_KEY_NAME};

mod literal;
mod npm;
mod packages;
mod reach;
mod settings;
mod tokens;
mod uses;

pub use npm::{NPM_FORM, npm};
pub use packages::{PACKAGES_FORM, required_packages};
pub use reach::{REACH_FORM, reach};
pub use settings::{SETTINGS_FORM, settings, settings_beside};
pub use tokens::TokenError;
use tokens::{Kind, Token, tokenize};
pub use uses::{MAX_USES, USES_FORM, uses};

/// Refusals end with this, so an agent can rewrite the line in one go.
pub const EXPECTED_FORM: &str = "Declare the keys the tool needs once, at the top level of the \
file, as a list of string literals: REQUIRED_ENV = [\"TAVILY_API_KEY\", \"OTHER_KEY\"] (names \
match ^[A-Z][A-Z0-9_]*$); leave REQUIRED_ENV out if the tool needs no keys.";

/// The declared name, as Python spells it.
const NAME: &str = "REQUIRED_ENV";
/// Methods that change a list in place.
const MUTATORS: [&str; 8] = [
    "append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
];
/// Keywords after which a name on the same statement is bound, not read.
const BINDING_KEYWORDS: [&str; 9] = [
    "global", "nonlocal", "del", "import", "def", "class", "as", "for", "lambda",
];

/// Why a declaration (`REQUIRED_ENV`, `EXAMPLES`, `NONDETERMINISTIC`) cannot be read without
/// running the code. The text says what is wrong, on which line, and ends with the expected form
/// (`form`: [`EXPECTED_FORM`] for `REQUIRED_ENV`), so an agent can rewrite the line in one go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    /// The code does not tokenize (Python would refuse it too).
    #[error("{source}. {form}")]
    Tokens {
        source: TokenError,
        form: &'static str,
    },
    /// The declaration at `line` is not of the form expected.
    #[error("line {line}: {problem}. {form}")]
    Declaration {
        line: usize,
        problem: Problem,
        form: &'static str,
    },
    /// The name is bound somewhere other than its declaration line.
    #[error(
        "line {line}: {name} is {how} ({place}); autotool reads the declaration without \
         running the code, so it must be the only place the name is set. {form}"
    )]
    SetElsewhere {
        name: &'static str,
        line: usize,
        how: String,
        place: &'static str,
        form: &'static str,
    },
    #[error(
        "{name} is declared more than once (lines {}); autotool cannot tell which one \
         counts without running the code. {form}",
        join_lines(lines)
    )]
    DeclaredTwice {
        name: &'static str,
        lines: Vec<usize>,
        form: &'static str,
    },
    /// The value reads, but is not what the declaration holds (an example without `expect`).
    #[error("{message}. {form}")]
    Shape { message: String, form: &'static str },
}

fn join_lines(lines: &[usize]) -> String {
    lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is wrong with a declaration's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("{0} is annotated but given no value")]
    AnnotatedWithoutValue(&'static str),
    #[error("{0} has no value")]
    NoValue(&'static str),
    /// A literal declaration's value is not a literal autotool reads ([`literal`]).
    #[error("{0}")]
    Literal(String),
    #[error("REQUIRED_ENV must be a list literal, but its value starts with {starts_with}")]
    NotAList { starts_with: String },
    #[error("REQUIRED_ENV must list its names, not compute them with a comprehension")]
    Comprehension,
    #[error("the list is not closed")]
    NotClosed,
    #[error(
        "two string literals side by side are joined into one (implicit concatenation); \
         separate the names with commas"
    )]
    ImplicitConcatenation,
    #[error("elements must be whole string literals, not built with `{op}`")]
    BuiltWith { op: String },
    #[error("expected `,` or `{close}` after a name, found {found}")]
    NoSeparator { close: &'static str, found: String },
    #[error("(\"NAME\") is a string in parentheses, not a tuple; write a list: [\"NAME\"]")]
    ParenthesizedString,
    #[error(
        "nothing may follow the closing `{close}` on the declaration's line (found {found}); \
         concatenation and other expressions are not read"
    )]
    Trailing { close: &'static str, found: String },
    #[error("each element must be a string literal, found {found}")]
    NotALiteral { found: String },
    #[error("element {literal} is an f-string (or t-string); write the name as a plain string")]
    Formatted { literal: String },
    #[error("element {literal} is a bytes literal; write the name as a plain string")]
    Bytes { literal: String },
    #[error(
        "{literal} is not an environment variable name autotool accepts (upper-case letters, \
         digits and `_`, starting with a letter, at most {MAX_KEY_NAME} characters)"
    )]
    NotAKeyName { literal: String },
}

/// A problem and its line, when the problem has one of its own (else the declaration's).
type Located = (Option<usize>, Problem);

/// The names a tool declares in `REQUIRED_ENV`, in order, without repeats; `Err` says what is
/// wrong, on which line, and what form is expected.
pub fn required_env(code: &str) -> Result<Vec<KeyName>, DeclarationError> {
    let tokens = tokenize(code).map_err(|source| DeclarationError::Tokens {
        source,
        form: EXPECTED_FORM,
    })?;
    Ok(read_declaration(&tokens, NAME, EXPECTED_FORM, declaration)?.unwrap_or_default())
}

/// The value of the one top-level declaration of `name` in `tokens`, read by `parse` (given
/// the tokens and the index of the declaration's name token); `None` when `name` is not
/// declared. Every other binding or change of `name`, and a second declaration, is refused;
/// the messages end with `form`.
fn read_declaration<T>(
    tokens: &[Token],
    name: &'static str,
    form: &'static str,
    parse: impl Fn(&[Token], usize) -> Result<T, Located>,
) -> Result<Option<T>, DeclarationError> {
    let context = Context::new(tokens);
    let mut declarations: Vec<(usize, T)> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if token.kind != Kind::Name || token.text != name {
            continue;
        }
        if i > 0 && tokens[i - 1].is_op(".") {
            // Another object's attribute.
            continue;
        }
        let next = tokens.get(i + 1);
        let declares = token.starts_line
            && token.indent == 0
            && next.is_some_and(|n| n.is_op("=") || n.is_op(":"));
        if declares {
            let value =
                parse(tokens, i).map_err(|(line, problem)| DeclarationError::Declaration {
                    line: line.unwrap_or(token.line),
                    problem,
                    form,
                })?;
            declarations.push((token.line, value));
        } else if let Some(how) = context.binding(tokens, i) {
            let place = if token.indent > 0 {
                "inside a function, class or block"
            } else {
                "not as a top-level declaration line of its own"
            };
            return Err(DeclarationError::SetElsewhere {
                name,
                line: token.line,
                how,
                place,
                form,
            });
        }
    }
    match declarations.len() {
        0 => Ok(None),
        1 => Ok(Some(declarations.swap_remove(0).1)),
        _ => Err(DeclarationError::DeclaredTwice {
            name,
            lines: declarations.iter().map(|(l, _)| *l).collect(),
            form,
        }),
    }
}

/// The declared value of `name` as a JSON value: any Python literal ([`literal`]), alone on
/// its declaration's line; `None` when the code does not declare it.
pub fn declared_literal(
    code: &str,
    name: &'static str,
    form: &'static str,
) -> Result<Option<serde_json::Value>, DeclarationError> {
    let tokens = tokenize(code).map_err(|source| DeclarationError::Tokens { source, form })?;
    read_declaration(&tokens, name, form, |tokens, at| {
        let start = value_start(tokens, at, name)?;
        let (value, end) = literal::read(tokens, start).map_err(located)?;
        if let Some(rest) = tokens.get(end)
            && rest.kind != Kind::Newline
        {
            return Err((
                Some(rest.line),
                Problem::Literal(format!(
                    "nothing may follow the literal on the declaration's line (found {})",
                    rest.describe()
                )),
            ));
        }
        Ok(value)
    })
}

/// Refusals of `EXAMPLES` end with this.
pub const EXAMPLES_FORM: &str = "Declare examples once, at the top level of the file, as a list \
of dict literals: EXAMPLES = [{\"function\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, \
\"expect\": 3}] (expect is the function's answer: its return value, or its text); leave \
EXAMPLES out if there are none.";

/// Refusals of `NONDETERMINISTIC` end with this.
pub const NONDETERMINISTIC_FORM: &str = "Declare the functions whose answers may differ for the \
same arguments (they read a clock, draw random numbers) once, at the top level of the file, as \
a list of string literals: NONDETERMINISTIC = [\"roll_dice\"].";

/// Most examples one tool declares.
pub const MAX_EXAMPLES: usize = 20;

/// One entry of a tool's `EXAMPLES`: a call and the answer it must give.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Example {
    pub function: String,
    #[serde(default)]
    pub arguments: serde_json::Map<String, serde_json::Value>,
    pub expect: serde_json::Value,
}

/// The examples a tool declares in `EXAMPLES`, read without running the code; none when it
/// declares none.
pub fn examples(code: &str) -> Result<Vec<Example>, DeclarationError> {
    let Some(value) = declared_literal(code, "EXAMPLES", EXAMPLES_FORM)? else {
        return Ok(Vec::new());
    };
    let serde_json::Value::Array(items) = value else {
        return Err(shape("EXAMPLES must be a list".into(), EXAMPLES_FORM));
    };
    if items.len() > MAX_EXAMPLES {
        return Err(shape(
            format!(
                "EXAMPLES lists {} examples; at most {MAX_EXAMPLES} are checked",
                items.len()
            ),
            EXAMPLES_FORM,
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let n = i + 1;
            let serde_json::Value::Object(entry) = item else {
                return Err(shape(format!("EXAMPLES entry {n} is not a dict"), EXAMPLES_FORM));
            };
            if let Some(other) = entry
                .keys()
                .find(|k| !matches!(k.as_str(), "function" | "arguments" | "expect"))
            {
                return Err(shape(format!("EXAMPLES entry {n} has the key {other:?}; the keys are function, arguments and expect"
                ), EXAMPLES_FORM));
            }
            let function = match entry.get("function") {
                Some(serde_json::Value::String(f)) => f.clone(),
                _ => {
                    return Err(shape(format!("EXAMPLES entry {n} needs \"function\": the name of a function, as a string"
                    ), EXAMPLES_FORM));
                }
            };
            let arguments = match entry.get("arguments") {
                None => serde_json::Map::new(),
                Some(serde_json::Value::Object(a)) => a.clone(),
                Some(_) => {
                    return Err(shape(format!("EXAMPLES entry {n}: \"arguments\" must be a dict of argument names to values"
                    ), EXAMPLES_FORM));
                }
            };
            let Some(expect) = entry.get("expect").cloned() else {
                return Err(shape(format!("EXAMPLES entry {n} needs \"expect\": the answer the call must give"
                ), EXAMPLES_FORM));
            };
            Ok(Example {
                function,
                arguments,
                expect,
            })
        })
        .collect()
}

/// The functions a tool declares in `NONDETERMINISTIC`; none when it declares none.
pub fn nondeterministic(code: &str) -> Result<Vec<String>, DeclarationError> {
    let Some(value) = declared_literal(code, "NONDETERMINISTIC", NONDETERMINISTIC_FORM)? else {
        return Ok(Vec::new());
    };
    let names = match value {
        serde_json::Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => Some(s),
                _ => None,
            })
            .collect::<Option<Vec<String>>>(),
        _ => None,
    };
    names.ok_or_else(|| {
        shape(
            "NONDETERMINISTIC must be a list of function names".into(),
            NONDETERMINISTIC_FORM,
        )
    })
}

fn shape(message: String, form: &'static str) -> DeclarationError {
    DeclarationError::Shape { message, form }
}

/// A literal reader's `line N: message` as a located problem.
fn located(message: String) -> Located {
    let line = message
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
        .and_then(|(n, rest)| Some((n.parse().ok()?, rest.to_string())));
    match line {
        Some((n, rest)) => (Some(n), Problem::Literal(rest)),
        None => (None, Problem::Literal(message)),
    }
}

/// The index of the first token of the value in the declaration of `name` at `tokens[at]`
/// (past an annotation and the `=`).
fn value_start(tokens: &[Token], at: usize, name: &'static str) -> Result<usize, Located> {
    let mut i = at + 1;
    if tokens[i].is_op(":") {
        // An annotation: skip to the `=` of this line.
        while i < tokens.len() && !tokens[i].is_op("=") && tokens[i].kind != Kind::Newline {
            i += 1;
        }
        if !tokens.get(i).is_some_and(|t| t.is_op("=")) {
            return Err((None, Problem::AnnotatedWithoutValue(name)));
        }
    }
    i += 1; // past `=`
    match tokens.get(i) {
        Some(_) => Ok(i),
        None => Err((None, Problem::NoValue(name))),
    }
}

/// Parse the declaration whose name token is `tokens[at]`.
fn declaration(tokens: &[Token], at: usize) -> Result<Vec<KeyName>, Located> {
    let mut i = value_start(tokens, at, NAME)?;
    let open = &tokens[i];
    let close = if open.is_op("[") {
        "]"
    } else if open.is_op("(") {
        ")"
    } else {
        return Err((
            None,
            Problem::NotAList {
                starts_with: open.describe(),
            },
        ));
    };
    let inside = open.depth + 1;
    let comprehension = tokens[i + 1..]
        .iter()
        .take_while(|t| t.depth >= inside && t.kind != Kind::Newline)
        .any(|t| t.depth == inside && t.is_name("for"));
    if comprehension {
        return Err((None, Problem::Comprehension));
    }
    i += 1;
    let mut names: Vec<KeyName> = Vec::new();
    let mut elements = 0usize;
    let mut trailing_comma = false;
    loop {
        let Some(t) = tokens.get(i).filter(|t| t.kind != Kind::Newline) else {
            return Err((None, Problem::NotClosed));
        };
        if t.is_op(close) {
            break;
        }
        names.push(element(t).map_err(|p| (Some(t.line), p))?);
        elements += 1;
        i += 1;
        let Some(after) = tokens.get(i).filter(|t| t.kind != Kind::Newline) else {
            return Err((None, Problem::NotClosed));
        };
        if after.is_op(",") {
            trailing_comma = true;
            i += 1;
        } else if after.is_op(close) {
            trailing_comma = false;
        } else if after.kind == Kind::Str {
            return Err((Some(after.line), Problem::ImplicitConcatenation));
        } else if after.is_op("+") || after.is_op("%") {
            return Err((
                Some(after.line),
                Problem::BuiltWith {
                    op: after.text.clone(),
                },
            ));
        } else {
            return Err((
                Some(after.line),
                Problem::NoSeparator {
                    close,
                    found: after.describe(),
                },
            ));
        }
    }
    if close == ")" && elements == 1 && !trailing_comma {
        return Err((None, Problem::ParenthesizedString));
    }
    if let Some(rest) = tokens.get(i + 1)
        && rest.kind != Kind::Newline
    {
        return Err((
            None,
            Problem::Trailing {
                close,
                found: rest.describe(),
            },
        ));
    }
    let mut unique: Vec<KeyName> = Vec::with_capacity(names.len());
    for name in names {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    Ok(unique)
}

/// One element of the list: a plain string literal holding an environment variable name.
fn element(t: &Token) -> Result<KeyName, Problem> {
    if t.kind != Kind::Str {
        let what = match t.kind {
            Kind::Name => format!("`{}` (a variable or call)", t.text),
            _ => t.describe(),
        };
        return Err(Problem::NotALiteral { found: what });
    }
    let prefix = t.prefix.to_ascii_lowercase();
    if prefix.contains('f') || prefix.contains('t') {
        return Err(Problem::Formatted {
            literal: t.text.clone(),
        });
    }
    if prefix.contains('b') {
        return Err(Problem::Bytes {
            literal: t.text.clone(),
        });
    }
    KeyName::parse(t.body.as_str()).map_err(|_| Problem::NotAKeyName {
        literal: t.text.clone(),
    })
}

/// Facts about each token's surroundings, computed in linear passes so that a file naming
/// `REQUIRED_ENV` thousands of times is read as quickly as any other.
struct Context {
    /// The innermost open bracket around each token.
    enclosing: Vec<Option<usize>>,
    /// For a token at depth 0: the latest binding keyword (or `in`) before it in its statement.
    keyword_before: Vec<Option<usize>>,
    /// For a token at depth 0: the first assignment operator after it in its statement.
    assign_after: Vec<Option<usize>>,
}

fn is_assignment(t: &Token) -> bool {
    t.kind == Kind::Op
        && t.text.ends_with('=')
        && !matches!(t.text.as_str(), "==" | "<=" | ">=" | "!=")
}

/// Where a statement ends, for the purposes of [`Context`]: a logical line's end, `;`, or a
/// `:` at depth 0 (a compound statement's header, a lambda, an annotation).
fn ends_statement(t: &Token) -> bool {
    t.kind == Kind::Newline || t.is_op(";") || (t.is_op(":") && t.depth == 0)
}

impl Context {
    fn new(tokens: &[Token]) -> Context {
        let n = tokens.len();
        let mut enclosing = vec![None; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut keyword_before = vec![None; n];
        let mut keyword: Option<usize> = None;
        for (i, t) in tokens.iter().enumerate() {
            enclosing[i] = stack.last().copied();
            if t.kind == Kind::Op {
                match t.text.as_str() {
                    "(" | "[" | "{" => stack.push(i),
                    ")" | "]" | "}" => {
                        stack.pop();
                    }
                    _ => {}
                }
            }
            if t.kind == Kind::Newline {
                stack.clear();
            }
            keyword_before[i] = keyword;
            if ends_statement(t) || (t.depth == 0 && is_assignment(t)) {
                keyword = None;
            } else if t.depth == 0
                && t.kind == Kind::Name
                && (t.text == "in" || BINDING_KEYWORDS.contains(&t.text.as_str()))
            {
                keyword = Some(i);
            }
        }
        let mut assign_after = vec![None; n];
        let mut assign: Option<usize> = None;
        for (i, t) in tokens.iter().enumerate().rev() {
            assign_after[i] = assign;
            if ends_statement(t) {
                assign = None;
            } else if t.depth == 0 && is_assignment(t) {
                assign = Some(i);
            }
        }
        Context {
            enclosing,
            keyword_before,
            assign_after,
        }
    }

    /// How the `REQUIRED_ENV` at `tokens[at]` (not a declaration) binds or changes the name,
    /// if it does.
    fn binding(&self, tokens: &[Token], at: usize) -> Option<String> {
        let token = &tokens[at];
        if let Some(next) = tokens.get(at + 1) {
            // `REQUIRED_ENV=…` inside brackets is a keyword argument or a parameter's default.
            if is_assignment(next) && !(next.text == "=" && token.depth > 0) {
                return Some(format!("assigned with `{}`", next.text));
            }
            if next.is_op(".")
                && let Some(method) = tokens.get(at + 2)
                && MUTATORS.contains(&method.text.as_str())
            {
                return Some(format!("changed with `.{}`", method.text));
            }
        }
        if token.depth == 0 {
            // A target further left of an assignment: `a, REQUIRED_ENV = …`,
            // `REQUIRED_ENV[0] = …`.
            if let Some(op) = self.assign_after[at] {
                return Some(format!("assigned (a target of `{}`)", tokens[op].text));
            }
            // After a keyword that binds the names following it: `global`, `del`, `import`,
            // `as`, `for … in`, `lambda`, `def`, `class`.
            return self.keyword_before[at]
                .map(|k| &tokens[k])
                .filter(|k| k.text != "in")
                .map(|k| format!("bound by `{}`", k.text));
        }
        // Inside brackets: a `def NAME(` parameter, or `from m import (…)`.
        let open = self.enclosing[at]?;
        if token.depth != tokens[open].depth + 1 || !tokens[open].is_op("(") {
            return None;
        }
        if open >= 2 && tokens[open - 2].is_name("def") {
            return Some("used as a parameter name".into());
        }
        if open >= 1 && tokens[open - 1].is_name("import") {
            return Some("bound by `import`".into());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(code: &str) -> Vec<(Kind, String)> {
        tokenize(code)
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn strings_hide_what_looks_like_code() {
        let toks = kinds("x = f\"{a['REQUIRED_ENV']:>{w}}\" + '''\nREQUIRED_ENV = 1\n'''\n");
        assert!(toks.iter().all(|(_, t)| t != "REQUIRED_ENV"), "{toks:?}");
        assert_eq!(toks.last().map(|t| t.0), Some(Kind::Newline));
    }

    #[test]
    fn nested_same_quotes_in_an_fstring() {
        let toks = kinds("x = f\"{d[\"k\"]}\"\ny = 1\n");
        let names: Vec<&str> = toks
            .iter()
            .filter(|t| t.0 == Kind::Name)
            .map(|t| t.1.as_str())
            .collect();
        assert_eq!(names, ["x", "y"]);
    }

    #[test]
    fn lines_depths_and_indents() {
        let toks = tokenize("a = [\n  1,\n]\nif a:\n    b = 2 \\\n  + 3\n").unwrap_or_default();
        let b = toks.iter().find(|t| t.text == "b");
        assert!(
            b.is_some_and(|b| b.starts_line && b.indent == 4 && b.line == 5),
            "{b:?}"
        );
        let one = toks.iter().find(|t| t.text == "1");
        assert!(one.is_some_and(|t| !t.starts_line && t.depth == 1 && t.line == 2));
        let three = toks.iter().find(|t| t.text == "3");
        assert!(three.is_some_and(|t| !t.starts_line && t.line == 6));
    }

    #[test]
    fn unterminated_strings_are_errors_not_panics() {
        assert!(tokenize("x = 'abc\n").is_err());
        assert!(tokenize("x = \"\"\"abc").is_err());
        assert!(tokenize("x = f'{abc").is_err());
        assert!(tokenize("x = '\\").is_err());
    }
}
