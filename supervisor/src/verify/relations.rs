//! Declared relations: what a function's answer must keep when its input changes in a known
//! way. A tool declares them beside its `EXAMPLES`, read statically like every declaration:
//!
//! ```python
//! RELATIONS = [
//!     {"function": "lookup", "argument": "isbn", "transform": "surrounding_whitespace"},
//!     {"function": "lookup", "argument": "isbn", "transform": "prefix", "value": "ISBN "},
//!     {"function": "total", "argument": "items", "transform": "reverse"},
//! ]
//! ```
//!
//! Each says: calling `function` with `argument` transformed gives the same answer as calling
//! it with the argument as it was. The transforms are a small fixed vocabulary ([`Transform`]):
//! on a string, padding with spaces, upper or lower case, a fixed prefix or suffix; on a list,
//! reversing it or rotating it by one. An unknown transform, a missing or stray `value`, or an
//! entry that is not a dict is refused with the expected form ([`RELATIONS_FORM`]).
//!
//! The inputs transformed are those of the tool's `EXAMPLES` ([`pairs`], a pure function):
//! each example calling the function with the argument gives a pair of calls (at most
//! [`MAX_INPUTS`] per relation). A relation no example gives an input for, one whose transform
//! changes none of them (`upper` on digits), or a transform of the wrong type of value
//! (`reverse` on a string) is refused before anything runs: a relation that cannot be checked
//! would be a promise nobody holds the tool to. The pairs are called at
//! [`Stage::Relations`](super::Stage::Relations) (`judge::relations`), and those of a trusted
//! version are owed by later ones ([`super::baseline`]).

use super::declarations::{DeclarationError, Example, declared_literal};
use super::verdicts::same_value;
use rmcp::model::JsonObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Refusals of `RELATIONS` end with this.
pub const RELATIONS_FORM: &str = "Declare relations once, at the top level of the file, as a \
list of dict literals: RELATIONS = [{\"function\": \"lookup\", \"argument\": \"isbn\", \
\"transform\": \"prefix\", \"value\": \"ISBN \"}]: the function's answer must not change when the \
transform is applied to that argument of an EXAMPLES entry. Transforms: \
surrounding_whitespace, upper, lower, prefix and suffix (these two with a \"value\" string) for \
strings; reverse and rotate for lists. Leave RELATIONS out if there are none.";

/// Most relations one tool declares.
pub const MAX_RELATIONS: usize = 20;
/// Most example inputs one relation is checked on.
pub const MAX_INPUTS: usize = 3;
/// Longest prefix or suffix, in characters.
pub const MAX_VALUE: usize = 100;

/// A change of one argument that must not change the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transform {
    /// Two spaces before and after a string.
    SurroundingWhitespace,
    /// A string in upper case.
    Upper,
    /// A string in lower case.
    Lower,
    /// `value` before a string.
    Prefix,
    /// `value` after a string.
    Suffix,
    /// A list in reverse order.
    Reverse,
    /// A list rotated by one: its first item moved to the end.
    Rotate,
}

impl Transform {
    /// Every transform.
    pub const ALL: [Transform; 7] = [
        Transform::SurroundingWhitespace,
        Transform::Upper,
        Transform::Lower,
        Transform::Prefix,
        Transform::Suffix,
        Transform::Reverse,
        Transform::Rotate,
    ];

    /// As declared: `surrounding_whitespace`, `upper`, `lower`, `prefix`, `suffix`,
    /// `reverse`, `rotate`.
    pub fn name(self) -> &'static str {
        match self {
            Transform::SurroundingWhitespace => "surrounding_whitespace",
            Transform::Upper => "upper",
            Transform::Lower => "lower",
            Transform::Prefix => "prefix",
            Transform::Suffix => "suffix",
            Transform::Reverse => "reverse",
            Transform::Rotate => "rotate",
        }
    }

    /// The transform named `name`.
    pub fn named(name: &str) -> Option<Transform> {
        Transform::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether it takes a `value` (the prefix or suffix).
    pub fn takes_value(self) -> bool {
        matches!(self, Transform::Prefix | Transform::Suffix)
    }

    /// Whether it applies to lists (else to strings).
    fn on_lists(self) -> bool {
        matches!(self, Transform::Reverse | Transform::Rotate)
    }

    /// `input` transformed (`value`: the prefix or suffix); `Err` names the type found when the
    /// transform does not apply to it.
    pub fn apply(self, input: &Value, value: Option<&str>) -> Result<Value, String> {
        let value = value.unwrap_or("");
        match (self, input) {
            (Transform::SurroundingWhitespace, Value::String(s)) => {
                Ok(Value::String(format!("  {s}  ")))
            }
            (Transform::Upper, Value::String(s)) => Ok(Value::String(s.to_uppercase())),
            (Transform::Lower, Value::String(s)) => Ok(Value::String(s.to_lowercase())),
            (Transform::Prefix, Value::String(s)) => Ok(Value::String(format!("{value}{s}"))),
            (Transform::Suffix, Value::String(s)) => Ok(Value::String(format!("{s}{value}"))),
            (Transform::Reverse, Value::Array(items)) => {
                Ok(Value::Array(items.iter().rev().cloned().collect()))
            }
            (Transform::Rotate, Value::Array(items)) => {
                let mut items = items.clone();
                if !items.is_empty() {
                    items.rotate_left(1);
                }
                Ok(Value::Array(items))
            }
            (t, other) => Err(format!(
                "{} (a {}), and {} applies to {}",
                short(other),
                type_name(other),
                t.name(),
                if t.on_lists() { "lists" } else { "strings" }
            )),
        }
    }
}

/// One entry of `RELATIONS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
    pub function: String,
    pub argument: String,
    pub transform: Transform,
    /// The prefix or suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl Relation {
    /// The change in words: `isbn padded with spaces`, `isbn with the prefix "ISBN "`.
    pub fn describe(&self) -> String {
        let a = &self.argument;
        let value = self.value.as_deref().unwrap_or("");
        match self.transform {
            Transform::SurroundingWhitespace => format!("{a} padded with spaces"),
            Transform::Upper => format!("{a} in upper case"),
            Transform::Lower => format!("{a} in lower case"),
            Transform::Prefix => format!("{a} with the prefix {value:?}"),
            Transform::Suffix => format!("{a} with the suffix {value:?}"),
            Transform::Reverse => format!("{a} reversed"),
            Transform::Rotate => format!("{a} rotated by one"),
        }
    }

    /// `arguments` with the argument transformed; `Ok(None)` when they do not give it or the
    /// transform leaves it as it was.
    pub fn apply(&self, arguments: &JsonObject) -> Result<Option<JsonObject>, String> {
        let Some(input) = arguments.get(&self.argument) else {
            return Ok(None);
        };
        let changed = self.transform.apply(input, self.value.as_deref())?;
        if same_value(&changed, input) {
            return Ok(None);
        }
        let mut out = arguments.clone();
        out.insert(self.argument.clone(), changed);
        Ok(Some(out))
    }
}

/// One pair of calls a relation makes: the same answer is owed to both.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    /// Which entry of `RELATIONS`, from 1.
    pub index: u32,
    pub relation: Relation,
    /// An example's arguments.
    pub original: JsonObject,
    /// The same, the relation's argument transformed.
    pub transformed: JsonObject,
}

fn refused(message: String) -> DeclarationError {
    DeclarationError::Shape {
        message,
        form: RELATIONS_FORM,
    }
}

/// The relations a tool declares in `RELATIONS`, read without running the code; none when it
/// declares none.
pub fn relations(code: &str) -> Result<Vec<Relation>, DeclarationError> {
    let Some(value) = declared_literal(code, "RELATIONS", RELATIONS_FORM)? else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = value else {
        return Err(refused("RELATIONS must be a list".into()));
    };
    if items.len() > MAX_RELATIONS {
        return Err(refused(format!(
            "RELATIONS lists {} relations; at most {MAX_RELATIONS} are checked",
            items.len()
        )));
    }
    let mut out: Vec<Relation> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let relation = entry(i + 1, item)?;
        if let Some(j) = out.iter().position(|r| *r == relation) {
            return Err(refused(format!(
                "RELATIONS entry {} repeats entry {}",
                i + 1,
                j + 1
            )));
        }
        out.push(relation);
    }
    Ok(out)
}

/// Entry `n` (from 1) of `RELATIONS`.
fn entry(n: usize, item: Value) -> Result<Relation, DeclarationError> {
    let Value::Object(entry) = item else {
        return Err(refused(format!("RELATIONS entry {n} is not a dict")));
    };
    if let Some(other) = entry
        .keys()
        .find(|k| !matches!(k.as_str(), "function" | "argument" | "transform" | "value"))
    {
        return Err(refused(format!(
            "RELATIONS entry {n} has the key {other:?}; the keys are function, argument, \
             transform and value"
        )));
    }
    let text = |key: &str, what: &str| match entry.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(refused(format!(
            "RELATIONS entry {n} needs \"{key}\": {what}, as a string"
        ))),
    };
    let function = text("function", "the name of a function")?;
    let argument = text("argument", "the name of the argument the transform changes")?;
    let named = text("transform", "one of the transforms")?;
    let known = || {
        Transform::ALL
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(transform) = Transform::named(&named) else {
        return Err(refused(format!(
            "RELATIONS entry {n}: {named:?} is not a transform autotool knows; the transforms \
             are {}",
            known()
        )));
    };
    let value = match (transform.takes_value(), entry.get("value")) {
        (true, Some(Value::String(v))) if !v.is_empty() && v.chars().count() <= MAX_VALUE => {
            Some(v.clone())
        }
        (true, _) => {
            return Err(refused(format!(
                "RELATIONS entry {n}: the transform {named} needs \"value\": the {named} to \
                 add, a string of 1 to {MAX_VALUE} characters"
            )));
        }
        (false, None) => None,
        (false, Some(_)) => {
            return Err(refused(format!(
                "RELATIONS entry {n}: the transform {named} takes no \"value\" (only prefix \
                 and suffix do)"
            )));
        }
    };
    Ok(Relation {
        function,
        argument,
        transform,
        value,
    })
}

/// The calls that check `relations`, from the inputs `examples` give: for each relation, each
/// example of its function that gives its argument and that the transform changes (at most
/// [`MAX_INPUTS`]). A relation left without a pair, or whose transform does not apply to an
/// example's value, is refused.
pub fn pairs(relations: &[Relation], examples: &[Example]) -> Result<Vec<Pair>, DeclarationError> {
    let mut pairs = Vec::new();
    for (i, relation) in relations.iter().enumerate() {
        let n = i + 1;
        let index = u32::try_from(n).unwrap_or(u32::MAX);
        let mut given = Vec::new();
        let mut made = 0;
        for (j, example) in examples.iter().enumerate() {
            if example.function != relation.function {
                continue;
            }
            let transformed = relation.apply(&example.arguments).map_err(|why| {
                refused(format!(
                    "RELATIONS entry {n} ({} of {}): EXAMPLES entry {} gives {}",
                    relation.transform.name(),
                    relation.function,
                    j + 1,
                    why
                ))
            })?;
            if let Some(input) = example.arguments.get(&relation.argument) {
                given.push(short(input));
            }
            let Some(transformed) = transformed else {
                continue;
            };
            if made < MAX_INPUTS {
                pairs.push(Pair {
                    index,
                    relation: relation.clone(),
                    original: example.arguments.clone(),
                    transformed,
                });
                made += 1;
            }
        }
        if given.is_empty() {
            return Err(refused(format!(
                "RELATIONS entry {n}: no entry of EXAMPLES calls {} with {}; a relation is \
                 checked on the examples' inputs, so add an example that gives {}",
                relation.function, relation.argument, relation.argument
            )));
        }
        if made == 0 {
            return Err(refused(format!(
                "RELATIONS entry {n} ({}) changes none of the inputs EXAMPLES gives {} ({} = \
                 {}); add an example the transform changes",
                relation.describe(),
                relation.function,
                relation.argument,
                given.join(", ")
            )));
        }
    }
    Ok(pairs)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// A value in at most about 40 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 40 {
        return text;
    }
    let head: String = text.chars().take(40).collect();
    format!("{head}…")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn example(function: &str, arguments: Value, expect: Value) -> Example {
        Example {
            function: function.into(),
            arguments: arguments.as_object().cloned().unwrap_or_default(),
            expect,
        }
    }

    fn refusal(code: &str) -> String {
        let e = relations(code).expect_err(code).to_string();
        assert!(e.ends_with(RELATIONS_FORM), "no form in: {e}");
        e
    }

    #[test]
    fn relations_are_read_as_declared() {
        let code = "RELATIONS = [\n    {\"function\": \"lookup\", \"argument\": \"isbn\", \"transform\": \"surrounding_whitespace\"},  # padding\n    {'function': 'lookup', 'argument': 'isbn', 'transform': 'prefix', 'value': 'ISBN '},\n    {\"function\": \"total\", \"argument\": \"items\", \"transform\": \"rotate\"},\n]\n";
        let got = relations(code).unwrap();
        assert_eq!(
            got,
            [
                Relation {
                    function: "lookup".into(),
                    argument: "isbn".into(),
                    transform: Transform::SurroundingWhitespace,
                    value: None,
                },
                Relation {
                    function: "lookup".into(),
                    argument: "isbn".into(),
                    transform: Transform::Prefix,
                    value: Some("ISBN ".into()),
                },
                Relation {
                    function: "total".into(),
                    argument: "items".into(),
                    transform: Transform::Rotate,
                    value: None,
                },
            ]
        );
        assert_eq!(relations("x = 1\n").unwrap(), []);
        assert_eq!(
            got[1].describe(),
            "isbn with the prefix \"ISBN \"",
            "the change in words"
        );
        // Kept as JSON (the baseline stores it), and read back.
        let json = serde_json::to_value(&got[1]).unwrap();
        assert_eq!(
            json,
            json!({"function": "lookup", "argument": "isbn", "transform": "prefix", "value": "ISBN "})
        );
        assert_eq!(
            serde_json::from_value::<Relation>(json).unwrap(),
            got[1].clone()
        );
        for t in Transform::ALL {
            assert_eq!(Transform::named(t.name()), Some(t));
            assert_eq!(serde_json::to_value(t).unwrap(), json!(t.name()));
        }
    }

    #[test]
    fn what_is_not_a_relation_is_refused_saying_what_to_write() {
        let unknown = refusal(
            "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"strip\"}]\n",
        );
        assert!(
            unknown.contains("RELATIONS entry 1: \"strip\" is not a transform autotool knows")
                && unknown.contains(
                    "surrounding_whitespace, upper, lower, prefix, suffix, reverse, rotate"
                ),
            "{unknown}"
        );
        for (code, needle) in [
            ("RELATIONS = {}\n", "must be a list"),
            ("RELATIONS = [1]\n", "entry 1 is not a dict"),
            (
                "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"upper\", \"to\": 1}]\n",
                "has the key \"to\"",
            ),
            (
                "RELATIONS = [{\"argument\": \"a\", \"transform\": \"upper\"}]\n",
                "needs \"function\"",
            ),
            (
                "RELATIONS = [{\"function\": \"f\", \"transform\": \"upper\"}]\n",
                "needs \"argument\"",
            ),
            (
                "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\"}]\n",
                "needs \"transform\"",
            ),
            (
                "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"prefix\"}]\n",
                "the transform prefix needs \"value\"",
            ),
            (
                "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"suffix\", \"value\": 3}]\n",
                "the transform suffix needs \"value\"",
            ),
            (
                "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"upper\", \"value\": \"x\"}]\n",
                "takes no \"value\"",
            ),
            (
                "RELATIONS = [{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"upper\"}, {\"function\": \"f\", \"argument\": \"a\", \"transform\": \"upper\"}]\n",
                "entry 2 repeats entry 1",
            ),
            (
                "RELATIONS = [{\"function\": f, \"argument\": \"a\", \"transform\": \"upper\"}]\n",
                "`f` is a name",
            ),
        ] {
            let e = refusal(code);
            assert!(e.contains(needle), "{code}: no {needle:?} in {e}");
        }
        let long = format!(
            "RELATIONS = [{{\"function\": \"f\", \"argument\": \"a\", \"transform\": \"prefix\", \"value\": \"{}\"}}]\n",
            "x".repeat(MAX_VALUE + 1)
        );
        assert!(refusal(&long).contains("needs \"value\""));
        let many = format!(
            "RELATIONS = [{}]\n",
            (0..=MAX_RELATIONS)
                .map(|i| format!(
                    "{{\"function\": \"f{i}\", \"argument\": \"a\", \"transform\": \"upper\"}}"
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(refusal(&many).contains("at most 20"));
    }

    #[test]
    fn each_transform_changes_its_kind_of_value() {
        let apply = |t: Transform, v: Value| t.apply(&v, Some("ISBN "));
        assert_eq!(
            apply(Transform::SurroundingWhitespace, json!("ab")),
            Ok(json!("  ab  "))
        );
        assert_eq!(
            apply(Transform::Upper, json!("Straße")),
            Ok(json!("STRASSE"))
        );
        assert_eq!(apply(Transform::Lower, json!("ÉCOLE")), Ok(json!("école")));
        assert_eq!(
            apply(Transform::Prefix, json!("123")),
            Ok(json!("ISBN 123"))
        );
        assert_eq!(
            apply(Transform::Suffix, json!("123")),
            Ok(json!("123ISBN "))
        );
        assert_eq!(
            apply(Transform::Reverse, json!([1, 2, 3])),
            Ok(json!([3, 2, 1]))
        );
        assert_eq!(
            apply(Transform::Rotate, json!([1, 2, 3])),
            Ok(json!([2, 3, 1]))
        );
        assert_eq!(apply(Transform::Rotate, json!([])), Ok(json!([])));
        let wrong = apply(Transform::Reverse, json!("abc")).unwrap_err();
        assert_eq!(wrong, "\"abc\" (a string), and reverse applies to lists");
        let wrong = apply(Transform::Upper, json!(7)).unwrap_err();
        assert_eq!(wrong, "7 (a number), and upper applies to strings");
    }

    fn relation(function: &str, argument: &str, transform: Transform) -> Relation {
        Relation {
            function: function.into(),
            argument: argument.into(),
            transform,
            value: None,
        }
    }

    #[test]
    fn pairs_come_from_the_examples_the_transform_changes() {
        let examples = [
            example("lookup", json!({"isbn": "0306406152"}), json!("Dune")),
            example("lookup", json!({"isbn": "isbn0306406152"}), json!("Dune")),
            example("total", json!({"items": [1, 2, 3]}), json!(6)),
            example("total", json!({"items": [4]}), json!(4)),
        ];
        let relations = [
            relation("lookup", "isbn", Transform::Upper),
            relation("total", "items", Transform::Reverse),
        ];
        let got = pairs(&relations, &examples).unwrap();
        let shown: Vec<(u32, Value, Value)> = got
            .iter()
            .map(|p| {
                (
                    p.index,
                    Value::Object(p.original.clone()),
                    Value::Object(p.transformed.clone()),
                )
            })
            .collect();
        // "0306406152" has no letters and [4] reads the same reversed: neither is a pair.
        assert_eq!(
            shown,
            [
                (
                    1,
                    json!({"isbn": "isbn0306406152"}),
                    json!({"isbn": "ISBN0306406152"})
                ),
                (2, json!({"items": [1, 2, 3]}), json!({"items": [3, 2, 1]})),
            ]
        );

        // At most MAX_INPUTS pairs a relation.
        let many: Vec<Example> = (0..MAX_INPUTS + 2)
            .map(|i| example("lookup", json!({"isbn": format!("x{i}")}), json!(i)))
            .collect();
        let got = pairs(&relations[..1], &many).unwrap();
        assert_eq!(got.len(), MAX_INPUTS);
    }

    #[test]
    fn a_relation_that_cannot_be_checked_is_refused() {
        let examples = [
            example("lookup", json!({"isbn": "0306406152"}), json!("Dune")),
            example("total", json!({"items": "1,2"}), json!(3)),
        ];
        let e = pairs(&[relation("lookup", "isbn", Transform::Upper)], &examples)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("RELATIONS entry 1 (isbn in upper case) changes none of the inputs EXAMPLES gives lookup (isbn = \"0306406152\")"),
            "{e}"
        );
        let e = pairs(&[relation("lookup", "title", Transform::Upper)], &examples)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no entry of EXAMPLES calls lookup with title"),
            "{e}"
        );
        let e = pairs(&[relation("search", "q", Transform::Lower)], &examples)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no entry of EXAMPLES calls search with q"),
            "{e}"
        );
        let e = pairs(&[relation("total", "items", Transform::Rotate)], &examples)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "RELATIONS entry 1 (rotate of total): EXAMPLES entry 2 gives \"1,2\" (a string), and rotate applies to lists"
            ),
            "{e}"
        );
        assert!(e.ends_with(RELATIONS_FORM));
    }
}
