//! Wheels measured before anything of them is unpacked, so a layer is bounded by construction.
//!
//! uv unpacks a wheel into its cache as it downloads it and copies it into the layer from
//! there, so watching the layer's size while uv runs can only notice a zip bomb after it has
//! written (a 500 MiB bomb reached hundreds of MiB on disk against a 64 MiB limit). Instead,
//! the layer's wheels are first downloaded as files (pip's `download`: no unpacking), then
//! every entry of every wheel is inflated here into nothing and counted, and only a set whose
//! real unpacked size is within the limit is handed to uv, from those very files (pinned by
//! their hashes). What uv then writes is at most what was counted: the limit holds before
//! anything is written, however the archive's headers lie.

use super::PackagesError;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What the wheels in a directory hold, unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Measured {
    pub wheels: u64,
    pub files: u64,
    pub bytes: u64,
}

/// The `*.whl` files in `dir`, sorted.
fn wheels_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    found.sort();
    Ok(found)
}

/// Inflate every entry of every wheel in `dir` into nothing and count: an error when the
/// files together unpack to more than `limit_bytes`, number more than `max_files`, or an entry
/// is not what its header says (a size or CRC that does not match, a method wheels do not
/// use). At most `limit_bytes + 1` bytes are ever inflated.
pub(super) fn measure(
    dir: &Path,
    limit_bytes: u64,
    max_files: u64,
) -> Result<Measured, PackagesError> {
    let too_large = || PackagesError::TooLarge {
        limit_mib: limit_bytes >> 20,
    };
    let bad = |wheel: &Path, why: String| {
        PackagesError::Install(format!(
            "the wheel {} cannot be read as a wheel: {why}",
            wheel
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ))
    };
    let mut m = Measured {
        wheels: 0,
        files: 0,
        bytes: 0,
    };
    let wheels = wheels_in(dir).map_err(|e| PackagesError::Io {
        what: "reading",
        path: dir.to_path_buf(),
        source: e,
    })?;
    for wheel in wheels {
        m.wheels += 1;
        let file = std::fs::File::open(&wheel).map_err(|e| bad(&wheel, e.to_string()))?;
        let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(&wheel, e.to_string()))?;
        for i in 0..archive.len() {
            m.files += 1;
            if m.files > max_files {
                return Err(too_large());
            }
            let mut entry = archive
                .by_index(i)
                .map_err(|e| bad(&wheel, e.to_string()))?;
            let declared = entry.size();
            let name = entry
                .name()
                .map(|n| n.into_owned())
                .unwrap_or_else(|_| format!("entry {i}"));
            if m.bytes.saturating_add(declared) > limit_bytes {
                return Err(too_large());
            }
            // What the entry really inflates to, read no further than the limit allows.
            let room = limit_bytes - m.bytes;
            let read = std::io::copy(&mut (&mut entry).take(room + 1), &mut std::io::sink())
                .map_err(|e| bad(&wheel, format!("{name}: {e}")))?;
            if read > room {
                return Err(too_large());
            }
            if read != declared {
                return Err(bad(
                    &wheel,
                    format!("{name} declares {declared} bytes but holds {read}"),
                ));
            }
            m.bytes += read;
        }
    }
    Ok(m)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    fn wheel(dir: &Path, name: &str, entries: &[(&str, usize)]) {
        let file = std::fs::File::create(dir.join(name)).unwrap();
        let mut z = zip::ZipWriter::new(file);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (path, size) in entries {
            z.start_file(*path, options).unwrap();
            z.write_all(&vec![0u8; *size]).unwrap();
        }
        z.finish().unwrap();
    }

    #[test]
    fn a_bomb_is_refused_having_inflated_no_more_than_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        // 64 MiB of zeros deflate to about 64 KiB.
        wheel(
            dir.path(),
            "bomb-1.0-py3-none-any.whl",
            &[("bomb/z", 64 << 20)],
        );
        let on_disk = std::fs::metadata(dir.path().join("bomb-1.0-py3-none-any.whl"))
            .unwrap()
            .len();
        assert!(on_disk < 1 << 20, "{on_disk}");
        assert!(matches!(
            measure(dir.path(), 8 << 20, 1000),
            Err(PackagesError::TooLarge { limit_mib: 8 })
        ));
        // The control: under a limit it fits, counted exactly.
        let m = measure(dir.path(), 65 << 20, 1000).unwrap();
        assert_eq!(
            m,
            Measured {
                wheels: 1,
                files: 1,
                bytes: 64 << 20
            }
        );
    }

    #[test]
    fn sizes_add_up_across_wheels_and_files_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        wheel(
            dir.path(),
            "a-1-py3-none-any.whl",
            &[("a/x", 3000), ("a/y", 3000)],
        );
        wheel(dir.path(), "b-1-py3-none-any.whl", &[("b/x", 3000)]);
        std::fs::write(dir.path().join("notes.txt"), "not a wheel").unwrap();
        assert_eq!(measure(dir.path(), 9000, 10).unwrap().bytes, 9000);
        assert!(matches!(
            measure(dir.path(), 8999, 10),
            Err(PackagesError::TooLarge { .. })
        ));
        assert!(matches!(
            measure(dir.path(), 9000, 2),
            Err(PackagesError::TooLarge { .. })
        ));
        std::fs::write(dir.path().join("c-1-py3-none-any.whl"), "not a zip").unwrap();
        assert!(matches!(
            measure(dir.path(), 1 << 20, 10),
            Err(PackagesError::Install(_))
        ));
    }
}
