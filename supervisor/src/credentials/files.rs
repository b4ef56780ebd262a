//! The files behind the store: the lock every write takes, the keychain's name index, the
//! opt-in credentials file, and the atomic 0600 write they all use.

use super::{CredError, FILE_MODE, KeyStore, is_valid_name};
use crate::home::Home;
use base64::Engine as _;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

impl KeyStore {
    pub(super) fn ensure_home(&self) -> Result<(), CredError> {
        Ok(Home::at(&self.root).ensure()?)
    }

    /// Take `keys.lock` (creating the home if need be) until the returned file is dropped.
    pub(super) fn lock(&self) -> Result<fs::File, CredError> {
        self.ensure_home()?;
        let path = self.lock_path();
        let io_err = |action, source| CredError::Io {
            action,
            path: path.clone(),
            source,
        };
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(FILE_MODE)
            .open(&path)
            .map_err(|e| io_err("open", e))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| io_err("lock", e.into()))?;
        Ok(file)
    }

    pub(super) fn read_index(&self) -> Result<BTreeSet<String>, CredError> {
        #[derive(Deserialize)]
        struct Index {
            names: BTreeSet<String>,
        }
        let path = self.keychain_index_path();
        match read_optional(&path)? {
            None => Ok(BTreeSet::new()),
            Some(bytes) => serde_json::from_slice::<Index>(&bytes)
                .map(|i| i.names.into_iter().filter(|n| is_valid_name(n)).collect())
                .map_err(|source| CredError::BadJson { path, source }),
        }
    }

    pub(super) fn write_index(&self, names: &BTreeSet<String>) -> Result<(), CredError> {
        let json = serde_json::to_vec_pretty(&serde_json::json!({
            "about": "the keys autotool keeps in the OS keychain (service `autotool`): names only",
            "names": names,
        }))
        .map_err(|source| CredError::BadJson {
            path: self.keychain_index_path(),
            source,
        })?;
        write_private(&self.keychain_index_path(), &json)
    }

    /// The credentials file: `NAME=base64(value)` lines; `#` comments and blank lines skipped.
    pub(super) fn read_file(&self) -> Result<BTreeMap<String, Vec<u8>>, CredError> {
        let path = self.credentials_path();
        let Some(bytes) = read_optional(&path)? else {
            return Ok(BTreeMap::new());
        };
        let text = String::from_utf8(bytes).map_err(|_| CredError::Corrupt {
            path: path.clone(),
            line: 0,
            why: "it is not text".to_owned(),
        })?;
        let mut out = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let corrupt = |why: &str| CredError::Corrupt {
                path: path.clone(),
                line: i + 1,
                why: why.to_owned(),
            };
            let (name, b64) = line
                .split_once('=')
                .ok_or_else(|| corrupt("expected NAME=base64-value"))?;
            if !is_valid_name(name) {
                return Err(corrupt("the name is not a key name"));
            }
            let value = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| corrupt("the value is not base64"))?;
            out.insert(name.to_owned(), value);
        }
        Ok(out)
    }

    pub(super) fn write_file(&self, keys: &BTreeMap<String, Vec<u8>>) -> Result<(), CredError> {
        let mut text = String::from(
            "# autotool keys, kept in this file instead of the OS keychain because you opted in\n\
             # (`autotool keys add NAME --file` or AUTOTOOL_CREDENTIALS=file). Mode 0600: only\n\
             # you (and root) can read it. One key a line: NAME=value in base64.\n",
        );
        for (name, value) in keys {
            text.push_str(name);
            text.push('=');
            text.push_str(&base64::engine::general_purpose::STANDARD.encode(value));
            text.push('\n');
        }
        write_private(&self.credentials_path(), text.as_bytes())
    }
}

pub(super) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CredError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CredError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replace `path` with `bytes` atomically, mode 0600 from the first byte on.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CredError> {
    let io_err = |action, source| CredError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    // `tempfile` creates the file 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".keys-")
        .tempfile_in(dir)
        .map_err(|e| io_err("create a file beside", e))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| io_err("set the mode of a file beside", e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| io_err("write", e))?;
    tmp.persist(path).map_err(|e| io_err("replace", e.error))?;
    Ok(())
}
