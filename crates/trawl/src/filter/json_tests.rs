use serde_json::json;

use super::*;
use crate::filter::parse::parse;

fn ok(v: Json) -> Expr {
    match parse_json(&v) {
        Ok(e) => e,
        Err(e) => panic!("{v} did not parse: {e}"),
    }
}

/// Asserts that `v` is refused with exactly `message`.
fn fails(v: Json, message: &str) {
    match parse_json(&v) {
        Ok(e) => panic!("{v} parsed, to {e:?}"),
        Err(e) => {
            assert_eq!(e.message, message, "{v}");
            assert_eq!((e.pos, e.input.as_str()), (0, ""));
            assert_eq!(e.to_string(), message, "no input to show");
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        }
    }
}

/// The text form of the same filter.
fn text(t: &str) -> Expr {
    parse(t).unwrap()
}

#[test]
fn the_example() {
    let v =
        json!({"$and": [{"lang": "en"}, {"tenant": {"$in": [3, 42]}}, {"year": {"$gte": 2024}}]});
    assert_eq!(
        ok(v),
        text(r#"lang = "en" AND tenant IN (3, 42) AND year >= 2024"#)
    );
}

#[test]
fn operators() {
    assert_eq!(ok(json!({"x": 1})), text("x = 1"));
    assert_eq!(ok(json!({"x": "a"})), text("x = 'a'"));
    assert_eq!(ok(json!({"x": 2.5})), text("x = 2.5"));
    assert_eq!(
        ok(json!({"x": 1.0})),
        text("x = 1.0"),
        "a JSON 1.0 stays a float"
    );
    assert_eq!(ok(json!({"x": {"$eq": 1}})), text("x = 1"));
    assert_eq!(ok(json!({"x": {"$ne": 1}})), text("x != 1"));
    assert_eq!(ok(json!({"x": {"$lt": -1}})), text("x < -1"));
    assert_eq!(ok(json!({"x": {"$lte": "b"}})), text("x <= 'b'"));
    assert_eq!(ok(json!({"x": {"$gt": 1e3}})), text("x > 1000.0"));
    assert_eq!(ok(json!({"x": {"$gte": 0}})), text("x >= 0"));
    assert_eq!(ok(json!({"x": {"$in": [1, "a"]}})), text("x IN (1, 'a')"));
    assert_eq!(ok(json!({"x": {"$nin": [1]}})), text("x NOT IN (1)"));
    assert_eq!(
        ok(json!({"t": {"$any": ["a", "b"]}})),
        text("t HAS ANY ('a', 'b')")
    );
    assert_eq!(ok(json!({"t": {"$all": ["a"]}})), text("t HAS ALL ('a')"));
    assert_eq!(
        ok(json!({"x": u64::MAX})),
        Expr::Cmp {
            field: "x".into(),
            op: CmpOp::Eq,
            value: Value::Float(u64::MAX as f64),
        }
    );
    assert_eq!(ok(json!({"x": i64::MIN})), text("x = -9223372036854775808"));
}

#[test]
fn logic() {
    assert_eq!(
        ok(json!({"$or": [{"a": 1}, {"b": 2}]})),
        text("a = 1 OR b = 2")
    );
    assert_eq!(
        ok(json!({"$and": [{"a": 1}]})),
        Expr::And(vec![text("a = 1")])
    );
    assert_eq!(ok(json!({"$not": {"a": 1}})), text("NOT a = 1"));
    assert_eq!(
        ok(json!({"$not": {"$or": [{"a": 1}, {"$and": [{"b": 2}, {"c": 3}]}]}})),
        text("NOT (a = 1 OR b = 2 AND c = 3)")
    );
    // Several keys, several operators: one And, in key order.
    assert_eq!(
        ok(json!({"year": {"$lt": 2025, "$gte": 2020}, "lang": "en"})),
        text("lang = 'en' AND year >= 2020 AND year < 2025")
    );
    assert_eq!(
        ok(json!({"b": 1, "$or": [{"a": 1}, {"a": 2}]})),
        text("(a = 1 OR a = 2) AND b = 1")
    );
}

#[test]
fn malformed() {
    fails(json!([1]), "a filter is a JSON object, found an array");
    fails(json!({}), "a filter is a non-empty JSON object");
    fails(
        json!({"$and": []}),
        "$and: \"$and\" takes a non-empty array of filters, found an empty array",
    );
    fails(
        json!({"$or": {"a": 1}}),
        "$or: \"$or\" takes a non-empty array of filters, found an object",
    );
    fails(
        json!({"$and": [{"a": 1}, 3]}),
        "$and[1]: a filter is a JSON object, found a number",
    );
    fails(
        json!({"$not": [{"a": 1}]}),
        "$not: a filter is a JSON object, found an array",
    );
    fails(
        json!({"$and": [{"a": 1}, {"year": {"$gte": [1]}}]}),
        "$and[1].year: \"$gte\" takes a number or a string, found an array",
    );
    fails(
        json!({"x": true}),
        "x: a field takes a number, a string or an object of operators, found a boolean",
    );
    fails(
        json!({"x": null}),
        "x: a field takes a number, a string or an object of operators, found null",
    );
    fails(
        json!({"x": [1, 2]}),
        "x: a field takes a number, a string or an object of operators, found an array",
    );
    fails(
        json!({"x": {"$in": []}}),
        "x: \"$in\" takes a non-empty array of numbers and strings, found an empty array",
    );
    fails(
        json!({"x": {"$nin": 3}}),
        "x: \"$nin\" takes a non-empty array of numbers and strings, found a number",
    );
    fails(
        json!({"x": {"$in": [1, {"a": 1}]}}),
        "x.$in[1]: a value is a number or a string, found an object",
    );
    fails(
        json!({"x": {"$eq": false}}),
        "x: \"$eq\" takes a number or a string, found a boolean",
    );
    assert!(parse_json(&json!({"x": {}}))
        .unwrap_err()
        .message
        .starts_with("x: a field's object of operators is empty"));
    assert!(parse_json(&json!({"x": {"gt": 1}}))
        .unwrap_err()
        .message
        .starts_with("x: unknown operator \"gt\""));
    assert!(parse_json(&json!({"$nor": []}))
        .unwrap_err()
        .message
        .starts_with("unknown operator \"$nor\""));
    fails(json!({"": 1}), "a field name may not be empty");
}

#[test]
fn depth() {
    let mut v = json!({"a": 1});
    for _ in 0..MAX_DEPTH {
        v = json!({"$not": v});
    }
    assert!(parse_json(&v).is_ok());
    let v = json!({"$and": [v]});
    assert!(parse_json(&v)
        .unwrap_err()
        .message
        .contains("nests deeper than 64 levels"));
}

#[test]
fn from_text() {
    assert_eq!(
        parse_json_str(r#" {"x": {"$in": [1, 2]}} "#),
        Ok(text("x IN (1, 2)"))
    );
    let e = parse_json_str("{\"x\": 1,\n \"y\": }").unwrap_err();
    assert_eq!(e.pos, 15, "{e}");
    assert!(
        e.message
            .starts_with("invalid JSON: expected value at line 2, column 7"),
        "{e}"
    );
    assert!(e.to_string().ends_with("\n   \"y\": }\n        ^"), "{e}");
    let e = parse_json_str("{\"é\": ").unwrap_err();
    assert!(e.pos <= 8 && e.input.is_char_boundary(e.pos), "{e}");
    let e = parse_json_str("[]").unwrap_err();
    assert_eq!(e.message, "a filter is a JSON object, found an empty array");
    let e = parse_json_str(&" ".repeat(MAX_LEN + 1)).unwrap_err();
    assert!(e.message.contains("at most 65536"));
    for bad in [
        "",
        "{",
        "{\"a\":",
        "nul",
        "{\"a\": 1}}",
        "\"x\"",
        "{\"a\": 1e999}",
    ] {
        assert!(parse_json_str(bad).is_err(), "{bad:?}");
    }
}
