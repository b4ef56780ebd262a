//! What a `package-lock.json` says, and which script of the package node runs.

use super::NpmError;
use std::path::Path;

/// The most packages one server's tree may hold.
const MAX_PACKAGES: usize = 2000;

/// What a lockfile says of the server's own package and its tree.
pub(super) struct LockFacts {
    pub version: String,
    pub integrity: String,
    pub bin: serde_json::Value,
    pub packages: usize,
}

/// Read a `package-lock.json` (v2 or v3): every package of the tree from a registry with a
/// sha512 integrity, nothing linked, nothing from git or a path.
pub(super) fn read_lock(bytes: &[u8], package: &str) -> Result<LockFacts, NpmError> {
    let lock: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| NpmError::Lock(e.to_string()))?;
    let Some(packages) = lock.get("packages").and_then(|p| p.as_object()) else {
        return Err(NpmError::Lock(
            "it has no `packages` (lockfile version 2 or later is needed)".into(),
        ));
    };
    if packages.len() > MAX_PACKAGES {
        return Err(NpmError::Lock(format!(
            "its tree holds {} packages, more than {MAX_PACKAGES}",
            packages.len()
        )));
    }
    for (path, p) in packages {
        if path.is_empty() {
            continue;
        }
        let integrity = p.get("integrity").and_then(|v| v.as_str()).unwrap_or("");
        let linked = p.get("link").and_then(|v| v.as_bool()).unwrap_or(false);
        let resolved = p.get("resolved").and_then(|v| v.as_str()).unwrap_or("");
        let from_registry = resolved.starts_with("https://") || resolved.starts_with("http://");
        if linked || !integrity.starts_with("sha512-") || !from_registry {
            return Err(NpmError::Lock(format!(
                "{path} is not a registry tarball pinned by a sha512 integrity"
            )));
        }
    }
    let own = packages
        .get(&format!("node_modules/{package}"))
        .ok_or_else(|| NpmError::Lock(format!("{package} is not in its own tree")))?;
    let text = |k: &str| {
        own.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    Ok(LockFacts {
        version: text("version"),
        integrity: text("integrity"),
        bin: own.get("bin").cloned().unwrap_or(serde_json::Value::Null),
        packages: packages.len() - 1,
    })
}

/// A relative path of plain names (`./` stripped), or `None`.
fn plain(path: &str) -> Option<String> {
    let path = path.trim_start_matches("./");
    let ok = !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    ok.then(|| path.to_string())
}

/// The script node runs, relative to the layer: the package's `bin` (its only one, or the one
/// named as the package), or the one `--entry` names (a `bin` name, or a path inside the
/// package such as `dist/index.js`).
pub fn entry_of(
    package: &str,
    bin: &serde_json::Value,
    entry: Option<&str>,
) -> Result<String, NpmError> {
    let short = package.rsplit('/').next().unwrap_or(package);
    let bins: Vec<(String, String)> = match bin {
        serde_json::Value::String(s) => vec![(short.to_string(), s.clone())],
        serde_json::Value::Object(m) => m
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect(),
        _ => Vec::new(),
    };
    let names = || {
        let n: Vec<&str> = bins.iter().map(|(k, _)| k.as_str()).collect();
        if n.is_empty() {
            "none".to_string()
        } else {
            n.join(", ")
        }
    };
    let chosen = match entry {
        Some(e) => match bins.iter().find(|(k, _)| k == e) {
            Some((_, path)) => path.clone(),
            None if e.contains('/')
                || e.ends_with(".js")
                || e.ends_with(".mjs")
                || e.ends_with(".cjs") =>
            {
                e.to_string()
            }
            None => {
                return Err(NpmError::Entry(format!(
                    "{package} has no bin named {e:?} (its bins: {}); --entry takes a bin name or \
                     a script's path inside the package (`dist/index.js`)",
                    names()
                )));
            }
        },
        None => match bins.as_slice() {
            [(_, path)] => path.clone(),
            [] => {
                return Err(NpmError::Entry(format!(
                    "{package} declares no `bin`: name the script that starts its server with \
                     `--entry PATH` (a path inside the package, such as `dist/index.js`)"
                )));
            }
            many => match many.iter().find(|(k, _)| k == short) {
                Some((_, path)) => path.clone(),
                None => {
                    return Err(NpmError::Entry(format!(
                        "{package} has several bins ({}): name one with `--entry NAME`",
                        names()
                    )));
                }
            },
        },
    };
    let path = plain(&chosen).ok_or_else(|| {
        NpmError::Entry(format!(
            "{chosen:?} is not a plain path inside {package}: it must not leave the package"
        ))
    })?;
    Ok(format!("node_modules/{package}/{path}"))
}
