//! A Python tokenizer just deep enough to read `REQUIRED_ENV` statically: names, strings (every
//! prefix and quote form), numbers, operators, brackets, newlines and indentation, in linear
//! time however the file is written.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Name,
    Str,
    Number,
    Op,
    /// The end of a logical line.
    Newline,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) kind: Kind,
    /// The source text (for a string, prefix and quotes included).
    pub(super) text: String,
    /// A string's prefix letters as written.
    pub(super) prefix: String,
    /// A string's contents between its quotes, as written (escapes not processed).
    pub(super) body: String,
    pub(super) line: usize,
    /// Bracket depth before this token.
    pub(super) depth: usize,
    /// First token of a logical line.
    pub(super) starts_line: bool,
    /// Column of the first token of this token's logical line.
    pub(super) indent: usize,
}

impl Token {
    pub(super) fn is_op(&self, op: &str) -> bool {
        self.kind == Kind::Op && self.text == op
    }

    pub(super) fn is_name(&self, name: &str) -> bool {
        self.kind == Kind::Name && self.text == name
    }

    pub(super) fn describe(&self) -> String {
        match self.kind {
            Kind::Newline => "the end of the line".into(),
            Kind::Str => format!("the string {}", self.text),
            Kind::Name => format!("`{}`", self.text),
            Kind::Number => format!("the number {}", self.text),
            Kind::Op => format!("`{}`", self.text),
        }
    }
}

const OPS3: [&str; 5] = ["**=", "//=", ">>=", "<<=", "..."];
const OPS2: [&str; 19] = [
    "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=", ":=", "->", "**",
    "//", "<<", ">>",
];

/// Why the code could not be read into tokens; `line` is where the construct starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("line {line}: a string is not terminated")]
    UnterminatedString { line: usize },
    #[error("line {line}: an f-string field is not closed")]
    UnclosedField { line: usize },
}

/// Split `code` into tokens. Only fails on text Python would refuse too (an unterminated
/// string); anything unknown becomes a one-character operator.
pub(super) fn tokenize(code: &str) -> Result<Vec<Token>, TokenError> {
    let chars: Vec<char> = code.chars().collect();
    let mut lx = Lexer {
        chars: &chars,
        i: 0,
        line: 1,
    };
    if lx.peek(0) == Some('\u{feff}') {
        lx.i += 1;
    }
    let mut tokens: Vec<Token> = Vec::new();
    let mut depth = 0usize;
    let mut at_line_start = true;
    let mut column = 0usize;
    let mut indent = 0usize;
    let mut line_has_tokens = false;
    while let Some(c) = lx.peek(0) {
        match c {
            ' ' | '\t' | '\x0c' => {
                lx.i += 1;
                column += 1;
                continue;
            }
            '#' => {
                while lx.peek(0).is_some_and(|c| c != '\n' && c != '\r') {
                    lx.i += 1;
                }
                continue;
            }
            '\\' if matches!(lx.peek(1), Some('\n' | '\r')) => {
                lx.i += 1;
                lx.newline();
                column = 0;
                continue;
            }
            '\n' | '\r' => {
                lx.newline();
                column = 0;
                if depth == 0 && line_has_tokens {
                    tokens.push(Token::plain(
                        Kind::Newline,
                        "",
                        lx.line - 1,
                        0,
                        false,
                        indent,
                    ));
                    line_has_tokens = false;
                    at_line_start = true;
                }
                continue;
            }
            _ => {}
        }
        let starts_line = at_line_start;
        if at_line_start {
            indent = column;
            at_line_start = false;
        }
        line_has_tokens = true;
        let line = lx.line;
        let start = lx.i;
        let token = if c.is_alphabetic() || c == '_' || !c.is_ascii() {
            while lx
                .peek(0)
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || !c.is_ascii())
            {
                lx.i += 1;
            }
            let word: String = chars[start..lx.i].iter().collect();
            if matches!(lx.peek(0), Some('"' | '\'')) && is_string_prefix(&word) {
                let body = lx.string(&word)?;
                Token::string(
                    &chars[start..lx.i],
                    word,
                    body,
                    line,
                    depth,
                    starts_line,
                    indent,
                )
            } else {
                Token::plain(Kind::Name, &word, line, depth, starts_line, indent)
            }
        } else if c == '"' || c == '\'' {
            let body = lx.string("")?;
            Token::string(
                &chars[start..lx.i],
                String::new(),
                body,
                line,
                depth,
                starts_line,
                indent,
            )
        } else if c.is_ascii_digit() || (c == '.' && lx.peek(1).is_some_and(|d| d.is_ascii_digit()))
        {
            lx.number();
            let text: String = chars[start..lx.i].iter().collect();
            Token::plain(Kind::Number, &text, line, depth, starts_line, indent)
        } else {
            let rest: String = chars[start..(start + 3).min(chars.len())].iter().collect();
            let op = OPS3
                .iter()
                .chain(OPS2.iter())
                .find(|op| rest.starts_with(**op))
                .map(|op| op.to_string())
                .unwrap_or_else(|| c.to_string());
            lx.i += op.chars().count();
            let token = Token::plain(Kind::Op, &op, line, depth, starts_line, indent);
            match op.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth = depth.saturating_sub(1),
                _ => {}
            }
            token
        };
        column += lx.i - start;
        tokens.push(token);
    }
    if line_has_tokens {
        tokens.push(Token::plain(Kind::Newline, "", lx.line, 0, false, indent));
    }
    Ok(tokens)
}

fn is_string_prefix(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "r" | "u" | "b" | "f" | "t" | "br" | "rb" | "fr" | "rf" | "tr" | "rt"
    )
}

impl Token {
    fn plain(
        kind: Kind,
        text: &str,
        line: usize,
        depth: usize,
        starts_line: bool,
        indent: usize,
    ) -> Token {
        Token {
            kind,
            text: text.to_string(),
            prefix: String::new(),
            body: String::new(),
            line,
            depth,
            starts_line,
            indent,
        }
    }

    fn string(
        source: &[char],
        prefix: String,
        body: String,
        line: usize,
        depth: usize,
        starts_line: bool,
        indent: usize,
    ) -> Token {
        Token {
            kind: Kind::Str,
            text: source.iter().collect(),
            prefix,
            body,
            line,
            depth,
            starts_line,
            indent,
        }
    }
}

struct Lexer<'a> {
    chars: &'a [char],
    i: usize,
    line: usize,
}

impl Lexer<'_> {
    pub(super) fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).copied()
    }

    /// Step over one line ending (`\n`, `\r\n` or `\r`).
    fn newline(&mut self) {
        if self.peek(0) == Some('\r') && self.peek(1) == Some('\n') {
            self.i += 1;
        }
        self.i += 1;
        self.line += 1;
    }

    fn number(&mut self) {
        let hex = self.peek(0) == Some('0') && matches!(self.peek(1), Some('x' | 'X'));
        while let Some(c) = self.peek(0) {
            let exponent_sign = (c == '+' || c == '-')
                && !hex
                && self.i > 0
                && matches!(self.chars[self.i - 1], 'e' | 'E');
            if !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || exponent_sign) {
                break;
            }
            self.i += 1;
        }
    }

    /// Scan a string literal whose opening quote is at the cursor; returns its body.
    fn string(&mut self, prefix: &str) -> Result<String, TokenError> {
        let lower = prefix.to_ascii_lowercase();
        let formatted = lower.contains('f') || lower.contains('t');
        let start_line = self.line;
        let Some(quote) = self.peek(0) else {
            return Err(TokenError::UnterminatedString { line: start_line });
        };
        let triple = self.peek(1) == Some(quote) && self.peek(2) == Some(quote);
        let width = if triple { 3 } else { 1 };
        self.i += width;
        let body_start = self.i;
        let unterminated = |line| Err(TokenError::UnterminatedString { line });
        loop {
            let Some(c) = self.peek(0) else {
                return unterminated(start_line);
            };
            if c == quote
                && (!triple || (self.peek(1) == Some(quote) && self.peek(2) == Some(quote)))
            {
                let body: String = self.chars[body_start..self.i].iter().collect();
                self.i += width;
                return Ok(body);
            }
            match c {
                '\\' => {
                    self.i += 1;
                    if matches!(self.peek(0), Some('\n' | '\r')) {
                        self.newline();
                    } else {
                        self.i += 1;
                    }
                }
                '\n' | '\r' if !triple => return unterminated(start_line),
                '\n' | '\r' => self.newline(),
                '{' if formatted && self.peek(1) == Some('{') => self.i += 2,
                '{' if formatted => {
                    self.i += 1;
                    self.replacement_field()?;
                }
                _ => self.i += 1,
            }
        }
    }

    /// Inside an f-string, after a field's `{`: skip to its closing `}`, stepping over nested
    /// strings, brackets and the format spec (which may hold fields of its own).
    fn replacement_field(&mut self) -> Result<(), TokenError> {
        let start_line = self.line;
        let mut depth = 0usize;
        loop {
            let Some(c) = self.peek(0) else {
                return Err(TokenError::UnclosedField { line: start_line });
            };
            match c {
                '\'' | '"' => {
                    self.string("")?;
                }
                c if (c.is_ascii_alphabetic())
                    && matches!(self.peek(1), Some('"' | '\''))
                    && is_string_prefix(&c.to_string()) =>
                {
                    self.i += 1;
                    self.string(&c.to_string())?;
                }
                c if c.is_ascii_alphabetic()
                    && self.peek(1).is_some_and(|d| d.is_ascii_alphabetic())
                    && matches!(self.peek(2), Some('"' | '\''))
                    && is_string_prefix(&format!("{c}{}", self.peek(1).unwrap_or(' '))) =>
                {
                    let prefix = format!("{c}{}", self.peek(1).unwrap_or(' '));
                    self.i += 2;
                    self.string(&prefix)?;
                }
                '(' | '[' | '{' => {
                    depth += 1;
                    self.i += 1;
                }
                ')' | ']' => {
                    depth = depth.saturating_sub(1);
                    self.i += 1;
                }
                '}' if depth == 0 => {
                    self.i += 1;
                    return Ok(());
                }
                '}' => {
                    depth -= 1;
                    self.i += 1;
                }
                ':' if depth == 0 => {
                    self.i += 1;
                    return self.format_spec();
                }
                '\n' | '\r' => self.newline(),
                _ => self.i += 1,
            }
        }
    }

    /// A format spec: literal text up to the field's `}`, with nested `{…}` fields.
    fn format_spec(&mut self) -> Result<(), TokenError> {
        let start_line = self.line;
        loop {
            match self.peek(0) {
                None => {
                    return Err(TokenError::UnclosedField { line: start_line });
                }
                Some('}') => {
                    self.i += 1;
                    return Ok(());
                }
                Some('{') => {
                    self.i += 1;
                    self.replacement_field()?;
                }
                Some('\n' | '\r') => self.newline(),
                Some(_) => self.i += 1,
            }
        }
    }
}
