//! The values `setup --import` moved out of an app's config into autotool's key store, and how
//! they stay out of every file autotool keeps of that config.
//!
//! Before the import writes the config, every copy of its old text autotool holds (the undo
//! record `$AUTOTOOL_HOME/setup/<app>.json`, and the backups `<file>.bak`, `<file>.bak.N` setup
//! made beside it) has each moved value, as the JSON string the config spelled it in, replaced
//! by a placeholder of its own (`autotool-moved-<random>`); the record lists each placeholder
//! with the key's name. `setup --remove` puts the values back from the key store as it puts
//! the config back, so the file returns byte for byte. Values shorter than [`MIN_MASKED`]
//! characters are not secrets worth the name (`true`, `debug`) and are left as they are.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The shortest value masked.
pub const MIN_MASKED: usize = 8;

/// One moved value: where it was, by its placeholder, and the key now holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    pub placeholder: String,
    pub key: String,
}

impl Moved {
    /// A placeholder no config holds by chance.
    pub fn new(key: &str) -> Moved {
        use std::io::Read as _;
        let mut bytes = [0u8; 12];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if read.is_err() {
            // Unique still: the time and this process.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            bytes[..8].copy_from_slice(&(now as u64).to_le_bytes());
            bytes[8..].copy_from_slice(&std::process::id().to_le_bytes());
        }
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Moved {
            placeholder: format!("autotool-moved-{hex}"),
            key: key.to_string(),
        }
    }
}

fn literal(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `text` with each value of `moved` (spelled as a JSON string) replaced by its placeholder.
pub fn mask(text: &str, moved: &[(String, Moved)]) -> String {
    let mut out = text.to_string();
    for (value, m) in moved {
        if value.chars().count() >= MIN_MASKED {
            out = out.replace(&literal(value), &literal(&m.placeholder));
        }
    }
    out
}

/// `text` with each placeholder of `moved` replaced by the value `value_of` its key gives;
/// `None` when a placeholder is there and its key holds no value any more.
pub fn unmask(
    text: &str,
    moved: &[Moved],
    value_of: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let mut out = text.to_string();
    for m in moved {
        let placeholder = literal(&m.placeholder);
        if out.contains(&placeholder) {
            out = out.replace(&placeholder, &literal(&value_of(&m.key)?));
        }
    }
    Some(out)
}

/// Every backup setup made of `config` (`<file>.bak`, `<file>.bak.N`).
fn backups(config: &Path) -> Vec<PathBuf> {
    let target = std::fs::canonicalize(config).unwrap_or_else(|_| config.to_path_buf());
    let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    let prefix = format!("{name}.bak");
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n == prefix
                        || n.strip_prefix(&format!("{prefix}."))
                            .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Mask `moved` in every backup of `config`, each rewritten in place (mode kept); how many
/// held a value.
pub fn scrub_backups(config: &Path, moved: &[(String, Moved)]) -> std::io::Result<usize> {
    let mut scrubbed = 0;
    for b in backups(config) {
        let Ok(text) = std::fs::read_to_string(&b) else {
            continue;
        };
        let masked = mask(&text, moved);
        if masked != text {
            super::files::rewrite(&b, &masked)?;
            scrubbed += 1;
        }
    }
    Ok(scrubbed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn masking_then_unmasking_gives_the_text_back_byte_for_byte() {
        let text = "{\n  \"env\": {\"GITHUB_TOKEN\": \"ghp_abcdefgh12345678\", \"X\": \"debug\"},\n  \"again\": \"ghp_abcdefgh12345678\"\n}";
        let m = Moved::new("GITHUB_TOKEN");
        let short = Moved::new("X");
        let moved = vec![
            ("ghp_abcdefgh12345678".to_string(), m.clone()),
            ("debug".to_string(), short.clone()),
        ];
        let masked = mask(text, &moved);
        assert!(!masked.contains("ghp_abcdefgh12345678"), "{masked}");
        assert!(masked.contains("\"debug\""), "short values stay: {masked}");
        let back = unmask(&masked, &[m.clone(), short], &|k| {
            (k == "GITHUB_TOKEN").then(|| "ghp_abcdefgh12345678".to_string())
        })
        .unwrap();
        assert_eq!(back, text);
        // A key gone from the store: no restore.
        assert!(unmask(&masked, &[m], &|_| None).is_none());
    }

    #[test]
    fn placeholders_differ() {
        assert_ne!(Moved::new("A").placeholder, Moved::new("A").placeholder);
    }

    #[test]
    fn every_backup_is_scrubbed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("c.json");
        let value = "s3cret-token-value";
        for name in [
            "c.json",
            "c.json.bak",
            "c.json.bak.1",
            "c.json.bak.x",
            "other.bak",
        ] {
            std::fs::write(dir.path().join(name), format!("{{\"T\": \"{value}\"}}")).unwrap();
        }
        let moved = vec![(value.to_string(), Moved::new("T"))];
        assert_eq!(scrub_backups(&config, &moved).unwrap(), 2);
        for (name, holds) in [
            ("c.json", true),
            ("c.json.bak", false),
            ("c.json.bak.1", false),
            ("c.json.bak.x", true),
            ("other.bak", true),
        ] {
            let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
            assert_eq!(text.contains(value), holds, "{name}: {text}");
        }
    }
}
