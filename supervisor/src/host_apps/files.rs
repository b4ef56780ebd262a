//! Writing a host app's config file without ever leaving it half-written: the backup beside it
//! and the new text both go through a temporary file in the same directory that is renamed over
//! the target, with the original file's mode (and, where we may, owner) already set.
//!
//! Backups never overwrite each other: the first is `<file>.bak` (the file as it was before
//! autotool first touched it), each later one the next free `<file>.bak.N` (1, 2, …), so every
//! state the file was in before a setup or a removal can be had back.
//!
//! A config that is a symbolic link (dotfile managers keep them) is written through: the link
//! stays, and the file it points at is the one backed up and replaced.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The mode a config file gets when setup creates it: apps keep tokens beside their server
/// lists (`~/.claude.json` holds the account), and only the user's own apps read it.
pub const NEW_FILE_MODE: u32 = 0o600;

/// The mode of a directory setup creates for a config (`~/.codex` when only the CLI exists).
pub const NEW_DIR_MODE: u32 = 0o700;

/// What [`replace`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The file actually written (the target of a symbolic link).
    pub path: PathBuf,
    /// Where the previous contents were copied, if there were any.
    pub backup: Option<PathBuf>,
}

/// The `n`th backup of `path`: `<file>.bak` for 0, `<file>.bak.N` after.
fn backup_name(path: &Path, n: u32) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    if n > 0 {
        name.push(format!(".{n}"));
    }
    path.with_file_name(name)
}

/// Where the next backup of `path` goes: `<file>.bak` when there is none yet, else the first
/// free `<file>.bak.N`.
pub fn backup_path(path: &Path) -> PathBuf {
    let path = resolve(path).unwrap_or_else(|_| path.to_path_buf());
    (0..)
        .map(|n| backup_name(&path, n))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| backup_name(&path, 0))
}

/// The file a write to `path` lands in: `path` itself, or the file a symbolic link at `path`
/// points to (resolved completely, so the rename happens in the real file's directory).
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path),
        _ => Ok(path.to_path_buf()),
    }
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory, given `mode`
/// (and, when we are root, the owner `owner`), written, flushed to disk, then renamed over
/// `path`.
fn write_atomic(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    clobber: bool,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // Created 0600: nothing is readable by others before the mode below is set.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".autotool-tmp")
        .tempfile_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))?;
    // Root editing a user's file (setup under sudo) gives it back to that user; anyone else
    // could not change the owner anyway, and the file keeps theirs.
    if let Some((uid, gid)) = owner
        && rustix::process::geteuid().is_root()
        && (uid, gid) != (0, 0)
    {
        std::os::unix::fs::fchown(tmp.as_file(), Some(uid), Some(gid))?;
    }
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    if clobber {
        tmp.persist(path).map_err(|e| e.error)?;
    } else {
        tmp.persist_noclobber(path).map_err(|e| e.error)?;
    }
    // The rename is durable once the directory is.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Rewrite the existing file `path` (a backup) with `text`, atomically, its mode and owner
/// kept, and no backup of it made.
pub fn rewrite(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path)?;
    write_atomic(
        path,
        text.as_bytes(),
        meta.mode(),
        Some((meta.uid(), meta.gid())),
        true,
    )
}

/// Replace the config at `path` with `text`. An existing file is first copied to
/// [`backup_path`] (same mode and owner); a missing one is created with [`NEW_FILE_MODE`],
/// and its directory with [`NEW_DIR_MODE`] if that is missing too.
pub fn replace(path: &Path, text: &str) -> std::io::Result<Written> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let target = resolve(path)?;
    match std::fs::metadata(&target) {
        Ok(meta) => {
            let before = std::fs::read(&target)?;
            let mode = meta.mode();
            let owner = Some((meta.uid(), meta.gid()));
            // The next free name; should another setup take it meanwhile, the one after.
            let mut backup = backup_path(&target);
            let mut tries = 0;
            loop {
                match write_atomic(&backup, &before, mode, owner, false) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 100 => {
                        tries += 1;
                        backup = backup_path(&target);
                    }
                    Err(e) => return Err(e),
                }
            }
            write_atomic(&target, text.as_bytes(), mode, owner, true)?;
            Ok(Written {
                path: target,
                backup: Some(backup),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(NEW_DIR_MODE)
                    .create(dir)?;
            }
            write_atomic(&target, text.as_bytes(), NEW_FILE_MODE, None, true)?;
            Ok(Written {
                path: target,
                backup: None,
            })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn replace_keeps_the_mode_and_backs_up_the_old_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let w = replace(&p, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            w.backup.as_deref(),
            Some(dir.path().join("c.json.bak").as_path())
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("c.json.bak")).unwrap(),
            "old"
        );
        assert_eq!(mode(&p), 0o640);
        assert_eq!(mode(&dir.path().join("c.json.bak")), 0o640);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn backups_never_overwrite_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(&p, "first").unwrap();
        for text in ["second", "third", "fourth"] {
            replace(&p, text).unwrap();
        }
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert_eq!(read("c.json.bak"), "first");
        assert_eq!(read("c.json.bak.1"), "second");
        assert_eq!(read("c.json.bak.2"), "third");
        assert_eq!(read("c.json"), "fourth");
        assert_eq!(backup_path(&p), dir.path().join("c.json.bak.3"));
    }

    #[test]
    fn replace_creates_a_missing_file_and_directory_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/c.toml");
        let w = replace(&p, "x = 1\n").unwrap();
        assert_eq!(w.backup, None);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x = 1\n");
        assert_eq!(mode(&p), NEW_FILE_MODE);
        assert_eq!(mode(&dir.path().join("sub")), NEW_DIR_MODE);
    }

    #[test]
    fn root_gives_a_users_file_back_to_the_user() {
        use std::os::unix::fs::MetadataExt as _;
        if !rustix::process::geteuid().is_root() {
            eprintln!(
                "SKIP root_gives_a_users_file_back_to_the_user: needs root (setup under sudo)"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        std::fs::write(&p, "old").unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        replace(&p, "new").unwrap();
        for f in [p.clone(), dir.path().join("c.json.bak")] {
            let meta = std::fs::metadata(&f).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{f:?}");
        }
    }

    #[test]
    fn replace_writes_through_a_symbolic_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles/claude.json");
        std::fs::create_dir(dir.path().join("dotfiles")).unwrap();
        std::fs::write(&real, "{}").unwrap();
        let link = dir.path().join(".claude.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let w = replace(&link, "{\"a\": 1}").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "{\"a\": 1}");
        assert_eq!(w.path, std::fs::canonicalize(&real).unwrap());
        assert!(dir.path().join("dotfiles/claude.json.bak").is_file());
    }
}
