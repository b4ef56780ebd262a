//! Unit tests of resolving a grant, on a fake home outside `/tmp` (which the sandbox replaces,
//! so nothing below it can be granted).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::os::unix::fs::symlink;

/// A fake home holding `notes/`, `.ssh/`, `.config/app/`, `.autotool/`, `file.txt`.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new() -> Self {
        let base = std::env::var_os("AUTOTOOL_TEST_SCRATCH")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        let dir = tempfile::Builder::new()
            .prefix("autotool-grant-")
            .tempdir_in(base)
            .unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap().join("alice");
        for d in ["notes/sub", ".ssh", ".config/app", ".autotool/tools"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join("file.txt"), "x").unwrap();
        Home { _dir: dir, home }
    }

    fn autotool(&self) -> PathBuf {
        self.home.join(".autotool")
    }

    fn grant(&self, declared: &str, write: bool) -> Result<UserDir, String> {
        resolve_grant(declared, write, &self.home, &self.autotool(), &[])
    }
}

#[test]
fn a_directory_below_the_home_is_granted_at_its_canonical_path_with_its_identity() {
    let h = Home::new();
    for (declared, write) in [("~/notes", false), ("~/notes/sub", true)] {
        let dir = h.grant(declared, write).unwrap();
        let path = h.home.join(&declared[2..]);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            dir,
            UserDir {
                path,
                write,
                dev: meta.dev(),
                ino: meta.ino(),
                home_link: Some(PathBuf::from(&declared[2..])),
            }
        );
    }
    // Written in full, or with a trailing slash or doubled slashes: the same directory.
    let full = h.home.join("notes");
    for declared in [
        full.to_str().unwrap().to_string(),
        format!("{}/", full.display()),
        "~//notes".to_string(),
        "~/notes/./".to_string(),
    ] {
        assert_eq!(h.grant(&declared, false).unwrap().path, full, "{declared}");
    }
}

#[test]
fn symlinks_and_dotdot_are_resolved_once_at_grant_time() {
    let h = Home::new();
    symlink(h.home.join("notes"), h.home.join("link")).unwrap();
    symlink(h.home.join(".ssh"), h.home.join("keys")).unwrap();
    symlink("notes/../.ssh", h.home.join("relative")).unwrap();
    assert_eq!(h.grant("~/link", false).unwrap().path, h.home.join("notes"));
    for declared in [
        "~/keys",
        "~/relative",
        "~/notes/../.ssh",
        "~/notes/sub/../../.ssh",
    ] {
        let why = h.grant(declared, false).unwrap_err();
        assert!(
            why.starts_with(&format!("{declared} resolves to ")) && why.contains("SSH keys"),
            "{declared}: {why}"
        );
    }
    // `..` up to the home itself.
    let why = h.grant("~/notes/..", true).unwrap_err();
    assert!(why.contains("your home directory itself"), "{why}");
}

#[test]
fn denied_places_are_refused_with_the_reason() {
    let h = Home::new();
    for (declared, says) in [
        ("~", "~ is your home directory itself"),
        ("~/", "~ is your home directory itself"),
        ("~/.ssh", "~/.ssh is where SSH keys are kept"),
        ("~/.config/app", "~/.config/app lies in ~/.config"),
        ("~/.autotool", "~/.autotool is autotool's own home"),
        (
            "~/.autotool/tools",
            "lies in ~/.autotool, autotool's own home",
        ),
        ("/", "/ is the whole machine"),
        ("/proc/self", "a kernel interface"),
        (
            "/proc/self/root",
            "/proc/self/root resolves to /: / is the whole machine",
        ),
        ("/etc", "/etc is where the machine's configuration"),
    ] {
        let why = h.grant(declared, false).unwrap_err();
        assert!(why.contains(says), "{declared}: {why}");
    }
}

#[test]
fn a_widened_rule_lets_the_directory_through_but_never_autotools_home() {
    let h = Home::new();
    let widened = [h.home.join(".config/app"), h.home.join(".autotool")];
    let grant = |d: &str| resolve_grant(d, true, &h.home, &h.autotool(), &widened);
    assert_eq!(
        grant("~/.config/app").unwrap().path,
        h.home.join(".config/app")
    );
    assert!(grant("~/.config").is_err());
    assert!(
        grant("~/.autotool")
            .unwrap_err()
            .contains("no tool is ever granted")
    );
}

#[test]
fn the_home_given_through_a_symlink_is_the_same_home() {
    let h = Home::new();
    let alias = h.home.parent().unwrap().join("alias");
    symlink(&h.home, &alias).unwrap();
    let grant = |d: &str| resolve_grant(d, false, &alias, &alias.join(".autotool"), &[]);
    assert_eq!(grant("~/notes").unwrap().path, h.home.join("notes"));
    assert!(grant("~/.ssh").unwrap_err().contains("SSH keys"));
    assert!(
        grant("~")
            .unwrap_err()
            .contains("your home directory itself")
    );
}

#[test]
fn what_is_not_an_existing_absolute_directory_is_refused() {
    let h = Home::new();
    for (declared, says) in [
        ("~/missing", "~/missing does not exist"),
        ("~/file.txt", "is not a directory"),
        ("notes", "notes is not an absolute path"),
        ("./notes", "is not an absolute path"),
        ("", "an empty directory name cannot be granted"),
        ("~bob/notes", "only your own home can be written `~`"),
        ("~/no\0te", "holds a NUL byte"),
    ] {
        let why = h.grant(declared, false).unwrap_err();
        assert!(why.contains(says), "{declared:?}: {why}");
    }
}

#[test]
fn widening_takes_a_refused_directory_but_never_autotools_home_nor_an_unrefused_one() {
    let h = Home::new();
    let widen = |d: &str| resolve_widening(d, &h.home, &h.autotool());
    // A secret directory's rule: widened at its canonical path, through a symlink too.
    symlink(h.home.join(".config/app"), h.home.join("app-link")).unwrap();
    for declared in ["~/.config/app", "~/app-link", "~/notes/../.config/app"] {
        let (path, what) = widen(declared).unwrap();
        assert_eq!(path, h.home.join(".config/app"), "{declared}");
        assert_eq!(
            what, "~/.config: where applications' settings and tokens are kept",
            "{declared}"
        );
    }
    // Once widened, resolve_grant lets it through (and what lies below it).
    let widened = [widen("~/.config/app").unwrap().0];
    assert!(resolve_grant("~/.config/app", true, &h.home, &h.autotool(), &widened).is_ok());
    // Never autotool's home, nor what lies in it, nor the home holding it, nor `/` or `/proc`.
    for (declared, says) in [
        ("~/.autotool", "cannot be widened"),
        ("~/.autotool/tools", "no tool is ever granted"),
        ("~", "cannot be widened"),
        ("/", "the whole machine"),
        ("/proc", "a kernel interface"),
    ] {
        let why = widen(declared).unwrap_err();
        assert!(why.contains(says), "{declared}: {why}");
    }
    // Nothing to widen; and what is no directory.
    assert!(widen("~/notes").unwrap_err().contains("nothing to widen"));
    assert!(widen("~/file.txt").unwrap_err().contains("not a directory"));
    assert!(
        widen("~/missing")
            .unwrap_err()
            .contains("cannot be resolved")
    );
}
