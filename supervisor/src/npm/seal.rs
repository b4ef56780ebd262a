//! Making an installed tree read-only, and writable again for removal.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// Make everything below `root` read-only (files 0444, or 0555 when executable; directories
/// 0555, the root itself last, by the caller) and count bytes and files. Symbolic links are
/// left as they are (they point inside the tree, and the mount is read-only anyway).
pub(super) fn seal(root: &Path) -> std::io::Result<(u64, u64)> {
    let mut bytes = 0;
    let mut files = 0;
    let mut dirs = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let meta = e.path().symlink_metadata()?;
            files += 1;
            if meta.is_dir() {
                stack.push(e.path());
                dirs.push(e.path());
            } else if meta.is_file() {
                bytes += meta.len();
                let mode = if meta.permissions().mode() & 0o100 != 0 {
                    0o555
                } else {
                    0o444
                };
                std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode))?;
            }
        }
    }
    // Deepest first, so each directory is still writable while what it holds is sealed.
    for dir in dirs.iter().rev() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555))?;
    }
    Ok((bytes, files))
}

/// Give the owner write on every directory below `root` again, so it can be removed.
pub(super) fn open_for_removal(root: &Path) -> std::io::Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        for e in std::fs::read_dir(&dir)?.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    Ok(())
}
