//! Property tests of host canonicalisation and allowlist decisions: where hand-picked spellings
//! run out. No input panics; canonicalising is idempotent; every accepted spelling of a host is
//! that one host, so a host the allowlist refuses is refused however it is written (numeric
//! IPv4 forms, IPv4-mapped IPv6, trailing dot, case, full-width forms, IDNA); and a decision
//! never allows what a key's list leaves out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::name::ends_in_number;
use super::*;
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};

/// Strings made of what host names, addresses and authorities are made of, and of what
/// attackers put in them.
fn hostish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => "[a-zA-Z0-9]{1,6}",
        2 => prop::sample::select(vec![
            ".", "..", ":", "[", "]", "::", "::ffff:", "0x", "0X", "0", "%", "@", "/", "\\", "*",
            "-", "_", "xn--", "ü", "Ü", "ß", "ｅ", "１", "。", "．", "\u{0}", "\r\n", " ",
            "localhost", "127", "255", "4294967295", "ffff", "\u{200b}", "\u{feff}",
        ])
        .prop_map(String::from),
        1 => any::<char>().prop_map(String::from),
    ];
    vec(piece, 0..10).prop_map(|p| p.concat())
}

/// A label of a DNS name: not all digits (so the name stays a name), and no `--` (so never an
/// `xn--` label or one IDNA reserves).
fn label() -> impl Strategy<Value = String> {
    "[a-z]([a-z0-9]|-[a-z0-9]){0,8}"
}

fn dns_name() -> impl Strategy<Value = String> {
    vec(label(), 1..4).prop_map(|l| l.join(".") + ".example")
}

/// `name` spelt another way: per-character case, full-width forms, ideographic full stops, a
/// trailing dot. Each must fold back to `name`.
fn respell(name: &str, choices: &[u8], trailing_dot: bool) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        let choice = choices.get(i % choices.len().max(1)).copied().unwrap_or(0);
        out.push(match (choice % 4, c) {
            (1, c) => c.to_ascii_uppercase(),
            (2, c @ ('a'..='z' | 'A'..='Z' | '0'..='9')) => {
                char::from_u32(c as u32 - 0x21 + 0xff01).unwrap_or(c)
            }
            (3, '.') => '。',
            (_, c) => c,
        });
    }
    if trailing_dot {
        out.push('.');
    }
    out
}

/// One part of a numeric IPv4 spelling of `value`: decimal, `0x` hex (either case) or
/// leading-zero octal.
fn ipv4_part(value: u64, radix: u8, upper: bool) -> String {
    match radix % 3 {
        0 => value.to_string(),
        1 if upper => format!("0X{value:X}"),
        1 => format!("0x{value:x}"),
        _ => format!("0{value:o}"),
    }
}

/// `addr` in one of the WHATWG IPv4 forms: 1 to 4 parts, the last filling the rest.
fn ipv4_spelling(addr: Ipv4Addr, parts: usize, radixes: &[u8], upper: bool) -> String {
    let o = addr.octets().map(u64::from);
    let values: Vec<u64> = match parts {
        1 => vec![u64::from(u32::from(addr))],
        2 => vec![o[0], o[1] << 16 | o[2] << 8 | o[3]],
        3 => vec![o[0], o[1], o[2] << 8 | o[3]],
        _ => o.to_vec(),
    };
    values
        .iter()
        .enumerate()
        .map(|(i, v)| ipv4_part(*v, radixes.get(i).copied().unwrap_or(0), upper))
        .collect::<Vec<_>>()
        .join(".")
}

/// `addr` as an IPv4-mapped IPv6 literal, in brackets.
fn mapped_spelling(addr: Ipv4Addr, dotted: bool, upper: bool, expanded: bool) -> String {
    let o = addr.octets();
    let tail = if dotted {
        addr.to_string()
    } else {
        format!(
            "{:x}:{:x}",
            u16::from_be_bytes([o[0], o[1]]),
            u16::from_be_bytes([o[2], o[3]])
        )
    };
    let head = if expanded {
        "0:0:0:0:0:ffff:"
    } else {
        "::ffff:"
    };
    let s = format!("[{head}{tail}]");
    if upper { s.to_ascii_uppercase() } else { s }
}

fn refusing(keys: &[&[&str]]) -> KeyLists {
    keys.iter()
        .enumerate()
        .fold(KeyLists::new("t"), |l, (i, hosts)| {
            l.with_key(KeyAllowlist::parse(format!("K{i}"), Some(hosts)).unwrap())
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// No string panics any parser of hosts, authorities, allowlist entries or URLs.
    #[test]
    fn no_input_panics(s in prop_oneof![hostish(), any::<String>()]) {
        let _ = canonical_host(&s);
        let _ = parse_authority(&s);
        let _ = AllowRule::parse(&s);
        let _ = loopback_port_of_url(&s);
        let _ = loopback_port_of_url(&format!("http://{s}"));
    }

    /// Canonicalising is idempotent: the canonical spelling parses to the same host, and so
    /// for authorities and allowlist entries.
    #[test]
    fn canonicalising_is_idempotent(s in hostish(), port in 1u16..) {
        if let Ok(host) = canonical_host(&s) {
            let again = canonical_host(&host.to_string());
            prop_assert_eq!(again.as_ref(), Ok(&host), "{:?} → {}", s, host);
            prop_assert_eq!(
                parse_authority(&format!("{host}:{port}")),
                Ok((host.clone(), Some(port)))
            );
            prop_assert_eq!(AllowRule::parse(&host.entry(port)).map(|r| r.matches(&host, port)), Ok(true));
        }
        if let Ok(rule) = AllowRule::parse(&s) {
            prop_assert_eq!(AllowRule::parse(&rule.to_string()), Ok(rule));
        }
    }

    /// A canonical name holds only what a DNS name may, and never ends in a number.
    #[test]
    fn canonical_names_are_plain_ascii(s in hostish()) {
        if let Ok(Host::Name(name)) = canonical_host(&s) {
            prop_assert!(!name.is_empty() && name.len() <= MAX_NAME_LEN);
            prop_assert!(name.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.')), "{}", name);
            prop_assert!(!ends_in_number(&name), "{}", name);
        }
    }

    /// Every numeric spelling of an IPv4 address, and every IPv4-mapped IPv6 spelling, is that
    /// address: refused wherever the dotted form is, and of the same address class.
    #[test]
    fn every_spelling_of_an_address_is_that_address(
        bits in any::<u32>(),
        parts in 1usize..=4,
        radixes in vec(any::<u8>(), 4),
        upper in any::<bool>(),
        trailing_dot in any::<bool>(),
        mapped in any::<(bool, bool, bool, bool)>(),
        port in 1u16..,
    ) {
        let addr = Ipv4Addr::from(bits);
        let mut spellings = vec![ipv4_spelling(addr, parts, &radixes, upper)];
        if trailing_dot {
            spellings[0].push('.');
        }
        let (use_mapped, dotted, upper6, expanded) = mapped;
        if use_mapped {
            spellings.push(mapped_spelling(addr, dotted, upper6, expanded));
        }
        let lists = refusing(&[&["api.example.com", "[2001:db8::1]:8443"]]);
        for s in &spellings {
            let host = canonical_host(s);
            prop_assert_eq!(host.as_ref(), Ok(&Host::V4(addr)), "{}", s);
            let host = host.unwrap();
            prop_assert_eq!(decide(&host, port, &lists, &ApiBasePorts::default()).is_allowed(), false, "{}", s);
            prop_assert_eq!(check_address(&host, IpAddr::V4(addr)).err(), match forbidden_class(IpAddr::V4(addr)) {
                Some(ForbiddenAddress::Loopback) => None,
                class => class,
            });
            // A list naming the address in its dotted form allows every spelling of it, on
            // the loopback too.
            let named = refusing(&[&[&Host::V4(addr).entry(port)]]);
            prop_assert!(decide(&host, port, &named, &ApiBasePorts::default()).is_allowed(), "{}", s);
        }
    }

    /// Every respelling of a name (case, full-width forms, ideographic dots, a trailing dot)
    /// is that name: allowed where the name is, refused where it is not.
    #[test]
    fn every_spelling_of_a_name_is_that_name(
        name in dns_name(),
        other in dns_name(),
        choices in vec(any::<u8>(), 1..16),
        trailing_dot in any::<bool>(),
        port in prop::sample::select(vec![443u16, 80]),
    ) {
        let spelt = respell(&name, &choices, trailing_dot);
        let host = canonical_host(&spelt);
        prop_assert_eq!(host.as_ref(), Ok(&Host::Name(name.clone())), "{}", spelt);
        let host = host.unwrap();
        prop_assert!(decide(&host, port, &refusing(&[&[&name]]), &ApiBasePorts::default()).is_allowed());
        if other != name {
            let refused = decide(&host, port, &refusing(&[&[&other]]), &ApiBasePorts::default());
            prop_assert!(!refused.is_allowed(), "{} on {}'s list", spelt, other);
        }
        // A wildcard covers subdomains only, whatever their spelling.
        let wild = format!("*.{name}");
        prop_assert!(!decide(&host, port, &refusing(&[&[&wild]]), &ApiBasePorts::default()).is_allowed());
        let sub = canonical_host(&respell(&format!("a.{name}"), &choices, trailing_dot)).unwrap();
        prop_assert!(decide(&sub, port, &refusing(&[&[&wild]]), &ApiBasePorts::default()).is_allowed());
    }

    /// International names: their Unicode form, upper-cased, and their `xn--` form are one host.
    #[test]
    fn international_names_are_one_host(
        stem in "[a-z]{1,6}",
        accent in prop::sample::select(vec!['ü', 'ö', 'é', 'ñ', 'å', 'ç']),
        tail in "[a-z]{0,6}",
    ) {
        let unicode = format!("{stem}{accent}{tail}.example");
        let ascii = canonical_host(&unicode).unwrap();
        let Host::Name(ascii_name) = &ascii else { panic!("{ascii:?}") };
        prop_assert!(ascii_name.starts_with("xn--"), "{}", ascii_name);
        for spelt in [unicode.to_uppercase(), ascii_name.clone(), ascii_name.to_uppercase()] {
            prop_assert_eq!(canonical_host(&spelt), Ok(ascii.clone()), "{}", spelt);
        }
        let lists = refusing(&[&[&unicode]]);
        prop_assert!(decide(&ascii, 443, &lists, &ApiBasePorts::default()).is_allowed());
        let plain = canonical_host(&format!("{stem}{tail}.example")).unwrap();
        prop_assert!(!decide(&plain, 443, &lists, &ApiBasePorts::default()).is_allowed());
    }

    /// A decision never allows what a key's list leaves out: allowed means every key with a
    /// list has an entry for the target (and, on the loopback, that at least one key has a
    /// list, or the port is an api-base port). Adding a key never opens a host that was not.
    #[test]
    fn decisions_never_allow_what_a_list_leaves_out(
        lists in vec(prop::option::of(vec(prop_oneof![hostish(), dns_name(), Just("localhost:8080".to_string()), Just("*.example".to_string())], 0..4)), 0..4),
        target in prop_oneof![hostish(), dns_name(), Just("localhost".to_string()), Just("127.0.0.1".to_string())],
        port in prop::sample::select(vec![443u16, 80, 8080, 9000]),
        api in prop::option::of(prop::sample::select(vec![8080u16, 9000])),
        extra in vec(prop_oneof![hostish(), dns_name()], 0..3),
    ) {
        let Ok(host) = canonical_host(&target) else { return Ok(()) };
        let mut tool = KeyLists::new("t");
        for (i, list) in lists.iter().enumerate() {
            let rules = list.as_ref().map(|entries| {
                entries.iter().filter_map(|e| AllowRule::parse(e).ok()).collect::<Vec<_>>()
            });
            tool = tool.with_key(KeyAllowlist { key: format!("K{i}"), rules });
        }
        let api = match api {
            Some(p) => ApiBasePorts::from_vars([("X_API_BASE", format!("http://localhost:{p}"))]),
            None => ApiBasePorts::default(),
        };
        let decision = decide(&host, port, &tool, &api);
        if decision.is_allowed() {
            let listed: Vec<&Vec<AllowRule>> = tool.keys.iter().filter_map(|k| k.rules.as_ref()).collect();
            if host.is_localhost() {
                prop_assert!(api.contains(port) || (!listed.is_empty() && listed.iter().all(|r| r.iter().any(|r| r.matches(&host, port)))));
            } else {
                prop_assert!(listed.iter().all(|r| r.iter().any(|r| r.matches(&host, port))));
            }
        }
        if !decision.is_allowed() && !host.is_localhost() {
            let extra_rules = extra.iter().filter_map(|e| AllowRule::parse(e).ok()).collect();
            let more = tool.clone().with_key(KeyAllowlist { key: "MORE".into(), rules: Some(extra_rules) });
            prop_assert!(!decide(&host, port, &more, &api).is_allowed());
        }
    }
}
