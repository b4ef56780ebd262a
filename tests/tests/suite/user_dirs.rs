//! Directories of the user's granted to a tool (`READ_DIRS`, `WRITE_DIRS`): a tool reads what
//! it was granted and no more, writes only inside a directory granted for writing, follows no
//! symlink out of one, and is not started at all when the granted path was swapped since the
//! grant. Each attack runs confined (blocked) and as a control without the launcher (it works).
//!
//! Every directory lives in a scratch directory outside `/tmp` (the sandbox replaces `/tmp`, so
//! nothing below it can be granted): `granted/` holds what the tool is given, and beside it
//! `secret/` stands for `~/.ssh` and `outside/` for any place the tool must not write.

use super::{assert_blocked, assert_escaped, attack_on, builder, marker, skip};
use autotool_tests::probe::SETUP_FAILED;
use autotool_tests::{Mode, ToolProcess, host, template};
use serde_json::json;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;
use std::time::Duration;

/// What the attack tool prints to stderr once it runs.
const STARTED: &str = "attack_tool: started";

/// A scratch home: `granted/notes.txt`, `secret/id_ed25519`, `outside/`.
struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    marker: String,
}

impl Place {
    fn new() -> Self {
        let dir = host::scratch_dir("autotool-userdirs-").unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let marker = marker("USERDIR");
        for d in ["granted", "secret", "outside"] {
            std::fs::create_dir(root.join(d)).unwrap();
            // A tool started by root runs as `nobody` outside: let it write where it may.
            std::fs::set_permissions(root.join(d), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        std::fs::write(root.join("granted/notes.txt"), format!("{marker} notes\n")).unwrap();
        std::fs::write(root.join("secret/id_ed25519"), format!("{marker} key\n")).unwrap();
        Place {
            _dir: dir,
            root,
            marker,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn s(&self, rel: &str) -> String {
        self.path(rel).to_str().unwrap().to_string()
    }

    fn granted(&self) -> PathBuf {
        self.path("granted")
    }

    /// The attack tool, granted `granted/` (read-only or read-write), in `mode`.
    fn start(&self, mode: Mode, write: bool) -> ToolProcess {
        builder()
            .with_user_dir(&self.granted(), write)
            .and_then(|b| b.start(mode))
            .unwrap_or_else(|e| panic!("starting the attack tool granted a directory: {e:#}"))
    }
}

/// Run `function` with `args` on both tools: blocked confined, working in the control.
fn both(
    confined: &mut ToolProcess,
    control: &mut ToolProcess,
    function: &str,
    args: serde_json::Value,
) {
    let what = format!("{function} {args}");
    assert_blocked(&attack_on(confined, function, args.clone()), &what);
    assert_escaped(&attack_on(control, function, args), &what);
}

#[test]
fn a_directory_granted_for_reading_is_readable_and_nothing_more() {
    if skip() {
        return;
    }
    let place = Place::new();
    let notes = place.s("granted/notes.txt");
    let mut confined = place.start(Mode::Confined, false);
    let mut control = place.start(Mode::Control, false);
    // The grant works: the file is read, the directory listed, at its own path.
    let read = attack_on(&mut confined, "read_file", json!({"path": notes}));
    assert!(
        read.contains(&place.marker),
        "reading the granted file: {read}"
    );
    let list = attack_on(&mut confined, "list_dir", json!({"path": place.granted()}));
    assert!(
        list.contains("notes.txt"),
        "listing the granted directory: {list}"
    );
    // Nothing in it changes.
    both(
        &mut confined,
        &mut control,
        "write_file",
        json!({"path": place.s("granted/new.txt")}),
    );
    for function in ["write_file", "delete_file"] {
        let verdict = attack_on(&mut confined, function, json!({"path": notes}));
        assert_blocked(&verdict, &format!("{function} {notes}"));
    }
    let moved = attack_on(
        &mut confined,
        "rename_file",
        json!({"source": notes, "destination": place.s("granted/moved.txt")}),
    );
    assert_blocked(&moved, "rename inside a read-only grant");
    // What lies beside it stays out of reach, by any path.
    for path in [
        place.s("secret/id_ed25519"),
        format!("{}/../secret/id_ed25519", place.s("granted")),
        format!("/proc/self/root{}", place.s("secret/id_ed25519")),
    ] {
        both(
            &mut confined,
            &mut control,
            "read_file",
            json!({"path": path}),
        );
    }
    // The mount says so too: read-only, noexec, nosuid, nodev.
    let options = attack_on(
        &mut confined,
        "mount_options",
        json!({"path": place.granted()}),
    );
    for flag in ["ro", "nosuid", "nodev", "noexec"] {
        assert!(
            options
                .trim_start_matches("WORKS: ")
                .split(',')
                .any(|o| o == flag),
            "the granted directory's mount lacks {flag}: {options}"
        );
    }
    assert!(std::fs::read_dir(place.granted()).unwrap().count() >= 1);
}

#[test]
fn a_directory_not_granted_stays_invisible() {
    if skip() {
        return;
    }
    let place = Place::new();
    let mut tool = builder().start(Mode::Confined).unwrap();
    let verdict = attack_on(
        &mut tool,
        "read_file",
        json!({"path": place.s("granted/notes.txt")}),
    );
    assert_blocked(&verdict, "read an ungranted directory");
}

#[test]
fn a_directory_granted_for_writing_takes_files_but_plants_nothing_outside() {
    if skip() {
        return;
    }
    let place = Place::new();
    // A symlink inside the granted directory pointing out of it, as the user might have one.
    symlink(place.path("outside"), place.path("granted/out")).unwrap();
    symlink("../outside", place.path("granted/out-relative")).unwrap();
    let mut confined = place.start(Mode::Confined, true);
    let mut control = place.start(Mode::Control, true);

    // Inside: create, append, rename, delete, make a directory's worth of files.
    let fresh = place.s("granted/fresh.txt");
    let wrote = attack_on(&mut confined, "write_file", json!({"path": fresh}));
    assert!(
        wrote.starts_with("ESCAPED:"),
        "writing inside the grant: {wrote}"
    );
    assert!(place.path("granted/fresh.txt").is_file());
    let renamed = attack_on(
        &mut confined,
        "rename_file",
        json!({"source": fresh, "destination": place.s("granted/renamed.txt")}),
    );
    assert!(
        renamed.starts_with("ESCAPED:"),
        "renaming inside the grant: {renamed}"
    );
    let deleted = attack_on(
        &mut confined,
        "delete_file",
        json!({"path": place.s("granted/renamed.txt")}),
    );
    assert!(
        deleted.starts_with("ESCAPED:"),
        "deleting inside the grant: {deleted}"
    );

    // Outside: by `..`, through the symlinks in it, through /proc/self/root and /proc/self/cwd.
    let planted = |how: &str| format!("planted-{how}.txt");
    let attempts = [
        (
            "dotdot",
            format!("{}/../outside/{}", place.s("granted"), planted("dotdot")),
        ),
        (
            "beside",
            format!("{}/../{}", place.s("granted"), planted("beside")),
        ),
        (
            "symlink",
            format!("{}/{}", place.s("granted/out"), planted("symlink")),
        ),
        (
            "relative",
            format!(
                "{}/{}",
                place.s("granted/out-relative"),
                planted("relative")
            ),
        ),
        (
            "proc-root",
            format!(
                "/proc/self/root{}/{}",
                place.s("outside"),
                planted("proc-root")
            ),
        ),
    ];
    for (how, path) in &attempts {
        let verdict = attack_on(&mut confined, "write_file", json!({"path": path}));
        assert_blocked(&verdict, &format!("plant a file outside the grant ({how})"));
    }
    for (how, _) in &attempts {
        for dir in [place.path("outside"), place.root.clone()] {
            assert!(
                !dir.join(planted(how)).exists(),
                "a confined tool planted {how} in {dir:?}"
            );
        }
    }
    for (how, path) in &attempts {
        let verdict = attack_on(&mut control, "write_file", json!({"path": path}));
        assert_escaped(&verdict, &format!("plant a file outside ({how})"));
    }

    // No symlink (which the user's own programs would follow later) is made in it, and no
    // hard link to a file outside it.
    both(
        &mut confined,
        &mut control,
        "make_link",
        json!({
            "source": place.s("secret/id_ed25519"),
            "link": place.s("granted/key-symlink"),
            "symbolic": true,
        }),
    );
    both(
        &mut confined,
        &mut control,
        "make_link",
        json!({
            "source": place.s("secret/id_ed25519"),
            "link": place.s("granted/key-hardlink"),
            "symbolic": false,
        }),
    );
    // The mount: writable, noexec, nosuid, nodev.
    let options = attack_on(
        &mut confined,
        "mount_options",
        json!({"path": place.granted()}),
    );
    for flag in ["rw", "nosuid", "nodev", "noexec"] {
        assert!(
            options
                .trim_start_matches("WORKS: ")
                .split(',')
                .any(|o| o == flag),
            "the granted directory's mount lacks {flag}: {options}"
        );
    }
}

#[test]
fn a_symlink_in_a_granted_directory_does_not_lead_to_the_secret() {
    if skip() {
        return;
    }
    let place = Place::new();
    // A stand-in for `~/.ssh` linked from inside the granted directory, absolute and relative.
    symlink(place.path("secret"), place.path("granted/keys")).unwrap();
    symlink("../secret", place.path("granted/keys-relative")).unwrap();
    symlink(place.path("secret/id_ed25519"), place.path("granted/key")).unwrap();
    for write in [false, true] {
        let mut confined = place.start(Mode::Confined, write);
        let mut control = place.start(Mode::Control, write);
        for link in ["keys/id_ed25519", "keys-relative/id_ed25519", "key"] {
            let args = json!({"path": place.s(&format!("granted/{link}"))});
            let verdict = attack_on(&mut confined, "read_file", args.clone());
            assert_blocked(&verdict, &format!("read the secret through granted/{link}"));
            assert!(!verdict.contains(&place.marker), "leaked: {verdict}");
            let verdict = attack_on(&mut control, "read_file", args);
            assert_escaped(&verdict, &format!("read the secret through granted/{link}"));
            assert!(verdict.contains(&place.marker), "{verdict}");
        }
    }
}

/// The documented limit (docs/sandbox.md): a hard link *is* the file. A hard link the user
/// (or anyone) made inside a granted directory to a file outside it is readable through the
/// grant, as with bubblewrap's or sandbox-runtime's binds; finding every hard link of a
/// directory is not cheap, so none is looked for. A tool cannot make one itself (see
/// `a_directory_granted_for_writing_takes_files_but_plants_nothing_outside`).
#[test]
fn a_hard_link_in_a_granted_directory_is_the_file_itself() {
    if skip() {
        return;
    }
    let place = Place::new();
    std::fs::hard_link(
        place.path("secret/id_ed25519"),
        place.path("granted/linked-key"),
    )
    .unwrap();
    let mut confined = place.start(Mode::Confined, false);
    let verdict = attack_on(
        &mut confined,
        "read_file",
        json!({"path": place.s("granted/linked-key")}),
    );
    assert!(
        verdict.starts_with("ESCAPED:") && verdict.contains(&place.marker),
        "a hard link in a granted directory is the same file; if this is blocked now, update \
         the limit in docs/sandbox.md: {verdict}"
    );
}

/// Start the attack tool confined with the grant of `granted/` taken now, after `swap`
/// changes the host (what it returns is kept until the launch is over); the launch must be
/// refused before any of the tool runs.
fn refused_after(place: &Place, swap: impl FnOnce(&Place) -> Option<RestoreOnDrop>) -> String {
    let b = builder().with_user_dir(&place.granted(), false).unwrap();
    let _restore = swap(place);
    let mut tool = b.launched().spawn(Mode::Confined).unwrap();
    let status = tool
        .wait_exit(Duration::from_secs(10))
        .unwrap()
        .expect("the launcher did not exit");
    let stderr = tool.stderr();
    assert_eq!(status.code(), Some(SETUP_FAILED), "{status}: {stderr}");
    assert!(!stderr.contains(STARTED), "the tool ran: {stderr}");
    stderr
}

#[test]
fn a_granted_directory_swapped_after_the_grant_is_not_mounted() {
    if skip() {
        return;
    }
    // The control: unswapped, the same grant launches and reads.
    let place = Place::new();
    let mut tool = place.start(Mode::Confined, false);
    let read = attack_on(
        &mut tool,
        "read_file",
        json!({"path": place.s("granted/notes.txt")}),
    );
    assert!(read.contains(&place.marker), "{read}");
    drop(tool);

    // Swapped for a symlink to the secret between consent and launch.
    let place = Place::new();
    let stderr = refused_after(&place, |p| {
        std::fs::rename(p.granted(), p.path("granted.old")).unwrap();
        symlink(p.path("secret"), p.granted()).unwrap();
        None
    });
    assert!(
        stderr.contains("changed since it was granted")
            && stderr.contains("a part of its path is a symbolic link now"),
        "{stderr}"
    );
    assert!(
        stderr.contains("grant it to the tool again"),
        "no hint: {stderr}"
    );

    // Swapped for another directory moved into its place.
    let place = Place::new();
    let stderr = refused_after(&place, |p| {
        std::fs::rename(p.granted(), p.path("granted.old")).unwrap();
        std::fs::rename(p.path("secret"), p.granted()).unwrap();
        None
    });
    assert!(
        stderr.contains("changed since it was granted")
            && stderr.contains("names another directory now"),
        "{stderr}"
    );

    // A parent of it swapped for a symlink to a look-alike tree.
    let place = Place::new();
    let stderr = refused_after(&place, |p| {
        let twin = p.path("twin");
        std::fs::create_dir_all(twin.join("granted")).unwrap();
        let parent = p.root.clone();
        let moved = parent.with_extension("moved");
        std::fs::rename(&parent, &moved).unwrap();
        symlink(moved.join("twin"), &parent).unwrap();
        // Put back once the launch is over, for the scratch directory's cleanup.
        Some(RestoreOnDrop(parent, moved))
    });
    assert!(
        stderr.contains("a part of its path is a symbolic link now"),
        "{stderr}"
    );
}

/// Undo a rename of a scratch directory (the swap above) when dropped.
struct RestoreOnDrop(PathBuf, PathBuf);

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::rename(&self.1, &self.0);
    }
}

#[test]
fn a_tool_granted_a_directory_is_launched_and_forked_tools_never_see_it() {
    if skip() {
        return;
    }
    let place = Place::new();
    // Whatever AUTOTOOL_TEST_FORK says, a granted tool is never forked.
    let mut launched = place.start(Mode::Confined, true);
    assert!(
        !host::cmdline(launched.pid()).contains("template"),
        "a granted tool came from a template"
    );
    let wrote = attack_on(
        &mut launched,
        "write_file",
        json!({"path": place.s("granted/from-launched.txt")}),
    );
    assert!(wrote.starts_with("ESCAPED:"), "{wrote}");
    if let Some(why) = template::available_or_why() {
        autotool_tests::print_skip("the forked half", why);
        return;
    }
    // Asked to fork it anyway, the template refuses to serve it.
    let forced = builder()
        .with_user_dir(&place.granted(), true)
        .and_then(|b| b.forked())
        .and_then(|b| b.start(Mode::Confined));
    assert!(
        forced.is_err(),
        "a granted tool was forked from the template"
    );
    // A sibling forked from the template while the granted tool runs sees none of it.
    let mut sibling = builder()
        .forked()
        .and_then(|b| b.start(Mode::Confined))
        .unwrap();
    for path in [
        place.s("granted/notes.txt"),
        place.s("granted/from-launched.txt"),
    ] {
        let verdict = attack_on(&mut sibling, "read_file", json!({"path": path}));
        assert_blocked(&verdict, &format!("a forked sibling reads {path}"));
    }
    let verdict = attack_on(
        &mut sibling,
        "write_file",
        json!({"path": place.s("granted/from-sibling.txt")}),
    );
    assert_blocked(&verdict, "a forked sibling writes the granted directory");
    assert!(!place.path("granted/from-sibling.txt").exists());
}
