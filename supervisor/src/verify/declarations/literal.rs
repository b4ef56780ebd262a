//! Python literals read from tokens into JSON values, without running anything: what a tool's
//! `EXAMPLES` declaration may hold.
//!
//! Accepted: `None`, `True`, `False`; integers (decimal, `0x`/`0o`/`0b`, `_` separators) and
//! floats, with a leading `-` or `+`; plain strings (any quote form, `r` and `u` prefixes, the
//! escapes Python knows apart from `\N{…}`); lists and tuples (both become arrays); dicts whose
//! keys are strings. Everything else (names, calls, f-strings, bytes, sets, operators,
//! implicit concatenation, complex numbers) is refused with the line and what was found.
//! Bounded: at most [`MAX_DEPTH`] levels of nesting and [`MAX_ITEMS`] values in all.

use super::tokens::{Kind, Token};
use serde_json::{Map, Number, Value};

/// Deepest nesting of lists, tuples and dicts.
pub(super) const MAX_DEPTH: usize = 16;
/// Most values in one literal, all levels together.
pub(super) const MAX_ITEMS: usize = 10_000;

/// A literal read from `tokens[at..]`: the value and the index just past it.
pub(super) fn read(tokens: &[Token], at: usize) -> Result<(Value, usize), String> {
    let mut reader = Reader {
        tokens,
        i: at,
        items: 0,
    };
    let value = reader.value(0)?;
    Ok((value, reader.i))
}

struct Reader<'a> {
    tokens: &'a [Token],
    i: usize,
    items: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.i).filter(|t| t.kind != Kind::Newline)
    }

    /// The line of the token at the cursor, or of the last one before the end of its line.
    fn line(&self) -> usize {
        match self.peek() {
            Some(t) => t.line,
            None => self.tokens[..self.i.min(self.tokens.len())]
                .iter()
                .rev()
                .find(|t| t.kind != Kind::Newline)
                .map_or(0, |t| t.line),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        self.items += 1;
        if self.items > MAX_ITEMS {
            return Err(format!(
                "line {}: the literal holds more than {MAX_ITEMS} values",
                self.line()
            ));
        }
        let Some(t) = self.peek().cloned() else {
            return Err(format!("line {}: a value is missing", self.line()));
        };
        let value = match t.kind {
            Kind::Str => {
                self.i += 1;
                let s = string(&t)?;
                if self.peek().is_some_and(|n| n.kind == Kind::Str) {
                    return Err(format!(
                        "line {}: two string literals side by side are joined into one (implicit concatenation); write one string",
                        t.line
                    ));
                }
                Value::String(s)
            }
            Kind::Number => {
                self.i += 1;
                number(&t.text, false, t.line)?
            }
            Kind::Op if t.text == "-" || t.text == "+" => {
                self.i += 1;
                match self.peek().cloned() {
                    Some(n) if n.kind == Kind::Number => {
                        self.i += 1;
                        number(&n.text, t.text == "-", n.line)?
                    }
                    _ => {
                        return Err(format!(
                            "line {}: `{}` may only stand before a number",
                            t.line, t.text
                        ));
                    }
                }
            }
            Kind::Name => {
                self.i += 1;
                match t.text.as_str() {
                    "None" => Value::Null,
                    "True" => Value::Bool(true),
                    "False" => Value::Bool(false),
                    other => {
                        return Err(format!(
                            "line {}: `{other}` is a name (a variable or call); only literals are read, since the code does not run",
                            t.line
                        ));
                    }
                }
            }
            Kind::Op if t.text == "[" || t.text == "(" => {
                self.nested(depth, &t)?;
                self.i += 1;
                let close = if t.text == "[" { "]" } else { ")" };
                let (items, commas) = self.sequence(depth, close)?;
                if close == ")" && items.len() == 1 && commas == 0 {
                    // `(x)` is x in parentheses.
                    return Ok(items.into_iter().next().unwrap_or(Value::Null));
                }
                Value::Array(items)
            }
            Kind::Op if t.text == "{" => {
                self.nested(depth, &t)?;
                self.i += 1;
                Value::Object(self.dict(depth)?)
            }
            _ => {
                return Err(format!(
                    "line {}: expected a literal, found {}",
                    t.line,
                    t.describe()
                ));
            }
        };
        if let Some(next) = self.peek()
            && next.kind == Kind::Op
            && !matches!(next.text.as_str(), "," | ":" | "]" | ")" | "}")
        {
            return Err(format!(
                "line {}: only literals are read, not expressions (found {} after a value)",
                next.line,
                next.describe()
            ));
        }
        Ok(value)
    }

    fn nested(&self, depth: usize, t: &Token) -> Result<(), String> {
        if depth >= MAX_DEPTH {
            return Err(format!(
                "line {}: the literal is nested more than {MAX_DEPTH} levels deep",
                t.line
            ));
        }
        Ok(())
    }

    /// Items up to `close` (consumed); how many commas separated them.
    fn sequence(&mut self, depth: usize, close: &str) -> Result<(Vec<Value>, usize), String> {
        let mut items = Vec::new();
        let mut commas = 0;
        loop {
            let Some(t) = self.peek() else {
                return Err(format!("line {}: `{close}` is missing", self.line()));
            };
            if t.is_op(close) {
                self.i += 1;
                return Ok((items, commas));
            }
            if t.is_name("for") {
                return Err(format!(
                    "line {}: comprehensions are not read; write the values out",
                    t.line
                ));
            }
            items.push(self.value(depth + 1)?);
            match self.peek() {
                Some(t) if t.is_op(",") => {
                    commas += 1;
                    self.i += 1;
                }
                Some(t) if t.is_op(close) => {}
                Some(t) => {
                    return Err(format!(
                        "line {}: expected `,` or `{close}`, found {}",
                        t.line,
                        t.describe()
                    ));
                }
                None => return Err(format!("line {}: `{close}` is missing", self.line())),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Map<String, Value>, String> {
        let mut map = Map::new();
        loop {
            let Some(t) = self.peek().cloned() else {
                return Err(format!("line {}: `}}` is missing", self.line()));
            };
            if t.is_op("}") {
                self.i += 1;
                return Ok(map);
            }
            let key = match self.value(depth + 1)? {
                Value::String(k) => k,
                other => {
                    return Err(format!(
                        "line {}: dict keys must be strings (found {other}); a set is not read either",
                        t.line
                    ));
                }
            };
            match self.peek() {
                Some(c) if c.is_op(":") => self.i += 1,
                Some(c) => {
                    return Err(format!(
                        "line {}: expected `:` after the key {key:?}, found {}",
                        c.line,
                        c.describe()
                    ));
                }
                None => return Err(format!("line {}: `}}` is missing", self.line())),
            }
            let value = self.value(depth + 1)?;
            if map.insert(key.clone(), value).is_some() {
                return Err(format!("line {}: the key {key:?} is given twice", t.line));
            }
            match self.peek() {
                Some(c) if c.is_op(",") => self.i += 1,
                Some(c) if c.is_op("}") => {}
                Some(c) => {
                    return Err(format!(
                        "line {}: expected `,` or `}}`, found {}",
                        c.line,
                        c.describe()
                    ));
                }
                None => return Err(format!("line {}: `}}` is missing", self.line())),
            }
        }
    }
}

/// A number token's value.
fn number(text: &str, negative: bool, line: usize) -> Result<Value, String> {
    let digits: String = text.chars().filter(|&c| c != '_').collect();
    let lower = digits.to_ascii_lowercase();
    let refused = || format!("line {line}: {text} is not a number autotool reads");
    if lower.ends_with('j') {
        return Err(format!("line {line}: {text} is a complex number"));
    }
    let radix = match lower.get(..2) {
        Some("0x") => Some(16),
        Some("0o") => Some(8),
        Some("0b") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let magnitude = i64::from_str_radix(&lower[2..], radix).map_err(|_| refused())?;
        return Ok(Value::from(if negative { -magnitude } else { magnitude }));
    }
    if lower.contains(['.', 'e']) {
        let x: f64 = lower.parse().map_err(|_| refused())?;
        let x = if negative { -x } else { x };
        return Number::from_f64(x).map(Value::Number).ok_or_else(refused);
    }
    if lower.len() > 1 && lower.starts_with('0') && lower.chars().any(|c| c != '0') {
        return Err(format!(
            "line {line}: {text}: leading zeros are not allowed in Python"
        ));
    }
    let magnitude: i64 = lower.parse().map_err(|_| refused())?;
    Ok(Value::from(if negative { -magnitude } else { magnitude }))
}

/// A string token's value: prefix checked, escapes processed (none for raw strings).
fn string(t: &Token) -> Result<String, String> {
    let prefix = t.prefix.to_ascii_lowercase();
    if prefix.contains('f') || prefix.contains('t') {
        return Err(format!(
            "line {}: {} is an f-string (or t-string); write a plain string",
            t.line, t.text
        ));
    }
    if prefix.contains('b') {
        return Err(format!(
            "line {}: {} is a bytes literal; write a plain string",
            t.line, t.text
        ));
    }
    if prefix.contains('r') {
        return Ok(t.body.clone());
    }
    unescape(&t.body).map_err(|e| format!("line {}: {e}", t.line))
}

/// Python's escapes in a non-raw string body.
fn unescape(body: &str) -> Result<String, String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        match e {
            '\n' => {}
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
            }
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '0'..='7' => {
                let mut code = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            code = code * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(code).ok_or("an octal escape is out of range")?);
            }
            'x' | 'u' | 'U' => {
                let width = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = (0..width).filter_map(|_| chars.next()).collect();
                let code = (hex.len() == width)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("\\{e} needs {width} hex digits"))?;
                out.push(
                    char::from_u32(code).ok_or_else(|| format!("\\{e}{hex} is not a character"))?,
                );
            }
            'N' => return Err("\\N{…} escapes are not read; write the character itself".into()),
            other => {
                // Python keeps an unknown escape as written.
                out.push('\\');
                out.push(other);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::tokens::tokenize;
    use super::*;
    use serde_json::json;

    fn lit(code: &str) -> Result<Value, String> {
        let tokens = tokenize(code).map_err(|e| e.to_string())?;
        let (value, end) = read(&tokens, 0)?;
        match tokens.get(end) {
            Some(t) if t.kind != Kind::Newline => Err(format!("trailing {}", t.describe())),
            _ => Ok(value),
        }
    }

    #[test]
    fn literals_become_json() {
        assert_eq!(
            lit(
                "[{'function': \"add\", 'arguments': {'a': 1, 'b': -2.5}, 'expect': None}, (True, False), ()]\n"
            ),
            Ok(
                json!([{"function": "add", "arguments": {"a": 1, "b": -2.5}, "expect": null}, [true, false], []])
            )
        );
        assert_eq!(lit("(1)\n"), Ok(json!(1)));
        assert_eq!(lit("(1,)\n"), Ok(json!([1])));
        assert_eq!(lit("0x1F\n"), Ok(json!(31)));
        assert_eq!(lit("1_000\n"), Ok(json!(1000)));
        assert_eq!(lit("1e3\n"), Ok(json!(1000.0)));
        assert_eq!(lit("{'a': [1,\n 2,],\n}\n"), Ok(json!({"a": [1, 2]})));
    }

    #[test]
    fn escapes_are_processed_except_in_raw_strings() {
        assert_eq!(
            lit(r#""a\n\t\x41\u00e9\U0001F600\101\\\"q""#),
            Ok(json!("a\n\tAé😀A\\\"q"))
        );
        assert_eq!(lit(r#"r"a\n""#), Ok(json!("a\\n")));
        assert_eq!(lit(r"'\d'"), Ok(json!("\\d")));
        assert!(lit(r#""\N{BULLET}""#).is_err());
        assert!(lit(r#""\x4""#).is_err());
    }

    #[test]
    fn what_is_not_a_literal_is_refused_with_the_line() {
        for code in [
            "x\n",
            "f(1)\n",
            "f'x'\n",
            "b'x'\n",
            "1 + 2\n",
            "'a' 'b'\n",
            "{1, 2}\n",
            "{1: 2}\n",
            "[x for x in y]\n",
            "1j\n",
            "007\n",
            "[1, 2\n",
            "{'a': 1, 'a': 2}\n",
            "-'a'\n",
        ] {
            let e = lit(code).expect_err(code);
            assert!(e.starts_with("line 1: "), "{code}: {e}");
        }
    }

    #[test]
    fn nesting_and_size_are_bounded() {
        let deep = format!(
            "{}{}\n",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(lit(&deep).unwrap_err().contains("nested"));
        let ok = format!("{}{}\n", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(lit(&ok).is_ok());
        let many = format!("[{}]\n", "0,".repeat(MAX_ITEMS));
        assert!(lit(&many).unwrap_err().contains("more than"));
    }
}
