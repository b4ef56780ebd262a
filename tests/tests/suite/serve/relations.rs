//! Declared relations end to end through `create_tool`, with the fixture `books.py` (keeps the
//! relations it declares: an ISBN padded with spaces, in lower case or with the prefix "ISBN "
//! finds the same book; prices total alike in any order) and its literal variant ([`literal`]:
//! the ISBN used as written, which breaks them). A broken relation is refused at `relations`, named with both inputs
//! and both answers; without the declaration the same tool is created (the control). Once a
//! version that kept its relations is trusted, a rewrite that drops the declaration and breaks
//! them is refused at `baseline`; one that drops the declaration but keeps the behaviour still
//! owes it, and meets it.

use super::{finish, start, strict};
use autotool_tests::serve::{ServeHome, Server, fixture};
use serde_json::{Value, json};

fn create(server: &mut Server, name: &str, code: &str) -> (bool, String, Option<Value>) {
    let r = server
        .call_result("create_tool", json!({"name": name, "code": code}))
        .unwrap();
    (r.is_error, r.text, r.structured)
}

/// The relation verdicts `create_tool` reported, as `function: relation N outcome`.
fn relations(structured: &Option<Value>, check: &str) -> Vec<String> {
    structured
        .as_ref()
        .and_then(|s| s["verdicts"].as_array())
        .map(|vs| {
            vs.iter()
                .filter(|v| v["check"] == check)
                .map(|v| {
                    format!(
                        "{}: {} {} {}",
                        v["function"].as_str().unwrap_or(""),
                        check,
                        v["example"]
                            .as_u64()
                            .map_or(String::new(), |n| n.to_string()),
                        v["outcome"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The line of `books.py` that reads an ISBN however it is written.
const NORMALISE: &str = "key = isbn.strip().upper().removeprefix(\"ISBN \")";

/// `books.py` with the ISBN used exactly as written: its relations no longer hold.
fn literal() -> String {
    let code = fixture("books.py").unwrap();
    assert!(
        code.contains(NORMALISE),
        "books.py no longer normalises with {NORMALISE}"
    );
    code.replace(NORMALISE, "key = isbn")
}

/// `code` without its `RELATIONS = [...]` block.
fn without_relations(code: &str) -> String {
    let start = code.find("RELATIONS = [").expect("a RELATIONS declaration");
    let end = start + code[start..].find("\n]\n").expect("its end") + 3;
    format!("{}{}", &code[..start], &code[end..])
}

fn cli(home: &ServeHome, args: &[&str]) -> String {
    let (status, out, err) = home.cli(args).unwrap();
    assert!(status.success(), "{args:?}: {err}");
    out
}

#[test]
fn a_kept_relation_passes_and_a_broken_one_is_refused_with_both_answers() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);

    let (failed, text, structured) = create(&mut server, "books", &fixture("books.py").unwrap());
    assert!(!failed, "{text}");
    assert_eq!(
        relations(&structured, "relation"),
        [
            "lookup: relation 1 passed",
            "lookup: relation 2 passed",
            "lookup: relation 3 passed",
            "total: relation 4 passed",
        ]
    );
    // `tools show` says what each relation is and what it was kept on.
    let shown = cli(&home, &["tools", "show", "books"]);
    for needle in [
        "lookup: relation 1 passed (isbn padded with spaces: kept on 2 inputs: lookup({\"isbn\":\"0306406152\"}) and lookup({\"isbn\":\"  0306406152  \"}) both answered \"Dune\")",
        "lookup: relation 2 passed (isbn with the prefix \"ISBN \": ",
        // Lower case changes only the ISBN with a letter in it.
        "lookup: relation 3 passed (isbn in lower case: kept on 1 input: lookup({\"isbn\":\"097522980X\"}) and lookup({\"isbn\":\"097522980x\"}) both answered \"The Odyssey\")",
        "total: relation 4 passed (prices reversed: kept on 1 input: total({\"prices\":[3,4.5,10]}) and total({\"prices\":[10,4.5,3]}) both answered 17.5)",
    ] {
        assert!(shown.contains(needle), "no {needle:?} in:\n{shown}");
    }

    let literal = literal();
    let (failed, text, _) = create(&mut server, "shelf", &literal);
    assert!(failed, "a broken relation was mounted: {text}");
    for needle in [
        "verification failed at relations: verdict relation 1 failed for lookup",
        "RELATIONS entry 1 says its answer does not change with isbn padded with spaces",
        "but lookup({\"isbn\":\"0306406152\"}) answered \"Dune\" and lookup({\"isbn\":\"  0306406152  \"}) answered the error \"Error executing tool lookup: no book with ISBN '  0306406152  '\"",
        "remove the relation if it should not hold",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }

    // Control: the same tool without the declaration is created (its examples hold).
    let undeclared = without_relations(&literal);
    assert!(!undeclared.contains("RELATIONS = [") && undeclared.contains("EXAMPLES = ["));
    let (failed, text, structured) = create(&mut server, "shelf", &undeclared);
    assert!(!failed, "{text}");
    assert!(relations(&structured, "relation").is_empty());
    finish(server);
}

#[test]
fn a_trusted_versions_relations_are_owed_by_a_rewrite() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let kept = fixture("books.py").unwrap();
    let (failed, text, _) = create(&mut server, "books", &kept);
    assert!(!failed, "{text}");
    for _ in 0..5 {
        let r = server
            .call_result("books__lookup", json!({"isbn": "0306406152"}))
            .unwrap();
        assert!(!r.is_error, "{}", r.text);
    }
    assert!(cli(&home, &["tools", "show", "books"]).contains("(active)"));
    let owed = cli(&home, &["tools", "baseline", "books"]);
    for needle in [
        "relation lookup({\"isbn\":\"0306406152\"}) unchanged with isbn padded with spaces, from v1",
        "relation lookup({\"isbn\":\"097522980X\"}) unchanged with isbn with the prefix \"ISBN \", from v1",
        "relation total({\"prices\":[3,4.5,10]}) unchanged with prices reversed, from v1",
    ] {
        assert!(owed.contains(needle), "no {needle:?} in:\n{owed}");
    }

    // Dropped and broken: the literal lookup, its declaration left out, is refused by the
    // baseline, which names the relation and both answers.
    let dropped = without_relations(&literal());
    let (failed, text, _) = create(&mut server, "books", &dropped);
    assert!(
        failed,
        "a rewrite breaking a trusted relation was mounted: {text}"
    );
    for needle in [
        "verification failed at baseline",
        "relation lookup({\"isbn\":\"0306406152\"}) unchanged with isbn padded with spaces, from v1",
        "v1 answered both alike, with a result; this version answers \"Dune\" to lookup({\"isbn\":\"0306406152\"}) and the error \"Error executing tool lookup: no book with ISBN '  0306406152  '\" to lookup({\"isbn\":\"  0306406152  \"})",
        "autotool tools baseline books --drop",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
    // Declared and broken: refused by its own declaration first.
    let (failed, text, _) = create(&mut server, "books", &literal());
    assert!(
        failed && text.contains("verification failed at relations"),
        "{text}"
    );

    // Control: a rewrite that leaves the declaration out but keeps the behaviour is created,
    // still checked on every relation v1 kept.
    let (failed, text, structured) = create(&mut server, "books", &without_relations(&kept));
    assert!(!failed, "{text}");
    let met = structured
        .as_ref()
        .and_then(|s| s["verdicts"].as_array())
        .map(|vs| {
            vs.iter()
                .filter(|v| {
                    v["check"] == "baseline"
                        && v["outcome"] == "passed"
                        && v["detail"]
                            .as_str()
                            .is_some_and(|d| d.contains(" relation "))
                })
                .count()
        })
        .unwrap_or(0);
    // Relations 1 and 2 on both ISBNs, 3 on the one with a letter, 4 on the prices.
    assert_eq!(met, 6, "{structured:?}");
    finish(server);
}
