//! Unit tests of which directories may be granted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const HOME: &str = "/home/alice";
const AUTOTOOL: &str = "/home/alice/.autotool";

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn check(path: &str) -> Option<Refusal> {
    refusal(&p(path), &p(HOME), &p(AUTOTOOL), &[])
}

fn check_widened(path: &str, widened: &[&str]) -> Option<Refusal> {
    let widened: Vec<PathBuf> = widened.iter().map(|w| p(w)).collect();
    refusal(&p(path), &p(HOME), &p(AUTOTOOL), &widened)
}

/// The place and reason `path` is refused for.
fn denied(path: &str) -> (PathBuf, Why) {
    let r = check(path).unwrap_or_else(|| panic!("{path} was accepted"));
    (r.place, r.why)
}

#[test]
fn ordinary_directories_of_the_home_and_elsewhere_are_granted() {
    for path in [
        "/home/alice/notes",
        "/home/alice/exports",
        "/home/alice/work/project",
        // Near misses of denied names are ordinary names.
        "/home/alice/.sshx",
        "/home/alice/ssh",
        "/home/alice/.configs",
        "/home/alice/.autotool-old",
        "/home/alice/notes/.ssh",
        "/home/alice/notes/.config",
        "/srv/data",
        "/var/tmp/scratch",
        "/mnt/usb",
        "/opt/datasets",
        "/etcetera",
        "/usrdata",
        "/tmpfiles",
        "/homework",
    ] {
        assert_eq!(check(path), None, "{path}");
    }
}

#[test]
fn the_root_and_the_home_itself_are_refused() {
    assert_eq!(denied("/"), (p("/"), Why::Root));
    assert_eq!(denied(HOME), (p(HOME), Why::Home));
    // /home holds the home (and other users' homes).
    assert_eq!(denied("/home"), (p(HOME), Why::Home));
}

#[test]
fn the_homes_secret_directories_and_everything_in_them_are_refused() {
    for (dir, what) in [
        (".ssh", "SSH keys"),
        (".gnupg", "GnuPG keys"),
        (".aws", "AWS credentials"),
        (".config", "applications' settings and tokens"),
    ] {
        let place = p(HOME).join(dir);
        for path in [place.clone(), place.join("sub"), place.join("a/b/c")] {
            let r = refusal(&path, &p(HOME), &p(AUTOTOOL), &[]).unwrap();
            assert_eq!((r.place, r.why), (place.clone(), Why::Secrets(what)));
        }
    }
}

#[test]
fn autotools_own_home_is_refused_and_so_is_anything_holding_it() {
    for path in [
        AUTOTOOL,
        "/home/alice/.autotool/tools",
        "/home/alice/.autotool/tools/x/1",
    ] {
        assert_eq!(denied(path), (p(AUTOTOOL), Why::AutotoolHome), "{path}");
    }
    // An autotool home elsewhere: its parents are refused, its siblings are not.
    let elsewhere = |path: &str| refusal(&p(path), &p(HOME), &p("/srv/autotool/home"), &[]);
    for path in ["/srv", "/srv/autotool", "/srv/autotool/home/db"] {
        let r = elsewhere(path).unwrap();
        assert_eq!(
            (r.place, r.why),
            (p("/srv/autotool/home"), Why::AutotoolHome)
        );
    }
    assert_eq!(elsewhere("/srv/data"), None);
    assert_eq!(elsewhere("/srv/autotool/other"), None);
}

#[test]
fn host_and_kernel_directories_are_refused() {
    for (path, place, why) in [
        (
            "/etc",
            "/etc",
            Why::Host("the machine's configuration and password hashes"),
        ),
        (
            "/etc/ssh",
            "/etc",
            Why::Host("the machine's configuration and password hashes"),
        ),
        (
            "/run",
            "/run",
            Why::Host("running services' sockets and state"),
        ),
        (
            "/run/user/1000",
            "/run",
            Why::Host("running services' sockets and state"),
        ),
        (
            "/boot",
            "/boot",
            Why::Host("the kernel and the boot loader"),
        ),
        ("/proc", "/proc", Why::Kernel),
        ("/proc/self/root", "/proc", Why::Kernel),
        ("/proc/1/cwd", "/proc", Why::Kernel),
        ("/sys", "/sys", Why::Kernel),
        ("/sys/fs/cgroup", "/sys", Why::Kernel),
        ("/dev", "/dev", Why::Kernel),
        ("/dev/shm", "/dev", Why::Kernel),
    ] {
        assert_eq!(denied(path), (p(place), why), "{path}");
    }
}

#[test]
fn other_users_homes_are_refused() {
    for (path, place) in [
        ("/home/bob", "/home"),
        ("/home/bob/notes", "/home"),
        ("/home/alicex", "/home"),
        ("/root", "/root"),
        ("/root/notes", "/root"),
    ] {
        assert_eq!(denied(path), (p(place), Why::OtherUser), "{path}");
    }
    // Root's own directories are root's to grant; /home is then all other users'.
    let as_root = |path: &str| refusal(&p(path), &p("/root"), &p("/root/.autotool"), &[]);
    assert_eq!(as_root("/root/notes"), None);
    assert_eq!(as_root("/root").unwrap().why, Why::Home);
    assert_eq!(
        as_root("/root/.ssh/x").unwrap().why,
        Why::Secrets("SSH keys")
    );
    assert_eq!(as_root("/home/alice/notes").unwrap().why, Why::OtherUser);
    // A home deeper below /home: its siblings are other users'.
    let deep = |path: &str| {
        refusal(
            &p(path),
            &p("/home/users/alice"),
            &p("/home/users/alice/.autotool"),
            &[],
        )
    };
    assert_eq!(deep("/home/users/alice/notes"), None);
    assert_eq!(deep("/home/users/bob").unwrap().why, Why::OtherUser);
    assert_eq!(deep("/home/users").unwrap().why, Why::Home);
    // A home outside /home: everything under /home is someone else's.
    let outside = |path: &str| refusal(&p(path), &p("/var/lib/ci"), &p("/var/lib/ci/.at"), &[]);
    assert_eq!(outside("/var/lib/ci/notes"), None);
    assert_eq!(outside("/home/alice").unwrap().why, Why::OtherUser);
}

#[test]
fn places_the_sandbox_mounts_itself_are_refused() {
    for (path, place) in [
        ("/usr", "/usr"),
        ("/usr/share/doc", "/usr"),
        ("/lib/x", "/lib"),
        ("/lib64", "/lib64"),
        ("/bin", "/bin"),
        ("/sbin/x", "/sbin"),
        ("/tmp", "/tmp"),
        ("/tmp/notes", "/tmp"),
        ("/tool", "/tool"),
        ("/runtime/x", "/runtime"),
        ("/packages", "/packages"),
    ] {
        assert_eq!(denied(path), (p(place), Why::Sandbox), "{path}");
    }
    // The tool's own home lies under /home: refused as the sandbox's, even for a user whose
    // home it would be.
    assert_eq!(
        refusal(
            &p("/home/tool/x"),
            &p("/home/tool"),
            &p("/home/tool/.at"),
            &[]
        )
        .unwrap()
        .why,
        Why::Sandbox
    );
}

#[test]
fn a_directory_holding_a_denied_place_is_refused() {
    // ~/.ssh is not below ~/work, so ~/work is fine; the home holds it, and /home the home.
    assert_eq!(check("/home/alice/work"), None);
    assert_eq!(denied("/home"), (p(HOME), Why::Home));
    // With the home widened, what it holds is still refused: the first secret directory.
    let widened_home = |path: &str, autotool: &str| {
        refusal(&p(path), &p(HOME), &p(autotool), &[p(HOME)]).map(|r| (r.place, r.why))
    };
    assert_eq!(
        widened_home(HOME, "/srv/at"),
        None,
        "the user widened the home itself, and autotool lives elsewhere"
    );
    // Widening the home does not widen /home, which holds it.
    assert_eq!(widened_home("/home", "/srv/at"), Some((p(HOME), Why::Home)));
    // A directory holding autotool's home, /etc, /tmp or a system directory.
    let holder = |path: &str, autotool: &str| {
        refusal(&p(path), &p(HOME), &p(autotool), &[]).map(|r| (r.place, r.why))
    };
    assert_eq!(
        holder("/srv", "/srv/autotool"),
        Some((p("/srv/autotool"), Why::AutotoolHome))
    );
    assert_eq!(
        holder("/var/lib", "/var/lib/at/home"),
        Some((p("/var/lib/at/home"), Why::AutotoolHome))
    );
    // Every rule's place is held by `/`, which is refused first as the whole machine.
    assert_eq!(denied("/"), (p("/"), Why::Root));
    // A home under a system directory: the home and everything in it is the sandbox's.
    let usr_home = refusal(
        &p("/usr/home/a/notes"),
        &p("/usr/home/a"),
        &p("/srv/at"),
        &[],
    );
    assert_eq!(usr_home.map(|r| r.why), Some(Why::Sandbox));
}

#[test]
fn widening_lifts_only_the_rules_that_can_be_widened_and_only_below_the_widened_path() {
    // A secret directory, widened by itself or from a parent.
    assert_eq!(
        check_widened("/home/alice/.config/app", &["/home/alice/.config/app"]),
        None
    );
    assert_eq!(
        check_widened("/home/alice/.config/app/sub", &["/home/alice/.config/app"]),
        None
    );
    assert_eq!(
        check_widened("/home/alice/.ssh", &["/home/alice/.ssh"]),
        None
    );
    // Widening a child does not widen its parent.
    assert_eq!(
        check_widened("/home/alice/.config", &["/home/alice/.config/app"])
            .unwrap()
            .why,
        Why::Secrets("applications' settings and tokens")
    );
    // Widening one secret directory does not widen another.
    assert_eq!(
        check_widened("/home/alice/.aws", &["/home/alice/.ssh"])
            .unwrap()
            .why,
        Why::Secrets("AWS credentials")
    );
    // Other users' homes, /etc, /run, /boot can be widened.
    assert_eq!(
        check_widened("/home/bob/shared", &["/home/bob/shared"]),
        None
    );
    assert_eq!(check_widened("/etc/myapp", &["/etc/myapp"]), None);
    assert_eq!(check_widened("/run/media", &["/run"]), None);
    // The home widened: granting it is still refused while autotool's home lies in it.
    assert_eq!(check_widened(HOME, &[HOME]).unwrap().why, Why::AutotoolHome);
    assert_eq!(refusal(&p(HOME), &p(HOME), &p("/srv/at"), &[p(HOME)]), None);
    // Never widened: the root, autotool's home, the kernel's interfaces, the sandbox's places.
    for (path, why) in [
        ("/", Why::Root),
        (AUTOTOOL, Why::AutotoolHome),
        ("/home/alice/.autotool/credentials", Why::AutotoolHome),
        ("/proc/self", Why::Kernel),
        ("/sys", Why::Kernel),
        ("/dev/shm", Why::Kernel),
        ("/usr/lib", Why::Sandbox),
        ("/tmp/x", Why::Sandbox),
    ] {
        assert_eq!(check_widened(path, &["/"]).unwrap().why, why, "{path}");
        assert_eq!(check_widened(path, &[path]).unwrap().why, why, "{path}");
    }
}

#[test]
fn which_rules_can_be_widened() {
    for why in [Why::Home, Why::Secrets("x"), Why::Host("x"), Why::OtherUser] {
        assert!(why.widenable(), "{why:?}");
    }
    for why in [Why::Root, Why::AutotoolHome, Why::Kernel, Why::Sandbox] {
        assert!(!why.widenable(), "{why:?}");
    }
}

#[test]
fn refusals_say_why_in_the_users_words() {
    let text = |path: &str| check(path).unwrap().to_string();
    let widen = |path: &str| format!(" (to grant it anyway, widen the rule for {path} explicitly)");
    assert_eq!(
        text("/home/alice/.ssh"),
        format!("~/.ssh is where SSH keys are kept{}", widen("~/.ssh"))
    );
    assert_eq!(
        text("/home/alice/.aws/sso"),
        format!(
            "~/.aws/sso lies in ~/.aws, where AWS credentials are kept{}",
            widen("~/.aws/sso")
        )
    );
    assert_eq!(
        text(HOME),
        format!(
            "~ is your home directory itself; grant only the directories below it the tool \
             needs{}",
            widen("~")
        )
    );
    assert_eq!(
        text("/home"),
        format!(
            "/home holds ~, your home directory itself; grant only the directories below it \
             the tool needs{}",
            widen("/home")
        )
    );
    assert_eq!(
        text(AUTOTOOL),
        "~/.autotool is autotool's own home (its keys, approvals, ledger and tools), which no \
         tool is ever granted"
    );
    assert_eq!(
        text("/home/alice/.autotool/tools"),
        "~/.autotool/tools lies in ~/.autotool, autotool's own home (its keys, approvals, \
         ledger and tools), which no tool is ever granted"
    );
    assert_eq!(
        text("/home/bob"),
        format!("/home/bob is another user's home{}", widen("/home/bob"))
    );
    assert_eq!(
        text("/etc/ssh"),
        format!(
            "/etc/ssh lies in /etc, where the machine's configuration and password hashes are \
             kept{}",
            widen("/etc/ssh")
        )
    );
    assert_eq!(
        text("/proc/self/root"),
        "/proc/self/root lies in /proc, a kernel interface, which no tool is ever granted"
    );
    assert_eq!(text("/"), "/ is the whole machine");
    assert_eq!(
        text("/tmp/notes"),
        "/tmp/notes lies in /tmp, a place the sandbox mounts itself, so it cannot also show a \
         directory of yours there; keep the directory elsewhere"
    );
}

#[test]
fn paths_below_the_home_are_shown_with_a_tilde() {
    assert_eq!(shown(&p(HOME), &p(HOME)), "~");
    assert_eq!(shown(&p("/home/alice/notes"), &p(HOME)), "~/notes");
    assert_eq!(shown(&p("/home/alicex"), &p(HOME)), "/home/alicex");
    assert_eq!(shown(&p("/srv/x"), &p(HOME)), "/srv/x");
    // A home of `/` is not abbreviated.
    assert_eq!(shown(&p("/srv"), &p("/")), "/srv");
}
