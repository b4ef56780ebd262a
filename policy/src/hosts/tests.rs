//! Tests of host canonicalisation, allowlist entries, decisions and forbidden addresses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::net::IpAddr;

fn host(s: &str) -> Host {
    canonical_host(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}
fn name(s: &str) -> Host {
    Host::Name(s.to_owned())
}
fn v4(s: &str) -> Host {
    Host::V4(s.parse().unwrap())
}
fn v6(s: &str) -> Host {
    Host::V6(s.parse().unwrap())
}
fn rule(s: &str) -> AllowRule {
    AllowRule::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}
fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn names_fold_case_and_one_trailing_dot() {
    for (input, want) in [
        ("api.example.com", "api.example.com"),
        ("API.Example.COM", "api.example.com"),
        ("api.example.com.", "api.example.com"),
        ("LOCALHOST.", "localhost"),
        ("under_score.example", "under_score.example"),
        ("a-b.c-d.example", "a-b.c-d.example"),
        ("1.2.3.example", "1.2.3.example"),
        ("123abc.example", "123abc.example"),
        ("example.com1", "example.com1"),
        ("x", "x"),
    ] {
        assert_eq!(host(input), name(want), "{input:?}");
    }
}

#[test]
fn international_names_become_their_ascii_form() {
    for (input, want) in [
        ("bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.example", "xn--bcher-kva.example"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("XN--BCHER-KVA.example", "xn--bcher-kva.example"),
        ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
        // Full-width letters and the ideographic full stop.
        ("ｅｘａｍｐｌｅ。com", "example.com"),
        ("münchen.de.", "xn--mnchen-3ya.de"),
    ] {
        assert_eq!(host(input), name(want), "{input:?}");
    }
    // An `xn--` label that is not valid punycode.
    assert!(matches!(
        canonical_host("xn--a.example"),
        Err(HostError::Idna(_))
    ));
    // A full-width solidus maps to `/`, which is refused.
    assert!(canonical_host("evil.com／x.example").is_err());
}

#[test]
fn numeric_ipv4_spellings_fold_to_the_dotted_quad() {
    for input in [
        "127.0.0.1",
        "127.1",
        "127.0.1",
        "0x7f.0.0.1",
        "0X7F.0.0.1",
        "0x7f.1",
        "0177.0.0.1",
        "0177.0.0.01",
        "2130706433",
        "0x7f000001",
        "017700000001",
        "127.0.0.1.",
        "１２７.０.０.１",
    ] {
        assert_eq!(host(input), v4("127.0.0.1"), "{input:?}");
    }
    assert_eq!(host("169.254.43518"), v4("169.254.169.254"));
    assert_eq!(host("0xa9fea9fe"), v4("169.254.169.254"));
    assert_eq!(host("10.1"), v4("10.0.0.1"));
    assert_eq!(host("0"), v4("0.0.0.0"));
    assert_eq!(host("0x"), v4("0.0.0.0"));
    assert_eq!(host("255.255.255.255"), v4("255.255.255.255"));
    assert_eq!(host("4294967295"), v4("255.255.255.255"));
}

#[test]
fn names_ending_in_a_number_must_be_addresses() {
    for input in [
        "1.2.3.4.5",
        "256.0.0.1",
        "1.2.3.256",
        "4294967296",
        "1.16777216",
        "08.0.0.1",
        "0x1g.0.0.1",
        "example.123",
        "example.0x10",
        "99999999999999999999999",
    ] {
        assert!(
            matches!(canonical_host(input), Err(HostError::Ipv4(_))),
            "{input:?}: {:?}",
            canonical_host(input)
        );
    }
}

#[test]
fn ipv6_literals_in_brackets_and_ipv4_mapped() {
    assert_eq!(host("[::1]"), v6("::1"));
    assert_eq!(host("::1"), v6("::1"));
    assert_eq!(host("[2001:DB8::1]"), v6("2001:db8::1"));
    assert_eq!(host("[2001:db8:0:0:0:0:0:1]"), v6("2001:db8::1"));
    assert_eq!(host("[::ffff:127.0.0.1]"), v4("127.0.0.1"));
    assert_eq!(host("::ffff:7f00:1"), v4("127.0.0.1"));
    assert_eq!(host("[::ffff:169.254.169.254]"), v4("169.254.169.254"));
    for bad in [
        "[::1",
        "[::1]x",
        "[nope]",
        "[127.0.0.1]",
        "[::1%lo]",
        "1::2::3",
    ] {
        assert!(canonical_host(bad).is_err(), "{bad:?}");
    }
    assert_eq!(host("[::1]").to_string(), "[::1]");
}

#[test]
fn dangerous_characters_are_refused() {
    for input in [
        "evil.com\0.example",
        "evil.com\r\nX-Injected: 1",
        "evil.com\n",
        "user@api.example.com",
        "api.example.com%2f",
        "api%2eexample.com",
        "api.example.com/path",
        "api.example.com\\x",
        "api example.com",
        " api.example.com",
        "api.example.com\t",
        "api.example.com?q",
        "api.example.com#f",
        "api.exa\u{7f}mple.com",
        "api.example.com:443",
        "*.example.com",
        "exa<mple.com",
        "a|b.example",
    ] {
        assert!(canonical_host(input).is_err(), "{input:?} was accepted");
    }
    let err = canonical_host("a\r\nb").unwrap_err();
    assert!(err.to_string().contains("carriage return"), "{err}");
    assert!(
        !err.to_string().contains('\r'),
        "the message must escape it: {err}"
    );
}

#[test]
fn empty_labels_and_lengths() {
    assert_eq!(canonical_host(""), Err(HostError::Empty));
    assert_eq!(canonical_host("."), Err(HostError::Empty));
    for input in ["a..b", ".a", "a.b..", "..", "a.b.."] {
        assert!(
            matches!(canonical_host(input), Err(HostError::EmptyLabel(_))),
            "{input:?}: {:?}",
            canonical_host(input)
        );
    }
    let label63 = "a".repeat(63);
    assert_eq!(
        host(&format!("{label63}.example")),
        name(&format!("{label63}.example"))
    );
    assert!(matches!(
        canonical_host(&format!("{}.example", "a".repeat(64))),
        Err(HostError::LabelTooLong(_))
    ));
    // 4 × 63 + 3 dots = 255 > 253; 3 × 63 + 61 + 3 = 253 fits, with or without a dot.
    let long = [label63.as_str(); 4].join(".");
    assert_eq!(canonical_host(&long), Err(HostError::TooLong(255)));
    let fits = format!("{}.{}", [label63.as_str(); 3].join("."), "b".repeat(61));
    assert_eq!(fits.len(), 253);
    assert_eq!(host(&fits), name(&fits));
    assert_eq!(host(&format!("{fits}.")), name(&fits));
    assert!(canonical_host(&format!("{fits}b")).is_err());
}

#[test]
fn authorities_carry_a_port() {
    assert_eq!(
        parse_authority("API.example.com:8443").unwrap(),
        (name("api.example.com"), Some(8443))
    );
    assert_eq!(
        parse_authority("api.example.com").unwrap(),
        (name("api.example.com"), None)
    );
    assert_eq!(
        parse_authority("[::1]:9000").unwrap(),
        (v6("::1"), Some(9000))
    );
    assert_eq!(parse_authority("[::1]").unwrap(), (v6("::1"), None));
    assert_eq!(
        parse_authority("127.1:80").unwrap(),
        (v4("127.0.0.1"), Some(80))
    );
    for bad in [
        "a.example:",
        "a.example:0",
        "a.example:65536",
        "a.example:+80",
        "a.example:8o",
        "a.example:080080",
        "::1:80",
        "[::1]80",
        "[::1",
        ":80",
    ] {
        assert!(parse_authority(bad).is_err(), "{bad:?}");
    }
    assert_eq!(parse_port("00443"), Ok(443));
}

#[test]
fn localhost_is_the_name_and_the_loopback_addresses() {
    for s in [
        "localhost",
        "LocalHost.",
        "127.0.0.1",
        "127.9.9.9",
        "127.1",
        "[::1]",
    ] {
        assert!(host(s).is_localhost(), "{s}");
    }
    assert!(host("[::ffff:127.0.0.1]").is_localhost());
    for s in [
        "localhost.example",
        "a.localhost",
        "10.0.0.1",
        "[::2]",
        "0.0.0.0",
    ] {
        assert!(!host(s).is_localhost(), "{s}");
    }
}

#[test]
fn allow_rules_parse_as_typed() {
    assert_eq!(
        rule("api.x.com"),
        AllowRule {
            host: HostPattern::Exact(name("api.x.com")),
            port: None
        }
    );
    assert_eq!(
        rule("*.X.com."),
        AllowRule {
            host: HostPattern::SubdomainsOf("x.com".into()),
            port: None
        }
    );
    assert_eq!(
        rule("api.x.com:8443"),
        AllowRule {
            host: HostPattern::Exact(name("api.x.com")),
            port: Some(8443)
        }
    );
    assert_eq!(
        rule("*.bücher.example:8080").to_string(),
        "*.xn--bcher-kva.example:8080"
    );
    assert_eq!(rule("0x7f.1:80").to_string(), "localhost:80");
    for typed in [
        "api.x.com",
        "*.x.com",
        "api.x.com:8443",
        "[2001:db8::1]:1",
        "localhost:8080",
    ] {
        assert_eq!(rule(&rule(typed).to_string()), rule(typed), "{typed}");
    }
    for (bad, why) in [
        ("", "empty"),
        ("https://api.x.com", "scheme"),
        ("api.x.com/v1", "path"),
        ("*", "bare star"),
        ("*x.com", "star in a label"),
        ("api.*.x.com", "star in the middle"),
        ("*.*.x.com", "two stars"),
        ("*.127.0.0.1", "wildcard address"),
        ("*.[::1]", "wildcard address"),
        ("api.x.com:0", "port 0"),
        ("user@api.x.com", "userinfo"),
        ("api x.com", "space"),
    ] {
        assert!(AllowRule::parse(bad).is_err(), "{bad:?} ({why})");
    }
    assert!(matches!(
        AllowRule::parse("*.10.0.0.1"),
        Err(RuleError::WildcardAddress(_))
    ));
}

#[test]
fn entries_naming_a_public_suffix_are_refused() {
    for bad in [
        "*.com",
        "*.COM.",
        "*.co.uk",
        "*.github.io",
        "*.s3.amazonaws.com",
        "*.xn--p1ai",
        "*.рф",
        "com",
        "co.uk",
        "github.io:8443",
        "*.com:8443",
        // Under a wildcard rule of the list (`*.ck`), every second-level name is a suffix.
        "*.anything.ck",
    ] {
        match AllowRule::parse(bad) {
            Err(RuleError::PublicSuffix { suffix, .. }) => {
                assert!(is_public_suffix(&suffix), "{bad:?}: {suffix}")
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let message = AllowRule::parse("*.co.uk").unwrap_err().to_string();
    assert!(message.contains("`co.uk` is a public suffix"), "{message}");
    assert!(message.contains("*.example.co.uk"), "{message}");
    // The control: one label more is someone's own domain, and passes.
    for good in [
        "*.example.com",
        "*.example.co.uk",
        "*.octocat.github.io",
        "example.co.uk",
        "octocat.github.io",
        "*.bucket.s3.amazonaws.com",
        // An exception rule of the list (`!www.ck`): a registrable name, not a suffix.
        "www.ck",
        // No rule of the list names these: the implicit `*` rule is not applied.
        "*.corp",
        "intranet",
        "*.internal",
        "localhost:8080",
        "[2001:db8::1]:1",
    ] {
        assert!(AllowRule::parse(good).is_ok(), "{good:?}");
    }
    // A stored list holding such an entry (written before the rule) allows nothing.
    assert!(KeyAllowlist::parse("K", Some(&["*.com"][..])).is_err());
}

#[test]
fn allow_rules_match_hosts_and_ports() {
    let exact = rule("api.x.com");
    assert!(exact.matches(&name("api.x.com"), 443));
    assert!(exact.matches(&name("api.x.com"), 80));
    assert!(!exact.matches(&name("api.x.com"), 8443));
    assert!(!exact.matches(&name("x.com"), 443));
    assert!(!exact.matches(&name("sub.api.x.com"), 443));
    assert!(!exact.matches(&name("api.x.com.evil.example"), 443));

    let sub = rule("*.x.com");
    assert!(sub.matches(&name("api.x.com"), 443));
    assert!(sub.matches(&name("a.b.x.com"), 80));
    assert!(!sub.matches(&name("x.com"), 443));
    assert!(!sub.matches(&name("evilx.com"), 443));
    assert!(!sub.matches(&name("x.com.evil.example"), 443));
    assert!(!sub.matches(&name("api.x.com"), 22));
    assert!(!sub.matches(&v4("10.0.0.1"), 443));

    let ported = rule("api.x.com:8443");
    assert!(ported.matches(&name("api.x.com"), 8443));
    assert!(!ported.matches(&name("api.x.com"), 443));

    let addr = rule("[2001:db8::1]:9000");
    assert!(addr.matches(&v6("2001:db8::1"), 9000));
    assert!(!addr.matches(&v6("2001:db8::2"), 9000));
    assert!(rule("10.0.0.1:443").matches(&host("0x0a000001"), 443));
}

#[test]
fn every_spelling_of_the_loopback_is_one_entry_with_its_port() {
    for typed in [
        "localhost:8080",
        "LocalHost.:8080",
        "127.0.0.1:8080",
        "127.1:8080",
        "0x7f000001:8080",
        "[::1]:8080",
        "[::ffff:127.0.0.1]:8080",
        "127.9.9.9:8080",
    ] {
        let r = rule(typed);
        assert_eq!(r.to_string(), "localhost:8080", "{typed}");
        for target in ["localhost", "127.0.0.1", "127.0.0.2", "[::1]", "0177.0.0.1"] {
            assert!(r.matches(&host(target), 8080), "{typed} / {target}");
            assert!(!r.matches(&host(target), 8081), "{typed} / {target}");
            assert!(!r.matches(&host(target), 443), "{typed} / {target}");
        }
        assert!(!r.matches(&name("localhost.example"), 8080));
        assert!(!r.matches(&v4("10.0.0.1"), 8080));
    }
    // Without its port, the loopback is refused with the reason.
    for typed in ["localhost", "127.0.0.1", "[::1]", "LOCALHOST."] {
        assert!(
            matches!(AllowRule::parse(typed), Err(RuleError::LoopbackPort(_))),
            "{typed}: {:?}",
            AllowRule::parse(typed)
        );
    }
    let err = AllowRule::parse("localhost").unwrap_err().to_string();
    assert!(err.contains("localhost:8080"), "{err}");
    // Names under localhost are names like any other.
    assert_eq!(rule("a.localhost").to_string(), "a.localhost");
}

fn none() -> ApiBasePorts {
    ApiBasePorts::default()
}

fn tavily() -> KeyLists {
    KeyLists::new("search_tool")
        .with_key(KeyAllowlist::parse("TAVILY_API_KEY", Some(&["api.tavily.com"][..])).unwrap())
}

#[test]
fn a_tool_without_keys_or_lists_is_not_narrowed() {
    let plain = KeyLists::new("plain");
    assert_eq!(
        decide(&name("anything.example"), 8443, &plain, &none()),
        Decision::Allow
    );
    let unlisted = KeyLists::new("t").with_key(KeyAllowlist::unrestricted("K"));
    assert_eq!(
        decide(&name("anything.example"), 443, &unlisted, &none()),
        Decision::Allow
    );
    assert_eq!(
        KeyAllowlist::parse::<&str>("K", None).unwrap(),
        KeyAllowlist::unrestricted("K")
    );
}

#[test]
fn the_allowed_set_is_the_intersection_of_the_lists() {
    let lists = KeyLists::new("two_keys")
        .with_key(KeyAllowlist::parse("A_KEY", Some(&["*.x.com", "shared.example"][..])).unwrap())
        .with_key(KeyAllowlist::unrestricted("FREE_KEY"))
        .with_key(
            KeyAllowlist::parse("B_KEY", Some(&["api.x.com", "shared.example:8443"][..])).unwrap(),
        );
    let allowed = |h: &str, port| decide(&host(h), port, &lists, &none()).is_allowed();
    assert!(allowed("api.x.com", 443));
    // On A's list only, on B's only.
    assert!(!allowed("www.x.com", 443));
    assert!(!allowed("shared.example", 443));
    assert!(!allowed("shared.example", 8443));
    // The loopback is a host like any other: no list names it.
    for h in ["localhost", "127.0.0.1", "[::1]", "127.1"] {
        assert!(!allowed(h, 5432), "{h}");
        assert!(!allowed(h, 443), "{h}");
    }
    assert!(!allowed("localhost.evil.example", 443));
}

#[test]
fn a_loopback_port_needs_every_list_or_an_api_base() {
    let a = KeyAllowlist::parse("A_KEY", Some(&["api.x.com", "localhost:8080"][..])).unwrap();
    let b = KeyAllowlist::parse("B_KEY", Some(&["api.x.com"][..])).unwrap();
    let b_too = KeyAllowlist::parse("B_KEY", Some(&["api.x.com", "[::1]:8080"][..])).unwrap();
    let free = KeyAllowlist::unrestricted("FREE_KEY");
    let tool = |keys: &[&KeyAllowlist]| {
        keys.iter()
            .fold(KeyLists::new("t"), |l, k| l.with_key((*k).clone()))
    };
    let api = ApiBasePorts::from_vars([("LOCAL_API_BASE", "http://127.0.0.1:9000/v1")]);
    let allowed =
        |lists: &KeyLists, h: &str, port| decide(&host(h), port, lists, &api).is_allowed();
    for h in ["localhost", "127.0.0.1", "[::1]", "127.0.0.2"] {
        // A alone: its list names the port; others stay closed.
        assert!(allowed(&tool(&[&a]), h, 8080), "{h}");
        assert!(!allowed(&tool(&[&a]), h, 8081), "{h}");
        // A and B: B's list does not name it, so B may not be sent there.
        assert!(!allowed(&tool(&[&a, &b]), h, 8080), "{h}");
        assert!(allowed(&tool(&[&a, &b_too]), h, 8080), "{h}");
        // A key without a list neither opens nor narrows it.
        assert!(allowed(&tool(&[&a, &free]), h, 8080), "{h}");
        assert!(!allowed(&tool(&[&free]), h, 8080), "{h}");
        // No key: only the api-base ports.
        assert!(!allowed(&tool(&[]), h, 8080), "{h}");
        // The api-base port, for every tool, whatever its lists.
        for keys in [&[][..], &[&free][..], &[&a, &b][..]] {
            assert!(allowed(&tool(keys), h, 9000), "{h}");
        }
    }
    // The api-base port opens the loopback only, never a name.
    assert!(!allowed(&tool(&[&a]), "api.x.com", 9000));
    assert!(allowed(&tool(&[]), "api.x.com", 9000));
}

#[test]
fn loopback_refusals_say_how_to_allow_the_port() {
    let lists = KeyLists::new("t")
        .with_key(KeyAllowlist::parse("A_KEY", Some(&["api.x.com"][..])).unwrap());
    let Decision::Deny(d) = decide(&host("127.0.0.1"), 8080, &lists, &none()) else {
        panic!("allowed")
    };
    assert_eq!(d.target, "localhost:8080");
    assert_eq!(
        d.to_string(),
        "t may not reach localhost:8080: a port on this machine's loopback is reachable \
             only when the user allowed it (a local proxy, tunnel or service there could carry \
             a key anywhere); t holds A_KEY, which may only be sent to api.x.com, and \
             localhost:8080 is not on that list. To allow it, the user can run `autotool keys \
             allow A_KEY api.x.com localhost:8080`, or point a `*_API_BASE` variable of \
             autotool serve's environment at it (for example \
             `LOCAL_API_BASE=http://localhost:8080` in the host config's `env` block), which \
             every tool may then reach."
    );
    let Decision::Deny(d) = decide(&host("[::1]"), 80, &KeyLists::new("t"), &none()) else {
        panic!("allowed")
    };
    assert!(d.keys.is_empty() && d.commands().is_empty(), "{d:?}");
    let text = d.to_string();
    assert!(text.starts_with("t may not reach localhost:80: "), "{text}");
    assert!(
        text.contains("LOCAL_API_BASE=http://localhost:80"),
        "{text}"
    );
    assert!(!text.contains("keys allow"), "{text}");
    let free = KeyLists::new("t").with_key(KeyAllowlist::unrestricted("FREE_KEY"));
    let Decision::Deny(d) = decide(&host("localhost"), 5432, &free, &none()) else {
        panic!("allowed")
    };
    assert!(
        d.to_string().contains(
            "or give a key it holds a list that names it (`autotool keys allow FREE_KEY \
                 localhost:5432`, which also limits FREE_KEY to that list)."
        ),
        "{d}"
    );
}

#[test]
fn api_base_urls_on_the_loopback_give_their_port() {
    for (url, port) in [
        ("http://localhost:8080", Some(8080)),
        ("http://localhost:8080/v1?x#y", Some(8080)),
        ("HTTP://LOCALHOST", Some(80)),
        ("https://127.0.0.1", Some(443)),
        ("https://127.1:8443/", Some(8443)),
        ("http://[::1]:9000/api", Some(9000)),
        ("http://user:pw@localhost:7000", Some(7000)),
        (" http://localhost:1 ", Some(1)),
        ("ws://localhost", Some(80)),
        ("http://api.example.com:8080", None),
        ("http://10.0.0.1:8080", None),
        ("http://localhost.example:8080", None),
        ("ftp://localhost:21", None),
        ("localhost:8080", None),
        ("http://localhost:0", None),
        ("http://localhost:99999", None),
        ("", None),
    ] {
        assert_eq!(loopback_port_of_url(url), port, "{url:?}");
    }
    let ports = ApiBasePorts::from_vars([
        ("WEATHER_API_BASE", "http://localhost:8080"),
        ("OTHER_API_BASE", "http://127.0.0.1:8080/v2"),
        ("REMOTE_API_BASE", "https://api.example.com"),
        ("NOT_A_BASE", "http://localhost:7000"),
        ("HN_API_BASE", "http://localhost:9000"),
    ]);
    assert_eq!(ports.ports().collect::<Vec<_>>(), [8080, 9000]);
    assert_eq!(
        ports.variables(8080),
        ["WEATHER_API_BASE", "OTHER_API_BASE"]
    );
    assert!(ports.contains(9000) && !ports.contains(7000) && !ports.contains(443));
}

#[test]
fn a_denial_names_tool_key_host_and_the_command() {
    let Decision::Deny(denial) = decide(&name("evil.example"), 443, &tavily(), &none()) else {
        panic!("allowed")
    };
    assert_eq!(
        denial,
        Denial {
            tool: "search_tool".into(),
            target: "evil.example".into(),
            keys: vec![KeyDenial {
                key: "TAVILY_API_KEY".into(),
                allowed: vec!["api.tavily.com".into()],
            }],
            loopback: None,
            reach: None,
        }
    );
    assert_eq!(
        denial.to_string(),
        "search_tool holds TAVILY_API_KEY, which may only be sent to api.tavily.com; \
             evil.example is not on that list. To allow it, the user can run \
             `autotool keys allow TAVILY_API_KEY api.tavily.com evil.example`."
    );
    // Another port: the command names it.
    let Decision::Deny(denial) = decide(&name("api.tavily.com"), 8443, &tavily(), &none()) else {
        panic!("allowed")
    };
    assert_eq!(
        denial.commands(),
        ["autotool keys allow TAVILY_API_KEY api.tavily.com api.tavily.com:8443"]
    );
    // Two keys refuse: both named, both commands given.
    let lists = tavily().with_key(
        KeyAllowlist::parse("OTHER_KEY", Some(&["*.other.example", "[::2]:9"][..])).unwrap(),
    );
    let Decision::Deny(denial) = decide(&v6("2001:db8::1"), 8080, &lists, &none()) else {
        panic!("allowed")
    };
    assert_eq!(denial.target, "[2001:db8::1]:8080");
    assert_eq!(
        denial.to_string(),
        "search_tool holds TAVILY_API_KEY, which may only be sent to api.tavily.com and \
             OTHER_KEY, which may only be sent to *.other.example, [::2]:9; [2001:db8::1]:8080 \
             is not on those lists. To allow it, the user can run `autotool keys allow \
             TAVILY_API_KEY api.tavily.com [2001:db8::1]:8080` and `autotool keys allow \
             OTHER_KEY *.other.example [::2]:9 [2001:db8::1]:8080`."
    );
}

#[test]
fn decisions_are_ordered_strictest_last() {
    let deny = decide(&name("evil.example"), 443, &tavily(), &none());
    assert!(Decision::Allow < deny);
    assert_eq!(
        [Decision::Allow, deny.clone(), Decision::Allow]
            .into_iter()
            .max(),
        Some(deny)
    );
}

#[test]
fn stored_lists_with_a_bad_entry_are_an_error() {
    let err =
        KeyAllowlist::parse("K", Some(&["ok.example", "https://bad.example/"][..])).unwrap_err();
    assert!(matches!(err, RuleError::NotAHost(_)), "{err}");
}

#[test]
fn forbidden_ipv4_classes() {
    use ForbiddenAddress::*;
    for (addr, class) in [
        ("0.0.0.0", Unspecified),
        ("0.1.2.3", Unspecified),
        ("127.0.0.1", Loopback),
        ("127.255.255.254", Loopback),
        ("10.0.0.1", Private),
        ("172.16.0.1", Private),
        ("172.31.255.255", Private),
        ("192.168.1.1", Private),
        ("100.64.0.1", SharedAddressSpace),
        ("100.127.255.255", SharedAddressSpace),
        ("169.254.0.1", LinkLocal),
        ("169.254.169.254", CloudMetadata),
        ("100.100.100.200", CloudMetadata),
        ("168.63.129.16", CloudMetadata),
        ("224.0.0.1", Multicast),
        ("239.255.255.250", Multicast),
        ("240.0.0.1", Reserved),
        ("255.255.255.255", Broadcast),
        ("192.0.2.1", Reserved),
        ("198.18.0.1", Reserved),
        ("203.0.113.9", Reserved),
    ] {
        assert_eq!(forbidden_class(ip(addr)), Some(class), "{addr}");
        assert!(is_forbidden(ip(addr)));
    }
    for public in [
        "1.1.1.1",
        "8.8.8.8",
        "172.32.0.1",
        "100.128.0.1",
        "172.15.255.255",
        "93.184.216.34",
    ] {
        assert_eq!(forbidden_class(ip(public)), None, "{public}");
    }
}

#[test]
fn forbidden_ipv6_classes_and_embedded_ipv4() {
    use ForbiddenAddress::*;
    for (addr, class) in [
        ("::", Unspecified),
        ("::1", Loopback),
        ("::ffff:127.0.0.1", Loopback),
        ("::ffff:10.0.0.1", Private),
        ("::ffff:169.254.169.254", CloudMetadata),
        ("::10.0.0.1", Reserved),
        ("fd00:ec2::254", CloudMetadata),
        ("fd12:3456::1", UniqueLocal),
        ("fc00::1", UniqueLocal),
        ("fe80::1", LinkLocal),
        ("febf::1", LinkLocal),
        ("fec0::1", Private),
        ("ff02::1", Multicast),
        ("64:ff9b::a9fe:a9fe", CloudMetadata),
        ("64:ff9b::10.0.0.1", Private),
        ("64:ff9b:1::1", Private),
        ("2002:a9fe:a9fe::1", CloudMetadata),
        ("2002:c0a8:0101::1", Private),
        ("2001:db8::1", Reserved),
        ("2001:0:4136:e378::1", Reserved),
        ("100::1", Reserved),
    ] {
        assert_eq!(forbidden_class(ip(addr)), Some(class), "{addr}");
    }
    for public in [
        "2606:4700:4700::1111",
        "2a00:1450::1",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ] {
        assert_eq!(forbidden_class(ip(public)), None, "{public}");
    }
}

#[test]
fn loopback_is_allowed_only_when_the_target_is_localhost() {
    assert_eq!(check_address(&name("localhost"), ip("127.0.0.1")), Ok(()));
    assert_eq!(check_address(&name("localhost"), ip("::1")), Ok(()));
    assert_eq!(check_address(&v4("127.0.0.2"), ip("127.0.0.2")), Ok(()));
    assert_eq!(
        check_address(&name("api.example.test"), ip("127.0.0.1")),
        Err(ForbiddenAddress::Loopback)
    );
    assert_eq!(
        check_address(&name("localhost"), ip("10.0.0.1")),
        Err(ForbiddenAddress::Private)
    );
    assert_eq!(
        check_address(&name("api.example.test"), ip("169.254.169.254")),
        Err(ForbiddenAddress::CloudMetadata)
    );
    assert_eq!(
        check_address(&name("api.example.test"), ip("1.1.1.1")),
        Ok(())
    );
}

fn rules(entries: &[&str]) -> Vec<AllowRule> {
    entries
        .iter()
        .map(|e| AllowRule::parse(e).unwrap())
        .collect()
}

#[test]
fn which_entries_cover_which() {
    let r = |e: &str| AllowRule::parse(e).unwrap();
    for (wide, narrow) in [
        ("api.x.com", "api.x.com"),
        ("API.X.com.", "api.x.com"),
        ("*.x.com", "api.x.com"),
        ("*.x.com", "a.b.x.com"),
        ("*.x.com", "*.b.x.com"),
        ("*.x.com", "*.x.com"),
        ("api.x.com", "api.x.com:443"),
        ("api.x.com", "api.x.com:80"),
        ("api.x.com:8443", "api.x.com:8443"),
        ("*.x.com", "a.x.com:443"),
    ] {
        assert!(r(wide).covers(&r(narrow)), "{wide} should cover {narrow}");
    }
    for (a, b) in [
        ("api.x.com", "x.com"),
        ("*.x.com", "x.com"),
        ("api.x.com", "*.x.com"),
        ("*.b.x.com", "*.x.com"),
        ("*.x.com", "a.x.co"),
        ("*.x.com", "ax.com"),
        ("api.x.com", "api.x.com:8443"),
        ("api.x.com:443", "api.x.com"),
        ("api.x.com:8443", "api.x.com:443"),
        ("*.x.com", "127.0.0.1:80"),
    ] {
        assert!(!r(a).covers(&r(b)), "{a} should not cover {b}");
    }
}

#[test]
fn widening_is_any_new_reach() {
    let old = rules(&["api.x.com", "*.y.com"]);
    // Same, narrower, respelt, reordered: not wider.
    for new in [
        vec![],
        rules(&["api.x.com"]),
        rules(&["*.y.com", "API.X.COM."]),
        rules(&["a.y.com", "*.b.y.com"]),
    ] {
        assert!(!widens(Some(&new), Some(&old)), "{new:?}");
    }
    for new in [
        rules(&["api.x.com", "z.com"]),
        rules(&["x.com"]),
        rules(&["api.x.com:8443"]),
        rules(&["y.com"]),
    ] {
        assert!(widens(Some(&new), Some(&old)), "{new:?}");
    }
    // Removing the list is the widest change; any list is narrower than none.
    assert!(widens(None, Some(&old)));
    assert!(!widens(Some(&old), None));
    assert!(!widens(None, None));
}

// ---------------------------------------------------------------------------------------------
// Declared reach (`REQUIRED_HOSTS`)

fn reach(tool: &str, hosts: &[&str]) -> KeyLists {
    KeyLists::new(tool).with_reach(hosts.iter().map(|h| rule(h)).collect())
}

#[test]
fn a_tool_with_declared_reach_reaches_exactly_its_hosts() {
    let weather = reach(
        "weather",
        &["api.open-meteo.com", "*.wikipedia.org", "data.example:8443"],
    );
    let allowed = |h: &str, port| decide(&host(h), port, &weather, &none()).is_allowed();
    // Control: what it declared answers, on the ports an entry covers.
    assert!(allowed("api.open-meteo.com", 443));
    assert!(allowed("API.Open-Meteo.com.", 80));
    assert!(allowed("en.wikipedia.org", 443));
    assert!(allowed("a.b.wikipedia.org", 443));
    assert!(allowed("data.example", 8443));
    // The attack: anything else, however it is spelt.
    for (h, port) in [
        ("api.open-meteo.com", 8443),
        ("open-meteo.com", 443),
        ("evil.example", 443),
        ("wikipedia.org", 443),
        ("xwikipedia.org", 443),
        ("wikipedia.org.evil", 443),
        ("en.wikipedia.org.evil.example", 443),
        ("data.example", 443),
        ("93.184.216.34", 443),
    ] {
        assert!(!allowed(h, port), "{h}:{port}");
    }
    // `evil.com/.wikipedia.org` is not a host at all: refused before any decision.
    assert!(canonical_host("evil.com/.wikipedia.org").is_err());
    assert!(AllowRule::parse("evil.com/.wikipedia.org").is_err());
}

#[test]
fn a_tool_that_declares_nothing_reaches_nothing() {
    let nothing = reach("quiet", &[]);
    for h in ["api.open-meteo.com", "example.com", "1.1.1.1"] {
        assert!(
            !decide(&host(h), 443, &nothing, &none()).is_allowed(),
            "{h}"
        );
    }
    // The user's own `*_API_BASE` ports stay reachable for every tool.
    let bases = ApiBasePorts::from_vars([("WEATHER_API_BASE", "http://localhost:9000")]);
    assert!(decide(&host("localhost"), 9000, &nothing, &bases).is_allowed());
    assert!(!decide(&host("localhost"), 9001, &nothing, &bases).is_allowed());
}

#[test]
fn a_tool_from_before_declared_reach_keeps_any_public_host() {
    let legacy = KeyLists::new("old");
    assert!(decide(&host("anything.example"), 443, &legacy, &none()).is_allowed());
    assert!(!decide(&host("localhost"), 8080, &legacy, &none()).is_allowed());
}

#[test]
fn declared_loopback_ports_open_only_themselves() {
    let local = reach("local", &["localhost:8080"]);
    assert!(decide(&host("127.0.0.1"), 8080, &local, &none()).is_allowed());
    assert!(decide(&v6("::1"), 8080, &local, &none()).is_allowed());
    assert!(!decide(&host("localhost"), 8081, &local, &none()).is_allowed());
    assert!(!decide(&host("localhost"), 443, &local, &none()).is_allowed());
}

#[test]
fn declared_hosts_never_carry_a_listed_key_beyond_its_list() {
    // A key with a list: its list decides, the declared hosts add nothing (the proxy cannot
    // tell which request carries the key) and take nothing away.
    let both = tavily().with_reach(vec![rule("api.open-meteo.com")]);
    assert!(decide(&host("api.tavily.com"), 443, &both, &none()).is_allowed());
    let Decision::Deny(d) = decide(&host("api.open-meteo.com"), 443, &both, &none()) else {
        panic!("a declared host carried a listed key beyond its list")
    };
    assert_eq!(d.reach, None);
    assert_eq!(d.keys.len(), 1);
    // Keys without a list do not narrow: the declared hosts are the reach.
    let unlisted = reach("u", &["api.open-meteo.com"]).with_key(KeyAllowlist::unrestricted("K"));
    assert!(decide(&host("api.open-meteo.com"), 443, &unlisted, &none()).is_allowed());
    assert!(!decide(&host("evil.example"), 443, &unlisted, &none()).is_allowed());
}

#[test]
fn a_reach_denial_names_what_was_granted_and_how_to_widen_it() {
    let weather = reach("weather", &["api.open-meteo.com"]);
    let Decision::Deny(d) = decide(&host("evil.example"), 443, &weather, &none()) else {
        panic!("allowed")
    };
    assert_eq!(
        d.reach.as_deref(),
        Some(&["api.open-meteo.com".to_string()][..])
    );
    assert_eq!(
        d.to_string(),
        "weather may reach only the hosts it declares in REQUIRED_HOSTS and the user granted \
         (api.open-meteo.com); evil.example is not one of them, so it was refused before any \
         lookup. To reach it, the tool must declare it (REQUIRED_HOSTS = [\"evil.example\"]) and \
         the user approve it (`autotool tools approve weather --reach`)."
    );
    let Decision::Deny(d) = decide(&host("localhost"), 8080, &reach("q", &[]), &none()) else {
        panic!("allowed")
    };
    let text = d.to_string();
    assert!(
        text.contains("(none)") && text.contains("LOCAL_API_BASE=http://localhost:8080"),
        "{text}"
    );
}
