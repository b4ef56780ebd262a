//! The packages a tool may declare, and the lock they resolve to.
//!
//! A tool declares `REQUIRED_PACKAGES = ["feedparser==6.0.11", "beautifulsoup4>=4.12"]`; the
//! supervisor reads the strings without running the tool and hands them to [`parse_all`]. The
//! grammar is a strict subset of PEP 508, on purpose: a project name, optional extras and
//! optional version specifiers. Everything that would let a tool say *where* a package comes
//! from or *how* it is installed is refused with its own error: direct references and URLs
//! (packages come only from the index the user configured), environment markers and pip options.
//! A parsed [`Requirement`] prints in one canonical form, which is what the resolver is given.
//!
//! The resolver's answer, `uv pip compile --generate-hashes` output, is parsed by [`Lock::parse`]
//! into a [`Lock`]: every package pinned to one version with at least one sha256 hash, sorted by
//! name. [`Lock::to_requirements`] prints it canonically; that text is what
//! `uv pip install --require-hashes` installs and what the layer's content address is computed
//! from, so one set of packages is one layer whoever declared it. [`install_phrase`] and
//! [`Lock::describe`] are how a lock is named to the user. Everything here is pure: no network,
//! no files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Requirements one tool may declare.
pub const MAX_PACKAGES: usize = 64;
/// Characters in one declared requirement.
pub const MAX_REQUIREMENT_LEN: usize = 200;
/// Characters in one version.
pub const MAX_VERSION_LEN: usize = 64;
/// Packages in one lock (the declared ones and everything they pull in).
pub const MAX_LOCKED_PACKAGES: usize = 500;

/// What a requirement looks like, appended to every refusal so the agent can fix it at once.
const ACCEPTED: &str = "a requirement is a project name, optional [extras] and optional \
    comma-separated version specifiers (==, !=, <=, >=, <, >, ~=, ===), e.g. \
    \"feedparser==6.0.11\", \"beautifulsoup4>=4.12,<5\" or \"requests[socks]~=2.31\"";

/// PEP 503 normalisation: lowercase, every run of `-`, `_`, `.` becomes one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.extend(c.to_lowercase());
            in_run = false;
        }
    }
    out
}

/// One declared requirement, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The project name, normalised ([`normalize`]).
    pub name: String,
    /// Extras, normalised, sorted and without repeats.
    pub extras: Vec<String>,
    /// Version specifiers, in the order given.
    pub specifiers: Vec<Specifier>,
}

/// One version specifier: `>=4.12`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specifier {
    pub op: Op,
    /// The version as written (PEP 440 characters only, at most [`MAX_VERSION_LEN`]).
    pub version: String,
}

/// A version comparison operator (PEP 440).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    NotEq,
    /// `<=`
    Le,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `~=`
    Compatible,
    /// `===`
    Arbitrary,
}

impl Op {
    /// Longest operators first, so `===` is never read as `==` followed by `=`.
    const ALL: [(&'static str, Op); 8] = [
        ("===", Op::Arbitrary),
        ("==", Op::Eq),
        ("!=", Op::NotEq),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("~=", Op::Compatible),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];

    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::NotEq => "!=",
            Op::Le => "<=",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Compatible => "~=",
            Op::Arbitrary => "===",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why one declared requirement is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    #[error("the requirement is empty; {ACCEPTED}")]
    Empty,
    #[error(
        "the requirement is {len} characters long, more than the {MAX_REQUIREMENT_LEN} allowed; {ACCEPTED}"
    )]
    TooLong { len: usize },
    #[error(
        "{} is a pip option, and a tool cannot pass options to the installer: packages come \
         only from the index the user configured, installed by autotool; declare only \
         requirements ({ACCEPTED})",
        shown(text)
    )]
    PipOption { text: String },
    #[error(
        "{} is a direct reference (a URL, VCS link or path), and a tool cannot say where a \
         package comes from: packages come only from the index the user configured; name the \
         project and its version instead ({ACCEPTED})",
        shown(text)
    )]
    DirectReference { text: String },
    #[error(
        "{} has an environment marker (`;`), which is not accepted: a tool runs on one known \
         runtime, so declare the requirement without it ({ACCEPTED})",
        shown(text)
    )]
    Marker { text: String },
    #[error(
        "{} does not start with a project name: a name is letters, digits, `.`, `_` and `-`, \
         beginning and ending with a letter or digit; {ACCEPTED}",
        shown(text)
    )]
    Name { text: String },
    #[error(
        "{}: the extras {} are not a bracketed, comma-separated list of names (letters, digits, \
         `.`, `_`, `-`, e.g. `[socks,security]`); {ACCEPTED}",
        shown(text),
        shown(extras)
    )]
    Extras { text: String, extras: String },
    #[error(
        "{}: version {} after `{op}` {reason}; {ACCEPTED}",
        shown(text),
        shown(version)
    )]
    Version {
        text: String,
        op: Op,
        version: String,
        reason: &'static str,
    },
    #[error(
        "{}: a version specifier is missing after the last `,`; {ACCEPTED}",
        shown(text)
    )]
    TrailingComma { text: String },
    #[error(
        "{}: unexpected {} at character {column}; {ACCEPTED}",
        shown(text),
        shown(rest)
    )]
    Leftover {
        text: String,
        column: usize,
        rest: String,
    },
}

/// Why a tool's whole declaration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclaredError {
    #[error(
        "REQUIRED_PACKAGES lists {count} requirements, more than the {MAX_PACKAGES} a tool may \
         declare; list only the packages the tool imports (their dependencies come with them)"
    )]
    TooMany { count: usize },
    /// The entry's text is quoted by `error` itself.
    #[error("REQUIRED_PACKAGES[{index}]: {error}")]
    Entry {
        index: usize,
        text: String,
        error: RequirementError,
    },
    #[error(
        "REQUIRED_PACKAGES[{index}] {} names the project `{name}` again (REQUIRED_PACKAGES[{first}] \
         already does); give each project once, with all its specifiers in one requirement \
         (e.g. \"{name}>=1.2,<2\")",
        shown(text)
    )]
    Duplicate {
        index: usize,
        text: String,
        first: usize,
        name: String,
    },
}

/// Text from a tool, quoted and cut short so an error stays small whatever the tool wrote.
fn shown(text: &str) -> String {
    const MAX: usize = 80;
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head:?}…")
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_version_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '!' | '_' | '-')
}

/// Whether `s` is a project (or extra) name: `[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?`.
fn is_name(s: &str) -> bool {
    let first_last_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    first_last_ok(s.chars().next())
        && first_last_ok(s.chars().last())
        && s.chars().all(is_name_char)
}

/// Why `version` is not acceptable after `op`, if it is not.
fn version_problem(op: Op, version: &str) -> Option<&'static str> {
    if version.is_empty() {
        return Some("is missing");
    }
    if version.chars().count() > MAX_VERSION_LEN {
        return Some("is longer than 64 characters");
    }
    if !version.chars().all(is_version_char) {
        return Some("holds a character outside letters, digits and `. * + ! _ -`");
    }
    let body = match version.strip_suffix(".*") {
        Some(body) if matches!(op, Op::Eq | Op::NotEq) => body,
        Some(_) => return Some("ends in `.*`, which only `==` and `!=` accept"),
        None => version,
    };
    if body.contains('*') {
        return Some("holds `*` other than one trailing `.*`");
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge_ok(body.chars().next()) || !edge_ok(body.chars().last()) {
        return Some("must begin and end with a letter or digit");
    }
    if op == Op::Compatible {
        let release = body.rsplit_once('!').map_or(body, |(_, r)| r);
        let digits: String = release
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let segments = digits.split('.').take_while(|s| !s.is_empty()).count();
        if segments < 2 {
            return Some("needs at least two release segments (`~=1.4`, not `~=1`)");
        }
    }
    None
}

/// Whether the text points somewhere instead of naming a project: a URL, a VCS link, a file
/// or a path.
fn is_direct_reference(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    text.contains('@')
        || text.contains('/')
        || text.contains('\\')
        || lower.contains("://")
        || lower.contains("file:")
        || ["git+", "hg+", "svn+", "bzr+"]
            .iter()
            .any(|p| lower.starts_with(p))
}

impl Requirement {
    /// Parse one declared requirement (see the module documentation for the grammar).
    pub fn parse(text: &str) -> Result<Requirement, RequirementError> {
        let len = text.chars().count();
        if len > MAX_REQUIREMENT_LEN {
            return Err(RequirementError::TooLong { len });
        }
        let s = text.trim();
        if s.is_empty() {
            return Err(RequirementError::Empty);
        }
        let owned = || s.to_string();
        if s.starts_with('-') {
            return Err(RequirementError::PipOption { text: owned() });
        }
        if is_direct_reference(s) {
            return Err(RequirementError::DirectReference { text: owned() });
        }
        if s.contains(';') {
            return Err(RequirementError::Marker { text: owned() });
        }

        // The name: the longest run of name characters, which must end with a letter or digit.
        let name_end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
        let raw_name = &s[..name_end];
        if !is_name(raw_name) {
            return Err(RequirementError::Name { text: owned() });
        }
        let name = normalize(raw_name);
        let mut pos = skip_ws(s, name_end);

        let mut extras = Vec::new();
        if s[pos..].starts_with('[') {
            let Some(close) = s[pos..].find(']') else {
                return Err(RequirementError::Extras {
                    text: owned(),
                    extras: s[pos..].to_string(),
                });
            };
            let inner = &s[pos + 1..pos + close];
            let bad = || RequirementError::Extras {
                text: owned(),
                extras: s[pos..=pos + close].to_string(),
            };
            if !inner.trim().is_empty() {
                for extra in inner.split(',') {
                    let extra = extra.trim();
                    if !is_name(extra) {
                        return Err(bad());
                    }
                    extras.push(normalize(extra));
                }
            }
            extras.sort();
            extras.dedup();
            pos = skip_ws(s, pos + close + 1);
        }

        let mut specifiers = Vec::new();
        let leftover = |at: usize| RequirementError::Leftover {
            text: owned(),
            column: s[..at].chars().count() + 1,
            rest: s[at..].to_string(),
        };
        if pos < s.len() {
            loop {
                let Some(&(op_text, op)) = Op::ALL.iter().find(|(t, _)| s[pos..].starts_with(t))
                else {
                    return Err(leftover(pos));
                };
                pos = skip_ws(s, pos + op_text.len());
                let v_end = s[pos..]
                    .find(|c: char| c.is_whitespace() || c == ',')
                    .map_or(s.len(), |i| pos + i);
                let version = &s[pos..v_end];
                if let Some(reason) = version_problem(op, version) {
                    return Err(RequirementError::Version {
                        text: owned(),
                        op,
                        version: version.to_string(),
                        reason,
                    });
                }
                specifiers.push(Specifier {
                    op,
                    version: version.to_string(),
                });
                pos = skip_ws(s, v_end);
                if pos == s.len() {
                    break;
                }
                if !s[pos..].starts_with(',') {
                    return Err(leftover(pos));
                }
                pos = skip_ws(s, pos + 1);
                if pos == s.len() {
                    return Err(RequirementError::TrailingComma { text: owned() });
                }
            }
        }
        Ok(Requirement {
            name,
            extras,
            specifiers,
        })
    }
}

/// The first position at or after `pos` that is not whitespace.
fn skip_ws(s: &str, pos: usize) -> usize {
    s[pos..]
        .find(|c: char| !c.is_whitespace())
        .map_or(s.len(), |i| pos + i)
}

impl fmt::Display for Requirement {
    /// The canonical form, no spaces: `name[a,b]>=1.0,<2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.extras.is_empty() {
            write!(f, "[{}]", self.extras.join(","))?;
        }
        for (i, spec) in self.specifiers.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}{}", spec.op, spec.version)?;
        }
        Ok(())
    }
}

/// Every requirement of a declaration, in order; refuses more than [`MAX_PACKAGES`] and two
/// requirements naming one (normalised) project; the error says which entry (0-based index and
/// its text).
pub fn parse_all(entries: &[String]) -> Result<Vec<Requirement>, DeclaredError> {
    if entries.len() > MAX_PACKAGES {
        return Err(DeclaredError::TooMany {
            count: entries.len(),
        });
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(entries.len());
    for (index, text) in entries.iter().enumerate() {
        let req = Requirement::parse(text).map_err(|error| DeclaredError::Entry {
            index,
            text: text.clone(),
            error,
        })?;
        if let Some(&first) = seen.get(&req.name) {
            return Err(DeclaredError::Duplicate {
                index,
                text: text.clone(),
                first,
                name: req.name,
            });
        }
        seen.insert(req.name.clone(), index);
        out.push(req);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The lock
// ---------------------------------------------------------------------------------------------

/// One locked package: a project pinned to one version, with the hashes of its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    /// The project name, normalised.
    pub name: String,
    pub version: String,
    /// `sha256:<64 lowercase hex>`, sorted, without repeats, at least one.
    pub hashes: Vec<String>,
}

/// A resolved set of packages. Always canonical: sorted by name, each name once, each package
/// with valid hashes, whether it was parsed from the resolver or read back from a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "LockRepr")]
pub struct Lock {
    /// Sorted by name, each name once.
    pub packages: Vec<Locked>,
}

/// The serialised shape of a [`Lock`], checked into one on the way in.
#[derive(Deserialize)]
struct LockRepr {
    packages: Vec<Locked>,
}

impl TryFrom<LockRepr> for Lock {
    type Error = LockError;

    fn try_from(repr: LockRepr) -> Result<Lock, LockError> {
        if repr.packages.len() > MAX_LOCKED_PACKAGES {
            return Err(LockError::TooMany);
        }
        for (i, p) in repr.packages.iter().enumerate() {
            let line = i + 1;
            if !is_name(&p.name) || normalize(&p.name) != p.name {
                return Err(LockError::Name {
                    line,
                    text: p.name.clone(),
                });
            }
            if version_problem(Op::Eq, &p.version).is_some() || p.version.contains('*') {
                return Err(LockError::Version {
                    line,
                    text: p.version.clone(),
                });
            }
            if p.hashes.is_empty() {
                return Err(LockError::NoHash {
                    line,
                    name: p.name.clone(),
                });
            }
            for h in &p.hashes {
                if canonical_hash(h).as_deref() != Some(h.as_str()) {
                    return Err(LockError::Hash {
                        line,
                        text: h.clone(),
                    });
                }
            }
            if !p.hashes.windows(2).all(|w| w[0] < w[1]) {
                return Err(LockError::Unsorted);
            }
        }
        if !repr.packages.windows(2).all(|w| w[0].name < w[1].name) {
            return Err(LockError::Unsorted);
        }
        Ok(Lock {
            packages: repr.packages,
        })
    }
}

/// Why the resolver's output (or a stored lock) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error(
        "lock line {line}: {} does not pin one package as `name==version`",
        shown(text)
    )]
    NotPinned { line: usize, text: String },
    #[error(
        "lock line {line}: {} has an environment marker (`;`); a lock must hold only plain pins",
        shown(text)
    )]
    Marker { line: usize, text: String },
    #[error(
        "lock line {line}: {} is a direct reference (URL or path); packages come only from the configured index",
        shown(text)
    )]
    Url { line: usize, text: String },
    #[error("lock line {line}: {} is not a project name", shown(text))]
    Name { line: usize, text: String },
    #[error("lock line {line}: {} is not a plain version", shown(text))]
    Version { line: usize, text: String },
    #[error(
        "lock line {line}: {} is not a hash of the form `--hash=sha256:<64 hex digits>`",
        shown(text)
    )]
    Hash { line: usize, text: String },
    #[error(
        "lock line {line}: {name} has no sha256 hash; the lock must be made with --generate-hashes"
    )]
    NoHash { line: usize, name: String },
    #[error("lock line {line}: {name} is locked a second time")]
    Repeated { line: usize, name: String },
    #[error("the lock holds more than {MAX_LOCKED_PACKAGES} packages; declare fewer packages")]
    TooMany,
    #[error("a stored lock is not sorted by name and hash, or repeats one")]
    Unsorted,
}

/// `sha256:<lowercase hex>` for a hash as written after `--hash=`, if it is one.
fn canonical_hash(text: &str) -> Option<String> {
    let hex = text.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// Drop a comment: `#` at the start or after whitespace, to the end of the line.
fn strip_comment(line: &str) -> &str {
    let mut prev_ws = true;
    for (i, c) in line.char_indices() {
        if c == '#' && prev_ws {
            return &line[..i];
        }
        prev_ws = c.is_whitespace();
    }
    line
}

impl Lock {
    /// Parse `uv pip compile --generate-hashes --no-header --no-annotate` output: lines
    /// `name==version \` followed by indented `--hash=sha256:<hex>` lines (or all on one line),
    /// comments and blank lines. Anything else is refused.
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        // Logical lines: a trailing `\` continues the line; comments are dropped first.
        let mut logical: Vec<(usize, String)> = Vec::new();
        let mut open: Option<(usize, String)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = strip_comment(raw).trim_end();
            let (body, continues) = match line.strip_suffix('\\') {
                Some(body) => (body, true),
                None => (line, false),
            };
            let current = open.get_or_insert_with(|| (i + 1, String::new()));
            current.1.push(' ');
            current.1.push_str(body);
            if !continues && let Some(done) = open.take() {
                logical.push(done);
            }
        }
        logical.extend(open);
        logical.retain(|(_, content)| !content.trim().is_empty());

        let mut by_name: BTreeMap<String, Locked> = BTreeMap::new();
        for (line, content) in logical {
            let content = content.trim();
            if by_name.len() >= MAX_LOCKED_PACKAGES {
                return Err(LockError::TooMany);
            }
            let text = || content.to_string();
            if content.contains(';') {
                return Err(LockError::Marker { line, text: text() });
            }
            if content.contains("://") || content.contains('@') {
                return Err(LockError::Url { line, text: text() });
            }
            let mut tokens = content.split_whitespace();
            let pin = tokens.next().unwrap_or_default();
            let Some((raw_name, version)) = pin.split_once("==") else {
                return Err(LockError::NotPinned { line, text: text() });
            };
            if !is_name(raw_name) {
                return Err(LockError::Name {
                    line,
                    text: raw_name.to_string(),
                });
            }
            if version_problem(Op::Eq, version).is_some() || version.contains('*') {
                return Err(LockError::Version {
                    line,
                    text: version.to_string(),
                });
            }
            let name = normalize(raw_name);
            let mut hashes = Vec::new();
            for token in tokens {
                let hash = token
                    .strip_prefix("--hash=")
                    .and_then(canonical_hash)
                    .ok_or_else(|| LockError::Hash {
                        line,
                        text: token.to_string(),
                    })?;
                hashes.push(hash);
            }
            if hashes.is_empty() {
                return Err(LockError::NoHash { line, name });
            }
            hashes.sort();
            hashes.dedup();
            if by_name.contains_key(&name) {
                return Err(LockError::Repeated { line, name });
            }
            by_name.insert(
                name.clone(),
                Locked {
                    name,
                    version: version.to_string(),
                    hashes,
                },
            );
        }
        Ok(Lock {
            packages: by_name.into_values().collect(),
        })
    }

    /// The canonical text, one line per package: `name==version --hash=sha256:… --hash=…\n`,
    /// sorted: what `uv pip install --require-hashes` is given, and what the layer's content
    /// address is computed from.
    pub fn to_requirements(&self) -> String {
        let mut out = String::new();
        for p in &self.packages {
            out.push_str(&p.name);
            out.push_str("==");
            out.push_str(&p.version);
            for h in &p.hashes {
                out.push_str(" --hash=");
                out.push_str(h);
            }
            out.push('\n');
        }
        out
    }

    /// The packages not already in the runtime at the same version (`present`: normalised
    /// name -> version, compared as written).
    pub fn without(&self, present: &BTreeMap<String, String>) -> Lock {
        Lock {
            packages: self
                .packages
                .iter()
                .filter(|p| present.get(&p.name) != Some(&p.version))
                .cloned()
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.packages.is_empty()
    }

    /// `feedparser 6.0.11, sgmllib3k 1.0.0` (for questions and `tools show`); `no packages`
    /// for an empty lock.
    pub fn describe(&self) -> String {
        if self.is_empty() {
            return "no packages".into();
        }
        self.packages
            .iter()
            .map(|p| format!("{} {}", p.name, p.version))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The consent text for a lock from `source` (e.g. "PyPI" or "the index
/// https://pypi.corp.example/simple"): `install feedparser 6.0.11 and sgmllib3k 1.0.0 from PyPI`
/// (an English list: `a`, `a and b`, `a, b and c`); `install no packages from PyPI` for an empty
/// lock.
pub fn install_phrase(lock: &Lock, source: &str) -> String {
    let items: Vec<String> = lock
        .packages
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    let list = match items.as_slice() {
        [] => "no packages".to_string(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    format!("install {list} from {source}")
}

#[cfg(test)]
mod tests;
