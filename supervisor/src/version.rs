//! One version of a tool, in the one shape every part of autotool holds it: the ledger reads
//! it, the registry commits it, the library mounts it, consent is asked about it
//! ([`Version::subject`]) and a process is held to it ([`crate::pin`]).
//!
//! Its functions are kept as the JSON text verification recorded ([`StoredFunction`]): a
//! library of a thousand tools holds thousands of schemas, and parsed JSON takes several times
//! the memory of its text; [`StoredFunction::spec`] parses one when it is needed.

use autotool_policy::lifecycle::State;
use autotool_policy::names::{KeyName, ToolName};
use autotool_policy::packages::Lock;
use autotool_policy::reach::DeclaredReach;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file name of a tool's code, in its version (or staging) directory.
pub const TOOL_FILE: &str = "tool.py";

/// One function of a tool, as the tool described it to `tools/list` during verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: serde_json::Map<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    /// The tool's own hints (`readOnlyHint`, …), untrusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

impl FunctionSpec {
    /// The spec with every key value `redactor` knows redacted (title, description, every string
    /// and object key of the schemas and annotations): what a host or a user may be shown.
    pub fn redacted(mut self, redactor: &crate::redact::Redactor) -> FunctionSpec {
        redactor.redact_option(&mut self.title);
        redactor.redact_option(&mut self.description);
        redactor.redact_object(&mut self.input_schema);
        if let Some(o) = self.output_schema.as_mut() {
            redactor.redact_object(o);
        }
        if let Some(a) = self.annotations.as_mut() {
            redactor.redact_json(a);
        }
        self
    }
}

/// sha256 of `code`, lowercase hex: what a version is pinned by, and what an approval without
/// an allowlist is bound to.
pub fn code_hash(code: &[u8]) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(code)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// A function as verification recorded it, held as its JSON text; the name is kept apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFunction {
    pub name: String,
    json: Box<str>,
}

impl StoredFunction {
    pub fn new(spec: &FunctionSpec) -> StoredFunction {
        StoredFunction {
            name: spec.name.clone(),
            json: serde_json::to_string(spec).unwrap_or_default().into(),
        }
    }

    /// The whole spec. (The text was written from a spec, so it parses; if it somehow did
    /// not, the function has its name and an empty object schema.)
    pub fn spec(&self) -> FunctionSpec {
        serde_json::from_str(&self.json).unwrap_or_else(|_| FunctionSpec {
            name: self.name.clone(),
            title: None,
            description: None,
            input_schema: serde_json::Map::from_iter([(
                "type".to_string(),
                serde_json::Value::from("object"),
            )]),
            output_schema: None,
            annotations: None,
        })
    }
}

/// A version's functions, shared between the snapshots that hold the version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Functions(Arc<[StoredFunction]>);

impl Functions {
    pub fn new(specs: &[FunctionSpec]) -> Functions {
        Functions(specs.iter().map(StoredFunction::new).collect())
    }

    pub fn iter(&self) -> std::slice::Iter<'_, StoredFunction> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The function named `name`.
    pub fn get(&self, name: &str) -> Option<&StoredFunction> {
        self.0.iter().find(|f| f.name == name)
    }

    /// Every function's whole spec, parsed.
    pub fn specs(&self) -> Vec<FunctionSpec> {
        self.0.iter().map(StoredFunction::spec).collect()
    }

    /// The names, in the order the tool listed them.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|f| f.name.as_str()).collect()
    }
}

impl Serialize for Functions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.specs().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Functions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Functions::new(&Vec::<FunctionSpec>::deserialize(d)?))
    }
}

/// A committed version of a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    pub name: ToolName,
    pub version: u32,
    /// sha256 of `tool.py`, lowercase hex.
    pub code_hash: String,
    pub description: String,
    /// The keys its code declares in `REQUIRED_ENV`. Names only, never values.
    pub required_env: Vec<KeyName>,
    pub functions: Functions,
    /// The packages its code declares in `REQUIRED_PACKAGES`, as resolved and locked when it
    /// was created: what its processes get mounted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<Arc<PackageSet>>,
    /// The other tools' functions its code declares in `USES` (mounted names): all its channel
    /// offers it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uses: Vec<String>,
    /// What its code declares it reaches besides its keys' hosts (`REQUIRED_HOSTS`,
    /// `READ_DIRS`, `WRITE_DIRS`). `None`: a version kept from before reach was declared,
    /// which reaches any public host until the user narrows it (`autotool tools narrow`).
    pub reach: Option<DeclaredReach>,
    /// Its lifecycle state (a decision, kept apart from health).
    pub state: State,
    /// Unix milliseconds.
    pub created_at: i64,
}

impl Version {
    /// `<tools_dir>/<name>/<version>/`.
    pub fn dir_in(&self, tools_dir: &Path) -> PathBuf {
        tools_dir
            .join(self.name.as_str())
            .join(self.version.to_string())
    }

    /// What consent for this version is about.
    pub fn subject(&self) -> Subject<'_> {
        Subject {
            tool: &self.name,
            code_hash: &self.code_hash,
            declared: &self.required_env,
            packages: self.packages.as_deref(),
            uses: &self.uses,
            reach: self.reach.as_ref(),
        }
    }
}

/// What consent is about: a tool's code, the keys it declares and the packages it would have
/// installed. A view of a [`Version`], or
/// of code about to be verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subject<'a> {
    pub tool: &'a ToolName,
    /// sha256 of its `tool.py`, lowercase hex.
    pub code_hash: &'a str,
    /// Every key it declares (`REQUIRED_ENV`).
    pub declared: &'a [KeyName],
    /// Its packages, resolved (`REQUIRED_PACKAGES`); `None` when it declares none.
    pub packages: Option<&'a PackageSet>,
    /// The other tools' functions it calls (`USES`, mounted names): named in the question.
    pub uses: &'a [String],
    /// What it declares it reaches (`REQUIRED_HOSTS`, `READ_DIRS`, `WRITE_DIRS`); `None` for
    /// a version kept from before reach was declared.
    pub reach: Option<&'a DeclaredReach>,
}

/// A tool's packages (`REQUIRED_PACKAGES`), resolved and locked (`crate::packages`): part of
/// the version, as its code is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageSet {
    /// What the code declares, in canonical form.
    pub declared: Vec<String>,
    /// The whole resolution, every file pinned by its hash.
    pub lock: Lock,
    /// The part of `lock` the runtime does not already hold: what the layer holds.
    pub layer_lock: Lock,
    /// sha256 of the lock's canonical text: what an approval is bound to.
    pub digest: String,
    /// The layer's content address (`None` when the runtime already holds everything).
    pub layer: Option<String>,
    /// Where the packages come from, as the user was told (credentials taken out).
    pub source: String,
}

impl PackageSet {
    /// `install feedparser 6.0.11 and sgmllib3k 1.0.0 from PyPI`.
    pub fn install_phrase(&self) -> String {
        autotool_policy::packages::install_phrase(&self.lock, &self.source)
    }
}
