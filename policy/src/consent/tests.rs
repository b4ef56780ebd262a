//! Unit tests of consent: when an approval holds, why the user is asked again, and the question.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn rules(entries: &[&str]) -> Vec<AllowRule> {
    entries
        .iter()
        .map(|e| AllowRule::parse(e).unwrap())
        .collect()
}

fn keys(names: &[&str]) -> BTreeSet<KeyName> {
    names.iter().map(|n| key(n)).collect()
}

fn key(name: &str) -> KeyName {
    KeyName::parse(name).unwrap()
}

fn approval(key: &str, code: &str, list: Option<&[&str]>, declared: &[&str]) -> Approval {
    Approval {
        key: self::key(key),
        code_hash: code.into(),
        allowlist: list.map(rules),
        declared: keys(declared),
        sandboxed: true,
    }
}

/// `decide` for key `K` of a tool declaring `declared`, at code `code`, with list `list`.
fn verdict(
    code: &str,
    list: Option<&[&str]>,
    declared: &[&str],
    sandboxed: bool,
    approvals: &[Approval],
) -> Verdict {
    let list = list.map(rules);
    let declared = keys(declared);
    decide(
        &Wanted {
            key: &key("K"),
            code_hash: code,
            allowlist: list.as_deref(),
            declared: &declared,
            sandboxed,
        },
        approvals,
    )
}

const LIST: Option<&[&str]> = Some(&["api.x.com"]);

#[test]
fn nothing_approved_asks_first_use() {
    assert_eq!(
        verdict("c1", LIST, &["K"], true, &[]),
        Verdict::Ask(Reason::First)
    );
    // Another key's approval is not this key's.
    let other = approval("L", "c1", LIST, &["K", "L"]);
    assert_eq!(
        verdict("c1", LIST, &["K"], true, &[other]),
        Verdict::Ask(Reason::First)
    );
}

#[test]
fn with_an_allowlist_an_approval_survives_rewrites() {
    let a = approval("K", "c1", LIST, &["K"]);
    assert_eq!(
        verdict("c1", LIST, &["K"], true, std::slice::from_ref(&a)),
        Verdict::Approved
    );
    assert_eq!(
        verdict("c2", LIST, &["K"], true, std::slice::from_ref(&a)),
        Verdict::Approved
    );
    // A narrower list, or fewer keys, still holds.
    let b = approval("K", "c1", Some(&["api.x.com", "*.y.com"]), &["K", "L"]);
    assert_eq!(verdict("c9", LIST, &["K"], true, &[b]), Verdict::Approved);
}

#[test]
fn without_an_allowlist_every_version_is_asked() {
    let a = approval("K", "c1", None, &["K"]);
    assert_eq!(
        verdict("c1", None, &["K"], true, std::slice::from_ref(&a)),
        Verdict::Approved
    );
    assert_eq!(
        verdict("c2", None, &["K"], true, std::slice::from_ref(&a)),
        Verdict::Ask(Reason::NewVersion {
            allowlist: false,
            sandboxed: true
        })
    );
    // A list set after the approval narrows the key but the approval was for one version only.
    assert_eq!(
        verdict("c2", LIST, &["K"], true, &[a]),
        Verdict::Ask(Reason::NewVersion {
            allowlist: true,
            sandboxed: true
        })
    );
}

#[test]
fn unconfined_every_version_is_asked_even_with_a_list() {
    let mut a = approval("K", "c1", LIST, &["K"]);
    assert_eq!(
        verdict("c1", LIST, &["K"], false, std::slice::from_ref(&a)),
        Verdict::Approved
    );
    assert_eq!(
        verdict("c2", LIST, &["K"], false, std::slice::from_ref(&a)),
        Verdict::Ask(Reason::NewVersion {
            allowlist: true,
            sandboxed: false
        })
    );
    // Approved unconfined, now confined: the approval was given for that code only.
    a.sandboxed = false;
    assert!(matches!(
        verdict("c2", LIST, &["K"], true, &[a]),
        Verdict::Ask(Reason::NewVersion { .. })
    ));
}

#[test]
fn widening_the_list_asks_again_even_for_the_same_code() {
    let a = approval("K", "c1", LIST, &["K"]);
    for wider in [
        Some(&["api.x.com", "evil.example"][..]),
        Some(&["*.x.com"][..]),
        Some(&["api.x.com:8443"][..]),
        None,
    ] {
        assert_eq!(
            verdict("c1", wider, &["K"], true, std::slice::from_ref(&a)),
            Verdict::Ask(Reason::Widened),
            "{wider:?}"
        );
    }
}

#[test]
fn declaring_another_key_asks_again() {
    let a = approval("K", "c1", LIST, &["K"]);
    assert_eq!(
        verdict("c1", LIST, &["K", "M"], true, &[a]),
        Verdict::Ask(Reason::MoreKeys(vec![key("M")]))
    );
}

#[test]
fn any_covering_approval_is_enough_and_the_newest_reason_is_given() {
    let old = approval("K", "c1", None, &["K"]);
    let new = approval("K", "c2", None, &["K"]);
    assert_eq!(
        verdict("c1", None, &["K"], true, &[new.clone(), old.clone()]),
        Verdict::Approved
    );
    let widened = approval("K", "c3", Some(&[]), &["K"]);
    assert_eq!(
        verdict("c4", None, &["K"], true, &[widened, old]),
        Verdict::Ask(Reason::Widened)
    );
}

#[test]
fn the_question_names_tool_keys_and_where_they_go() {
    let q = question(
        "tavily",
        &[Ask {
            key: key("TAVILY_API_KEY"),
            allowlist: Some(rules(&["api.tavily.com"])),
            reason: Reason::First,
        }],
    );
    assert_eq!(
        q,
        "Allow the tool `tavily` to use TAVILY_API_KEY? It can send TAVILY_API_KEY only to \
         api.tavily.com. autotool keeps the value; the model never sees it."
    );
    let q = question(
        "multi",
        &[
            Ask {
                key: key("A_KEY"),
                allowlist: None,
                reason: Reason::NewVersion {
                    allowlist: false,
                    sandboxed: true,
                },
            },
            Ask {
                key: key("B_KEY"),
                allowlist: Some(rules(&["*.b.example", "b.example:8443"])),
                reason: Reason::First,
            },
        ],
    );
    assert!(
        q.starts_with("Allow the tool `multi` to use A_KEY and B_KEY? "),
        "{q}"
    );
    assert!(
        q.contains("A_KEY to any host: it has no allowlist (`autotool keys allow A_KEY HOST…`"),
        "{q}"
    );
    assert!(
        q.contains("B_KEY only to *.b.example, b.example:8443."),
        "{q}"
    );
    assert!(q.contains("Asked again (A_KEY: new code"), "{q}");
    assert!(!q.contains("B_KEY: "), "{q}");
}
