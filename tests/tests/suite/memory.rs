//! Code loading: no shared object from a writable or tool-owned place, no executable anonymous
//! memory, no memory files.

use super::{assert_blocked, assert_escaped, attack_on, builder, check_attack, skip, start};
use autotool_tests::Mode;
use serde_json::json;
use std::path::PathBuf;

/// A small system library to copy around (it only depends on libc).
fn small_library() -> PathBuf {
    let candidates = [
        "/lib/x86_64-linux-gnu/libutil.so.1",
        "/usr/lib/x86_64-linux-gnu/libutil.so.1",
        "/lib/x86_64-linux-gnu/libdl.so.2",
        "/usr/lib/x86_64-linux-gnu/libdl.so.2",
        "/usr/lib64/libutil.so.1",
        "/lib64/libutil.so.1",
    ];
    let found = candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("none of {candidates:?} exists: add this system's path"));
    std::fs::canonicalize(found).unwrap()
}

#[test]
fn library_copied_to_tmp_cannot_be_loaded() {
    if skip() {
        return;
    }
    let library = small_library();
    for mode in [Mode::Confined, Mode::Control] {
        let mut tool = start(mode);
        // From the runtime's own directories a library loads: that is how Python works.
        let system = attack_on(
            &mut tool,
            "load_library",
            json!({"path": library, "copy_to_tmp": false}),
        );
        assert_escaped(&system, "load a system library in place");
        let copied = attack_on(
            &mut tool,
            "load_library",
            json!({"path": library, "copy_to_tmp": true}),
        );
        match mode {
            Mode::Confined => assert_blocked(&copied, "load a library copied into /tmp"),
            Mode::Control => assert_escaped(&copied, "load a library copied into tmp"),
        }
    }
}

#[test]
fn library_in_the_tool_directory_cannot_be_loaded() {
    if skip() {
        return;
    }
    let bytes = std::fs::read(small_library()).unwrap();
    for mode in [Mode::Confined, Mode::Control] {
        let mut tool = builder()
            .with_file("libhelper.so", &bytes)
            .unwrap()
            .start(mode)
            .unwrap();
        let path = tool.tool_path().with_file_name("libhelper.so");
        let verdict = attack_on(
            &mut tool,
            "load_library",
            json!({"path": path, "copy_to_tmp": false}),
        );
        match mode {
            Mode::Confined => assert_blocked(&verdict, "load a library from /tool"),
            Mode::Control => assert_escaped(&verdict, "load a library from the tool dir"),
        }
    }
}

#[test]
fn rwx_anonymous_mmap_fails() {
    if skip() {
        return;
    }
    check_attack("rwx_mmap", json!({}));
}

#[test]
fn mprotect_to_exec_fails() {
    if skip() {
        return;
    }
    check_attack("mprotect_exec", json!({}));
}

#[test]
fn memfd_create_fails() {
    if skip() {
        return;
    }
    check_attack("memfd", json!({}));
}

#[test]
fn read_implies_exec_personality_gives_no_executable_memory() {
    if skip() {
        return;
    }
    check_attack("personality_exec", json!({}));
}

#[test]
fn sysv_shared_memory_cannot_be_executable() {
    if skip() {
        return;
    }
    check_attack("shm_exec", json!({}));
}

#[test]
fn dev_zero_cannot_be_mapped_executable() {
    if skip() {
        return;
    }
    check_attack("dev_zero_exec", json!({}));
}

#[test]
fn code_cannot_be_patched_through_proc_self_mem() {
    if skip() {
        return;
    }
    check_attack("proc_self_mem", json!({}));
}

#[test]
fn two_views_of_the_same_memory_give_no_writable_code() {
    if skip() {
        return;
    }
    check_attack("double_mapping", json!({}));
}

#[test]
fn pkey_mprotect_to_exec_fails() {
    if skip() {
        return;
    }
    check_attack("pkey_mprotect_exec", json!({}));
}

#[test]
fn system_library_mapping_cannot_become_writable_code() {
    if skip() {
        return;
    }
    check_attack("file_mapping_exec", json!({"path": small_library()}));
}
