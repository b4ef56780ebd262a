//! Unit and property tests of declared requirements and locks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use proptest::prelude::*;

fn req(name: &str, extras: &[&str], specs: &[(Op, &str)]) -> Requirement {
    Requirement {
        name: name.into(),
        extras: extras.iter().map(|s| s.to_string()).collect(),
        specifiers: specs
            .iter()
            .map(|(op, v)| Specifier {
                op: *op,
                version: v.to_string(),
            })
            .collect(),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A 64-digit hex hash made of one repeated digit.
fn h(digit: char) -> String {
    std::iter::repeat_n(digit, 64).collect()
}

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

#[test]
fn normalisation_is_pep_503() {
    assert_eq!(normalize("Foo.Bar_baz"), "foo-bar-baz");
    assert_eq!(normalize("foo--_..bar"), "foo-bar");
    assert_eq!(normalize("BeautifulSoup4"), "beautifulsoup4");
    assert_eq!(normalize("already-normal"), "already-normal");
    assert_eq!(normalize("a"), "a");
}

// ---------------------------------------------------------------------------------------------
// Accepted requirements
// ---------------------------------------------------------------------------------------------

#[test]
fn every_accepted_form_parses_to_its_value() {
    let cases: Vec<(&str, Requirement)> = vec![
        ("feedparser", req("feedparser", &[], &[])),
        ("x", req("x", &[], &[])),
        (
            "feedparser==6.0.11",
            req("feedparser", &[], &[(Op::Eq, "6.0.11")]),
        ),
        ("a!=1.0", req("a", &[], &[(Op::NotEq, "1.0")])),
        ("a<=1.0", req("a", &[], &[(Op::Le, "1.0")])),
        ("a>=4.12", req("a", &[], &[(Op::Ge, "4.12")])),
        ("a<2", req("a", &[], &[(Op::Lt, "2")])),
        ("a>2", req("a", &[], &[(Op::Gt, "2")])),
        ("a~=1.4", req("a", &[], &[(Op::Compatible, "1.4")])),
        ("a~=1.4.5", req("a", &[], &[(Op::Compatible, "1.4.5")])),
        (
            "a~=1!2.2.post3",
            req("a", &[], &[(Op::Compatible, "1!2.2.post3")]),
        ),
        (
            "a===1.0-custom",
            req("a", &[], &[(Op::Arbitrary, "1.0-custom")]),
        ),
        ("a==1.*", req("a", &[], &[(Op::Eq, "1.*")])),
        ("a!=1.2.*", req("a", &[], &[(Op::NotEq, "1.2.*")])),
        ("a==1.0+local.7", req("a", &[], &[(Op::Eq, "1.0+local.7")])),
        ("a==1.0rc1", req("a", &[], &[(Op::Eq, "1.0rc1")])),
        ("a==1.0_dev", req("a", &[], &[(Op::Eq, "1.0_dev")])),
        (
            "beautifulsoup4>=4.12,<5",
            req("beautifulsoup4", &[], &[(Op::Ge, "4.12"), (Op::Lt, "5")]),
        ),
        (
            "  Beautiful_Soup.4 >= 4.12 , < 5  ",
            req("beautiful-soup-4", &[], &[(Op::Ge, "4.12"), (Op::Lt, "5")]),
        ),
        (
            "requests[socks]~=2.31",
            req("requests", &["socks"], &[(Op::Compatible, "2.31")]),
        ),
        (
            "requests [ Security , socks, security ] == 2.31.0",
            req("requests", &["security", "socks"], &[(Op::Eq, "2.31.0")]),
        ),
        ("requests[]", req("requests", &[], &[])),
        ("a.b-c_d", req("a-b-c-d", &[], &[])),
        ("\tfoo\n", req("foo", &[], &[])),
    ];
    for (text, expected) in cases {
        assert_eq!(Requirement::parse(text), Ok(expected), "{text:?}");
    }
}

#[test]
fn display_is_canonical_without_spaces() {
    let r = Requirement::parse("  Requests [Socks, security] >= 2.31 , < 3 ").unwrap();
    assert_eq!(r.to_string(), "requests[security,socks]>=2.31,<3");
    assert_eq!(
        Requirement::parse("feedparser").unwrap().to_string(),
        "feedparser"
    );
    assert_eq!(
        Requirement::parse("a===1.0").unwrap().to_string(),
        "a===1.0"
    );
    assert_eq!(Requirement::parse("a[]").unwrap().to_string(), "a");
}

#[test]
fn display_round_trips() {
    for text in [
        "feedparser==6.0.11",
        "Foo.Bar_baz[X_Y,a]~=1.4,!=1.4.2,<2",
        "a === 1.0",
        "b!=2.*",
        "c",
    ] {
        let r = Requirement::parse(text).unwrap();
        assert_eq!(Requirement::parse(&r.to_string()).unwrap(), r, "{text:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Refused requirements
// ---------------------------------------------------------------------------------------------

fn refused(text: &str) -> (RequirementError, String) {
    let err = Requirement::parse(text).unwrap_err();
    let msg = err.to_string();
    (err, msg)
}

#[test]
fn empty_text_is_refused() {
    for text in ["", "   ", "\t\n"] {
        let (err, msg) = refused(text);
        assert_eq!(err, RequirementError::Empty);
        assert!(msg.contains("empty"), "{msg}");
        assert!(
            msg.contains("feedparser==6.0.11"),
            "the accepted form: {msg}"
        );
    }
}

#[test]
fn too_long_text_is_refused() {
    let long = format!("a{}", "b".repeat(MAX_REQUIREMENT_LEN));
    let (err, msg) = refused(&long);
    assert_eq!(
        err,
        RequirementError::TooLong {
            len: MAX_REQUIREMENT_LEN + 1
        }
    );
    assert!(
        msg.contains("201 characters") && msg.contains("200"),
        "{msg}"
    );
    // Exactly the limit is accepted.
    let at_limit = "a".repeat(MAX_REQUIREMENT_LEN);
    assert!(Requirement::parse(&at_limit).is_ok());
}

#[test]
fn direct_references_and_urls_are_refused() {
    for text in [
        "feedparser @ https://example.org/feedparser-6.0.11.whl",
        "feedparser@https://example.org/x.whl",
        "https://example.org/feedparser-6.0.11-py3-none-any.whl",
        "git+https://github.com/kurtmckee/feedparser",
        "git+ssh://git@example.org/x.git",
        "hg+http://example.org/x",
        "file:///home/u/wheels/x.whl",
        "file:wheels/x.whl",
        "./wheels/x.whl",
        "../x",
        "wheels/x.whl",
        "C:\\wheels\\x.whl",
        "x \\ y",
    ] {
        let (err, msg) = refused(text);
        assert_eq!(
            err,
            RequirementError::DirectReference {
                text: text.trim().into()
            },
            "{text:?}"
        );
        assert!(msg.contains("direct reference"), "{msg}");
        assert!(
            msg.contains("only from the index the user configured"),
            "{msg}"
        );
    }
}

#[test]
fn environment_markers_are_refused() {
    for text in [
        "feedparser; python_version >= '3.8'",
        "feedparser==6.0.11 ; sys_platform == \"linux\"",
        ";",
    ] {
        let (err, msg) = refused(text);
        assert_eq!(
            err,
            RequirementError::Marker { text: text.into() },
            "{text:?}"
        );
        assert!(msg.contains("environment marker"), "{msg}");
    }
}

#[test]
fn pip_options_are_refused() {
    for text in [
        "--index-url x",
        "--extra-index-url=https://evil.example/simple",
        "-e .",
        "-r other.txt",
        "--trusted-host evil.example",
        "-i x",
        "  --no-binary :all:",
    ] {
        let (err, msg) = refused(text);
        assert_eq!(
            err,
            RequirementError::PipOption {
                text: text.trim().into()
            },
            "{text:?}"
        );
        assert!(msg.contains("pip option"), "{msg}");
        assert!(
            msg.contains("only from the index the user configured"),
            "{msg}"
        );
    }
}

#[test]
fn bad_names_are_refused() {
    for text in [
        "_foo", ".foo", "foo-", "foo_ ==1", "[extra]", "==1.0", "ü", "foo.==1",
    ] {
        let (err, msg) = refused(text);
        assert_eq!(
            err,
            RequirementError::Name { text: text.into() },
            "{text:?}"
        );
        assert!(msg.contains("project name"), "{msg}");
    }
}

#[test]
fn bad_extras_are_refused() {
    for (text, extras) in [
        ("foo[bar", "[bar"),
        ("foo[b@r]", ""),
        ("foo[,]", "[,]"),
        ("foo[a,]", "[a,]"),
        ("foo[a b]", "[a b]"),
        ("foo[-a]", "[-a]"),
    ] {
        let err = Requirement::parse(text).unwrap_err();
        if extras.is_empty() {
            // `@` is caught first as a direct reference.
            assert!(matches!(err, RequirementError::DirectReference { .. }));
            continue;
        }
        assert_eq!(
            err,
            RequirementError::Extras {
                text: text.into(),
                extras: extras.into()
            },
            "{text:?}"
        );
        assert!(err.to_string().contains("extras"), "{err}");
    }
}

#[test]
fn bad_versions_are_refused_with_the_reason() {
    for (text, op, version, reason) in [
        ("a==", Op::Eq, "", "is missing"),
        ("a>= ,<2", Op::Ge, "", "is missing"),
        ("a==1.0$", Op::Eq, "1.0$", "holds a character"),
        ("a==1.0)", Op::Eq, "1.0)", "holds a character"),
        ("a>=1.*", Op::Ge, "1.*", "only `==` and `!=`"),
        ("a===1.*", Op::Arbitrary, "1.*", "only `==` and `!=`"),
        ("a==1*", Op::Eq, "1*", "other than one trailing"),
        ("a==*", Op::Eq, "*", "other than one trailing"),
        ("a==1.*.*", Op::Eq, "1.*.*", "other than one trailing"),
        ("a==.*", Op::Eq, ".*", "begin and end"),
        ("a==.1", Op::Eq, ".1", "begin and end"),
        ("a==1.", Op::Eq, "1.", "begin and end"),
        ("a~=1", Op::Compatible, "1", "two release segments"),
        ("a~=1.a", Op::Compatible, "1.a", "two release segments"),
        ("a~=1!2", Op::Compatible, "1!2", "two release segments"),
        ("a~=1.0.*", Op::Compatible, "1.0.*", "only `==` and `!=`"),
    ] {
        let err = Requirement::parse(text).unwrap_err();
        assert_eq!(
            err,
            RequirementError::Version {
                text: text.into(),
                op,
                version: version.into(),
                reason: match &err {
                    RequirementError::Version { reason, .. } => reason,
                    _ => "",
                },
            },
            "{text:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(reason), "{text:?}: {msg}");
        assert!(msg.contains(op.as_str()), "{msg}");
    }
    let long = format!("a=={}", "1".repeat(MAX_VERSION_LEN + 1));
    assert!(refused(&long).1.contains("longer than 64"));
    assert!(Requirement::parse(&format!("a=={}", "1".repeat(MAX_VERSION_LEN))).is_ok());
}

#[test]
fn leftovers_are_refused_saying_where() {
    for (text, column, rest) in [
        ("feedparser 6.0.11", 12, "6.0.11"),
        ("foo (>=1.0)", 5, "(>=1.0)"),
        ("foo[x]]", 7, "]"),
        ("foo==1.0 2.0", 10, "2.0"),
        ("foo=1.0", 4, "=1.0"),
        ("foo>=1 <2", 8, "<2"),
        ("foo:bar", 4, ":bar"),
    ] {
        let err = Requirement::parse(text).unwrap_err();
        assert_eq!(
            err,
            RequirementError::Leftover {
                text: text.into(),
                column,
                rest: rest.into()
            },
            "{text:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&format!("at character {column}")), "{msg}");
        assert!(msg.contains(&format!("{rest:?}")), "{msg}");
    }
}

#[test]
fn a_trailing_comma_is_refused() {
    let (err, msg) = refused("foo>=1,");
    assert_eq!(
        err,
        RequirementError::TrailingComma {
            text: "foo>=1,".into()
        }
    );
    assert!(msg.contains("missing after the last `,`"), "{msg}");
}

#[test]
fn errors_quote_long_text_shortened() {
    let text = format!("{} 1.0", "a".repeat(150));
    let msg = Requirement::parse(&text).unwrap_err().to_string();
    assert!(msg.contains('…'), "{msg}");
    assert!(!msg.contains(&"a".repeat(81)), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// Declarations
// ---------------------------------------------------------------------------------------------

#[test]
fn parse_all_keeps_the_order() {
    let got = parse_all(&strings(&["feedparser==6.0.11", "beautifulsoup4>=4.12"])).unwrap();
    assert_eq!(
        got,
        vec![
            req("feedparser", &[], &[(Op::Eq, "6.0.11")]),
            req("beautifulsoup4", &[], &[(Op::Ge, "4.12")]),
        ]
    );
    assert_eq!(parse_all(&[]).unwrap(), vec![]);
}

#[test]
fn parse_all_names_the_bad_entry() {
    let err = parse_all(&strings(&[
        "feedparser",
        "lxml",
        "x @ https://e.example/x.whl",
    ]))
    .unwrap_err();
    assert!(
        matches!(&err, DeclaredError::Entry { index: 2, text, error: RequirementError::DirectReference { .. } } if text == "x @ https://e.example/x.whl")
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "REQUIRED_PACKAGES[2]: \"x @ https://e.example/x.whl\" is a direct reference"
        ),
        "{msg}"
    );
}

#[test]
fn duplicates_by_normalised_name_are_refused() {
    let err = parse_all(&strings(&["Foo.Bar>=1", "lxml", "foo_bar<2"])).unwrap_err();
    assert_eq!(
        err,
        DeclaredError::Duplicate {
            index: 2,
            text: "foo_bar<2".into(),
            first: 0,
            name: "foo-bar".into()
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("REQUIRED_PACKAGES[2]") && msg.contains("REQUIRED_PACKAGES[0]"));
    assert!(msg.contains("foo-bar>=1.2,<2"), "{msg}");
    // Different extras of one project are still one project.
    assert!(matches!(
        parse_all(&strings(&["requests[socks]", "requests"])),
        Err(DeclaredError::Duplicate {
            index: 1,
            first: 0,
            ..
        })
    ));
}

#[test]
fn more_than_max_packages_are_refused() {
    let names: Vec<String> = (0..=MAX_PACKAGES).map(|i| format!("p{i}")).collect();
    let err = parse_all(&names).unwrap_err();
    assert_eq!(err, DeclaredError::TooMany { count: 65 });
    assert!(err.to_string().contains("at most") || err.to_string().contains("64"));
    assert_eq!(
        parse_all(&names[..MAX_PACKAGES]).unwrap().len(),
        MAX_PACKAGES
    );
}

// ---------------------------------------------------------------------------------------------
// Locks
// ---------------------------------------------------------------------------------------------

/// What `uv pip compile --generate-hashes` prints (annotations included, to show they are
/// tolerated), packages out of order and hashes unsorted.
fn uv_output() -> String {
    format!(
        "# This file was autogenerated by uv via the following command:\n\
         #    uv pip compile --generate-hashes requirements.in\n\
         sgmllib3k==1.0.0 \\\n    --hash=sha256:{c}\n    # via feedparser\n\
         Feedparser==6.0.11 \\\n    --hash=sha256:{b} \\\n    --hash=sha256:{a}\n    # via -r requirements.in\n\
         \n\
         soupsieve==2.5 --hash=sha256:{d} --hash=sha256:{d}  # all on one line\n",
        a = h('a'),
        b = h('b'),
        c = h('c'),
        d = h('d'),
    )
}

fn locked(name: &str, version: &str, hashes: &[char]) -> Locked {
    Locked {
        name: name.into(),
        version: version.into(),
        hashes: hashes.iter().map(|&c| format!("sha256:{}", h(c))).collect(),
    }
}

fn sample_lock() -> Lock {
    Lock {
        packages: vec![
            locked("feedparser", "6.0.11", &['a', 'b']),
            locked("sgmllib3k", "1.0.0", &['c']),
            locked("soupsieve", "2.5", &['d']),
        ],
    }
}

#[test]
fn uv_output_parses_sorted_and_normalised() {
    assert_eq!(Lock::parse(&uv_output()).unwrap(), sample_lock());
}

#[test]
fn upper_case_hashes_are_lowercased() {
    let text = format!("a==1 --hash=sha256:{}\n", h('A'));
    assert_eq!(
        Lock::parse(&text).unwrap().packages[0].hashes,
        vec![format!("sha256:{}", h('a'))]
    );
}

#[test]
fn an_empty_lock_parses_empty() {
    assert!(Lock::parse("").unwrap().is_empty());
    assert!(Lock::parse("# nothing\n\n").unwrap().is_empty());
    assert!(!sample_lock().is_empty());
}

#[test]
fn lock_refusals() {
    let hash = format!("--hash=sha256:{}", h('a'));
    let cases: Vec<(String, LockError, &str)> = vec![
        (
            format!("feedparser>=6 {hash}\n"),
            LockError::NotPinned {
                line: 1,
                text: format!("feedparser>=6 {hash}"),
            },
            "name==version",
        ),
        (
            format!("a==1 {hash}\n{hash}\n"),
            LockError::NotPinned {
                line: 2,
                text: hash.clone(),
            },
            "lock line 2",
        ),
        (
            format!("-e . {hash}\n"),
            LockError::NotPinned {
                line: 1,
                text: format!("-e . {hash}"),
            },
            "name==version",
        ),
        (
            format!("colorama==0.4.6 ; sys_platform == 'win32' \\\n    {hash}\n"),
            LockError::Marker {
                line: 1,
                text: format!("colorama==0.4.6 ; sys_platform == 'win32'      {hash}"),
            },
            "marker",
        ),
        (
            format!("x @ https://e.example/x.whl {hash}\n"),
            LockError::Url {
                line: 1,
                text: format!("x @ https://e.example/x.whl {hash}"),
            },
            "direct reference",
        ),
        (
            format!("x==https://e.example/x.whl {hash}\n"),
            LockError::Url {
                line: 1,
                text: format!("x==https://e.example/x.whl {hash}"),
            },
            "direct reference",
        ),
        (
            "feedparser==6.0.11\n".into(),
            LockError::NoHash {
                line: 1,
                name: "feedparser".into(),
            },
            "--generate-hashes",
        ),
        (
            format!("a==1 --hash=sha256:{}\n", &h('a')[1..]),
            LockError::Hash {
                line: 1,
                text: format!("--hash=sha256:{}", &h('a')[1..]),
            },
            "64 hex digits",
        ),
        (
            format!("a==1 --hash=md5:{}\n", h('a')),
            LockError::Hash {
                line: 1,
                text: format!("--hash=md5:{}", h('a')),
            },
            "sha256",
        ),
        (
            format!("a==1 --hash=sha256:{}\n", h('g')),
            LockError::Hash {
                line: 1,
                text: format!("--hash=sha256:{}", h('g')),
            },
            "sha256",
        ),
        (
            format!("a==1 {hash} --no-deps\n"),
            LockError::Hash {
                line: 1,
                text: "--no-deps".into(),
            },
            "--hash=sha256:",
        ),
        (
            format!("a==1 {hash}\nA==1 {hash}\n"),
            LockError::Repeated {
                line: 2,
                name: "a".into(),
            },
            "a second time",
        ),
        (
            format!("a[x]==1 {hash}\n"),
            LockError::Name {
                line: 1,
                text: "a[x]".into(),
            },
            "project name",
        ),
        (
            format!("a==1.* {hash}\n"),
            LockError::Version {
                line: 1,
                text: "1.*".into(),
            },
            "plain version",
        ),
        (
            format!("a===1 {hash}\n"),
            LockError::Version {
                line: 1,
                text: "=1".into(),
            },
            "plain version",
        ),
    ];
    for (text, expected, phrase) in cases {
        let err = Lock::parse(&text).unwrap_err();
        assert_eq!(err, expected, "{text:?}");
        assert!(err.to_string().contains(phrase), "{err}");
    }
}

#[test]
fn more_than_max_locked_packages_are_refused() {
    let line = |i: usize| format!("p{i}==1.0 --hash=sha256:{}\n", h('a'));
    let at_limit: String = (0..MAX_LOCKED_PACKAGES).map(line).collect();
    assert_eq!(Lock::parse(&at_limit).unwrap().packages.len(), 500);
    let over: String = (0..=MAX_LOCKED_PACKAGES).map(line).collect();
    assert_eq!(Lock::parse(&over).unwrap_err(), LockError::TooMany);
}

#[test]
fn to_requirements_is_sorted_canonical_and_stable() {
    let lock = Lock::parse(&uv_output()).unwrap();
    let expected = format!(
        "feedparser==6.0.11 --hash=sha256:{a} --hash=sha256:{b}\n\
         sgmllib3k==1.0.0 --hash=sha256:{c}\n\
         soupsieve==2.5 --hash=sha256:{d}\n",
        a = h('a'),
        b = h('b'),
        c = h('c'),
        d = h('d'),
    );
    assert_eq!(lock.to_requirements(), expected);
    // Its own text parses back to the same lock, and prints the same again.
    let again = Lock::parse(&lock.to_requirements()).unwrap();
    assert_eq!(again, lock);
    assert_eq!(again.to_requirements(), expected);
    // Another spelling of the same resolution gives the same text (one layer).
    let shuffled = format!(
        "soupsieve==2.5 --hash=sha256:{d}\nSGMLlib3k==1.0.0 --hash=sha256:{c}\n\
         feedparser==6.0.11 --hash=sha256:{b} --hash=sha256:{a} --hash=sha256:{a}\n",
        a = h('a'),
        b = h('b'),
        c = h('c'),
        d = h('d'),
    );
    assert_eq!(Lock::parse(&shuffled).unwrap().to_requirements(), expected);
    assert_eq!(Lock::default().to_requirements(), "");
}

#[test]
fn without_drops_what_the_runtime_has_at_the_same_version() {
    let lock = sample_lock();
    let present: BTreeMap<String, String> = [
        ("sgmllib3k", "1.0.0"), // same version: dropped
        ("soupsieve", "2.4"),   // another version: kept
        ("mcp", "1.2.0"),       // not in the lock: nothing
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        lock.without(&present),
        Lock {
            packages: vec![
                locked("feedparser", "6.0.11", &['a', 'b']),
                locked("soupsieve", "2.5", &['d']),
            ]
        }
    );
    assert_eq!(lock.without(&BTreeMap::new()), lock);
    let all: BTreeMap<String, String> = lock
        .packages
        .iter()
        .map(|p| (p.name.clone(), p.version.clone()))
        .collect();
    assert!(lock.without(&all).is_empty());
}

#[test]
fn describe_lists_names_and_versions() {
    assert_eq!(
        sample_lock().describe(),
        "feedparser 6.0.11, sgmllib3k 1.0.0, soupsieve 2.5"
    );
    assert_eq!(Lock::default().describe(), "no packages");
}

#[test]
fn install_phrase_is_an_english_list() {
    let mut lock = sample_lock();
    assert_eq!(
        install_phrase(&lock, "PyPI"),
        "install feedparser 6.0.11, sgmllib3k 1.0.0 and soupsieve 2.5 from PyPI"
    );
    lock.packages.pop();
    assert_eq!(
        install_phrase(&lock, "the index https://pypi.corp.example/simple"),
        "install feedparser 6.0.11 and sgmllib3k 1.0.0 from the index https://pypi.corp.example/simple"
    );
    lock.packages.pop();
    assert_eq!(
        install_phrase(&lock, "PyPI"),
        "install feedparser 6.0.11 from PyPI"
    );
    assert_eq!(
        install_phrase(&Lock::default(), "PyPI"),
        "install no packages from PyPI"
    );
}

#[test]
fn lock_json_round_trips_and_a_tampered_one_is_refused() {
    let lock = sample_lock();
    let json = serde_json::to_string(&lock).unwrap();
    assert_eq!(serde_json::from_str::<Lock>(&json).unwrap(), lock);
    let good = format!("sha256:{}", h('a'));
    for bad in [
        // Not sorted by name.
        format!(
            r#"{{"packages":[{{"name":"b","version":"1","hashes":["{good}"]}},{{"name":"a","version":"1","hashes":["{good}"]}}]}}"#
        ),
        // A name twice.
        format!(
            r#"{{"packages":[{{"name":"a","version":"1","hashes":["{good}"]}},{{"name":"a","version":"2","hashes":["{good}"]}}]}}"#
        ),
        // Not normalised.
        format!(r#"{{"packages":[{{"name":"A_b","version":"1","hashes":["{good}"]}}]}}"#),
        // No hash.
        r#"{"packages":[{"name":"a","version":"1","hashes":[]}]}"#.to_string(),
        // A bad or upper-case hash.
        r#"{"packages":[{"name":"a","version":"1","hashes":["sha256:00"]}]}"#.to_string(),
        format!(
            r#"{{"packages":[{{"name":"a","version":"1","hashes":["sha256:{}"]}}]}}"#,
            h('A')
        ),
        // A bad version.
        format!(r#"{{"packages":[{{"name":"a","version":"1 ; x","hashes":["{good}"]}}]}}"#),
    ] {
        assert!(serde_json::from_str::<Lock>(&bad).is_err(), "{bad}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Strings shaped like requirements, so the properties reach deep into the grammar.
fn requirementish() -> impl Strategy<Value = String> {
    proptest::string::string_regex(
        r"[ \t]{0,2}[A-Za-z0-9][A-Za-z0-9._-]{0,12}[ ]?(\[[A-Za-z0-9._, -]{0,12}\])?[ ]?((===|==|!=|<=|>=|~=|<|>)[ ]?[A-Za-z0-9.*+!_-]{1,10}[ ]?,?[ ]?){0,3}[;@/ \t]{0,1}",
    )
    .expect("valid regex")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// No string panics the parser.
    #[test]
    fn parse_never_panics(s in prop_oneof![requirementish(), any::<String>()]) {
        let _ = Requirement::parse(&s);
        let _ = Lock::parse(&s);
    }

    /// A parsed requirement's canonical form parses back to the same value, and is its own
    /// canonical form.
    #[test]
    fn display_reparses_to_the_same_value(s in requirementish()) {
        if let Ok(r) = Requirement::parse(&s) {
            let shown = r.to_string();
            let back = Requirement::parse(&shown);
            prop_assert_eq!(back.as_ref(), Ok(&r), "{:?} -> {:?}", s, shown);
            prop_assert_eq!(back.map(|b| b.to_string()), Ok(shown));
        }
    }

    /// A lock's canonical text parses back to the same lock, whatever order and case the
    /// resolver printed.
    #[test]
    fn lock_text_round_trips(lines in proptest::collection::vec(
        ("[A-Za-z][A-Za-z0-9._-]{0,8}[A-Za-z0-9]", "[0-9]{1,3}(\\.[0-9]{1,3}){0,2}",
         proptest::collection::vec("[0-9a-fA-F]{64}", 1..4)),
        0..8,
    )) {
        let mut text = String::new();
        let mut names = std::collections::BTreeSet::new();
        for (name, version, hashes) in &lines {
            if !names.insert(normalize(name)) {
                continue;
            }
            text.push_str(&format!("{name}=={version}"));
            for hash in hashes {
                text.push_str(&format!(" \\\n    --hash=sha256:{hash}"));
            }
            text.push('\n');
        }
        let lock = Lock::parse(&text);
        prop_assert!(lock.is_ok(), "{:?}: {:?}", text, lock);
        let lock = lock.unwrap();
        prop_assert_eq!(lock.packages.len(), names.len());
        prop_assert_eq!(Lock::parse(&lock.to_requirements()), Ok(lock));
    }
}

/// The requirement-shaped strings reach the accepted grammar often, so the round-trip property
/// is exercised on real values rather than vacuously.
#[test]
fn requirementish_strings_often_parse() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = requirementish();
    let parsed = (0..1000)
        .filter(|_| {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            Requirement::parse(&s).is_ok()
        })
        .count();
    assert!(parsed >= 50, "only {parsed} of 1000 parsed");
}
