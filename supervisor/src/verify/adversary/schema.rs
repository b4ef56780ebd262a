//! Whether a value fits a function's JSON schema, for inputs autotool did not build itself (the
//! adversary's) and answers it did not write (a declared output schema): `type` (`integer`
//! apart from `number`, lists of types), `enum`, `const`, `required`, `properties`,
//! `additionalProperties`, `items`, lengths and counts, numeric bounds, `anyOf`/`oneOf`/`allOf`
//! and local `$ref`s. What it does not know (`pattern`, `format`, …) it lets through: the SDK
//! refuses such a value itself, and a refusal is an answer, not harm. Depth is bounded; a
//! schema too deep to follow refuses the value.

use rmcp::model::JsonObject;
use serde_json::Value;

/// How deep schemas and values are followed.
const MAX_DEPTH: usize = 16;

/// Why `value` does not fit `schema` (whose `$defs` are `root`'s), or `None` when it does.
pub fn mismatch(value: &Value, schema: &Value, root: &JsonObject) -> Option<String> {
    check(value, schema, root, "", 0).err()
}

fn check(
    value: &Value,
    schema: &Value,
    root: &JsonObject,
    at: &str,
    depth: usize,
) -> Result<(), String> {
    let place = || {
        if at.is_empty() {
            "the value".to_string()
        } else {
            at.to_string()
        }
    };
    if depth > MAX_DEPTH {
        return Err(format!(
            "{}: the schema is nested too deeply to check",
            place()
        ));
    }
    let schema = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(format!("{}: the schema allows nothing here", place())),
        Value::Object(o) => o,
        _ => return Ok(()),
    };
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let target = reference
            .strip_prefix("#/$defs/")
            .and_then(|n| root.get("$defs")?.get(n))
            .or_else(|| {
                reference
                    .strip_prefix("#/definitions/")
                    .and_then(|n| root.get("definitions")?.get(n))
            })
            .ok_or_else(|| {
                format!(
                    "{}: the reference {reference} is not in the schema",
                    place()
                )
            })?;
        check(value, target, root, at, depth + 1)?;
    }
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|t| is_type(value, t)) {
            return Err(format!(
                "{}: expected {}, got {}",
                place(),
                names.join(" or "),
                type_of(value)
            ));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.iter().any(|o| same(o, value))
    {
        return Err(format!("{}: not one of the enum's values", place()));
    }
    if let Some(constant) = schema.get("const")
        && !same(constant, value)
    {
        return Err(format!("{}: not the constant {constant}", place()));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array)
            && !branches
                .iter()
                .any(|b| check(value, b, root, at, depth + 1).is_ok())
        {
            return Err(format!("{}: fits none of the {key} branches", place()));
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for branch in all {
            check(value, branch, root, at, depth + 1)?;
        }
    }
    let number = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(x) = value.as_f64() {
        let out = number("minimum").is_some_and(|m| x < m)
            || number("maximum").is_some_and(|m| x > m)
            || number("exclusiveMinimum").is_some_and(|m| x <= m)
            || number("exclusiveMaximum").is_some_and(|m| x >= m);
        if out {
            return Err(format!("{}: {x} is out of the schema's bounds", place()));
        }
    }
    let count = |key: &str| schema.get(key).and_then(Value::as_u64).map(|n| n as usize);
    let within = |n: usize, min: &str, max: &str| {
        count(min).is_none_or(|m| n >= m) && count(max).is_none_or(|m| n <= m)
    };
    match value {
        Value::String(s) if !within(s.chars().count(), "minLength", "maxLength") => Err(format!(
            "{}: its length is out of the schema's bounds",
            place()
        )),
        Value::Array(items) => {
            if !within(items.len(), "minItems", "maxItems") {
                return Err(format!(
                    "{}: its item count is out of the schema's bounds",
                    place()
                ));
            }
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    check(v, item, root, &format!("{}[{i}]", place()), depth + 1)?;
                }
            }
            Ok(())
        }
        Value::Object(map) => object(map, schema, root, at, depth),
        _ => Ok(()),
    }
}

fn object(
    map: &JsonObject,
    schema: &JsonObject,
    root: &JsonObject,
    at: &str,
    depth: usize,
) -> Result<(), String> {
    let field = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                return Err(format!("{}: required, and missing", field(name)));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (k, v) in map {
        match properties.and_then(|p| p.get(k)) {
            Some(s) => check(v, s, root, &field(k), depth + 1)?,
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    return Err(format!("{}: not a property the schema allows", field(k)));
                }
                Some(s @ Value::Object(_)) => check(v, s, root, &field(k), depth + 1)?,
                _ => {}
            },
        }
    }
    Ok(())
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "string" => value.is_string(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|x| x.fract() == 0.0)
        }
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Equal as JSON values, numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fits(value: Value, schema: Value) -> Option<String> {
        let root = schema.as_object().cloned().unwrap_or_default();
        mismatch(&value, &schema, &root)
    }

    #[test]
    fn inputs_are_checked_against_what_the_schema_says() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 5},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "unit": {"enum": ["c", "f"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "place": {"$ref": "#/$defs/Place"}
            },
            "required": ["city"],
            "additionalProperties": false,
            "$defs": {"Place": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}}
        });
        assert_eq!(fits(json!({"city": "Paris"}), schema.clone()), None);
        assert_eq!(
            fits(
                json!({"city": "Paris", "days": 7, "unit": "f", "tags": ["a"], "when": null, "place": {"lat": 1.5}}),
                schema.clone()
            ),
            None
        );
        for (bad, why) in [
            (json!({}), "city: required"),
            (json!({"city": 3}), "city: expected string, got a number"),
            (json!({"city": "Parisian"}), "city: its length"),
            (json!({"city": "P", "days": 8}), "days: 8 is out"),
            (json!({"city": "P", "days": 1.5}), "days: expected integer"),
            (json!({"city": "P", "unit": "k"}), "unit: not one of"),
            (
                json!({"city": "P", "tags": ["a", "b", "c"]}),
                "tags: its item count",
            ),
            (
                json!({"city": "P", "tags": [1]}),
                "tags[0]: expected string",
            ),
            (json!({"city": "P", "when": 1}), "when: fits none"),
            (json!({"city": "P", "place": {}}), "place.lat: required"),
            (json!({"city": "P", "other": 1}), "other: not a property"),
        ] {
            let found = fits(bad.clone(), schema.clone());
            assert!(
                found.as_deref().is_some_and(|f| f.starts_with(why)),
                "{bad}: {found:?}"
            );
        }
    }

    #[test]
    fn an_output_schema_is_checked_the_same_way() {
        let schema = json!({"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]});
        assert_eq!(fits(json!({"result": "ok"}), schema.clone()), None);
        assert!(fits(json!({"result": {"PATH": "/bin"}}), schema.clone()).is_some());
        assert!(fits(json!("ok"), schema).is_some());
    }
}
