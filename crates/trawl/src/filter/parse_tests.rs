use proptest::prelude::*;

use super::*;
use crate::filter::expr::{CmpOp, Expr, Value};

fn cmp(field: &str, op: CmpOp, value: Value) -> Expr {
    Expr::Cmp {
        field: field.into(),
        op,
        value,
    }
}

fn s(v: &str) -> Value {
    Value::Str(v.into())
}

fn eq(field: &str, v: i64) -> Expr {
    cmp(field, CmpOp::Eq, Value::Int(v))
}

fn not(e: Expr) -> Expr {
    Expr::Not(Box::new(e))
}

fn ok(text: &str) -> Expr {
    match parse(text) {
        Ok(e) => e,
        Err(e) => panic!("{text:?} did not parse:\n{e}"),
    }
}

/// Asserts that `text` fails at byte `pos` with a message containing `phrase`.
fn fails(text: &str, pos: usize, phrase: &str) {
    let e = match parse(text) {
        Ok(e) => panic!("{text:?} parsed, to {e:?}"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
    assert!(
        e.message.contains(phrase),
        "{text:?}: {:?} lacks {phrase:?}",
        e.message
    );
    assert_eq!(e.pos, pos, "{text:?}: {e}");
}

#[test]
fn the_example() {
    let e = ok(r#"lang = "en" AND tenant IN (3, 42) AND year >= 2024"#);
    assert_eq!(
        e,
        Expr::And(vec![
            cmp("lang", CmpOp::Eq, s("en")),
            Expr::In {
                field: "tenant".into(),
                values: vec![Value::Int(3), Value::Int(42)]
            },
            cmp("year", CmpOp::Ge, Value::Int(2024)),
        ])
    );
    assert_eq!(
        e.to_string(),
        r#"lang = "en" AND tenant IN (3, 42) AND year >= 2024"#
    );
    assert_eq!(
        "year>=2024".parse::<Expr>(),
        Ok(cmp("year", CmpOp::Ge, Value::Int(2024)))
    );
}

#[test]
fn comparisons() {
    let ops = [
        ("=", CmpOp::Eq),
        ("==", CmpOp::Eq),
        ("!=", CmpOp::Ne),
        ("<>", CmpOp::Ne),
        ("<", CmpOp::Lt),
        ("<=", CmpOp::Le),
        (">", CmpOp::Gt),
        (">=", CmpOp::Ge),
    ];
    for (text, op) in ops {
        assert_eq!(ok(&format!("x {text} 1")), cmp("x", op, Value::Int(1)));
        assert_eq!(ok(&format!("x{text}-1")), cmp("x", op, Value::Int(-1)));
    }
}

#[test]
fn values() {
    let v = |text: &str| match ok(&format!("x = {text}")) {
        Expr::Cmp { value, .. } => value,
        e => panic!("{e:?}"),
    };
    assert_eq!(v("0"), Value::Int(0));
    assert_eq!(v("-17"), Value::Int(-17));
    assert_eq!(v("9223372036854775807"), Value::Int(i64::MAX));
    assert_eq!(v("-9223372036854775808"), Value::Int(i64::MIN));
    assert_eq!(v("2.5"), Value::Float(2.5));
    assert_eq!(v("-0.125"), Value::Float(-0.125));
    assert_eq!(v("1e3"), Value::Float(1000.0));
    assert_eq!(v("1.5E-2"), Value::Float(0.015));
    assert_eq!(v("2e+2"), Value::Float(200.0));
}

#[test]
fn strings() {
    let v = |text: &str| match ok(&format!("x = {text}")) {
        Expr::Cmp {
            value: Value::Str(s),
            ..
        } => s,
        e => panic!("{e:?}"),
    };
    assert_eq!(v("'en'"), "en");
    assert_eq!(v("\"en\""), "en");
    assert_eq!(v("''"), "");
    assert_eq!(v(r#""a\"b\\c\'d\ne\tf""#), "a\"b\\c'd\ne\tf");
    assert_eq!(v(r#"'it\'s "x"'"#), "it's \"x\"");
    assert_eq!(v("'AND OR ( ) ,'"), "AND OR ( ) ,");
    assert_eq!(v("'café ☕ 日本'"), "café ☕ 日本");
}

#[test]
fn fields() {
    let f = |text: &str| match ok(&format!("{text} = 1")) {
        Expr::Cmp { field, .. } => field,
        e => panic!("{e:?}"),
    };
    assert_eq!(f("year"), "year");
    assert_eq!(f("_a.b:c-d9"), "_a.b:c-d9");
    assert_eq!(f("`and`"), "and");
    assert_eq!(f("`two words`"), "two words");
    assert_eq!(f("`back``quote`"), "back`quote");
    assert_eq!(f("`日本`"), "日本");
    assert_eq!(
        f("Android"),
        "Android",
        "a word starting with a keyword is a field"
    );
    assert_eq!(f("nothing"), "nothing");
}

#[test]
fn lists_and_ranges() {
    let ints = |v: &[i64]| v.iter().map(|&i| Value::Int(i)).collect::<Vec<_>>();
    let in_ = |f: &str, v: &[i64]| Expr::In {
        field: f.into(),
        values: ints(v),
    };
    assert_eq!(ok("t IN (1)"), in_("t", &[1]));
    assert_eq!(ok("t in (1, 2, 3,)"), in_("t", &[1, 2, 3]));
    assert_eq!(
        ok("t IN ('a', 2.5, -3)"),
        Expr::In {
            field: "t".into(),
            values: vec![s("a"), Value::Float(2.5), Value::Int(-3)]
        }
    );
    assert_eq!(ok("t NOT IN (1,2)"), not(in_("t", &[1, 2])));
    assert_eq!(ok("NOT t IN (1,2)"), not(in_("t", &[1, 2])));
    let between = Expr::And(vec![
        cmp("y", CmpOp::Ge, Value::Int(1)),
        cmp("y", CmpOp::Le, Value::Float(9.5)),
    ]);
    assert_eq!(ok("y BETWEEN 1 AND 9.5"), between);
    assert_eq!(ok("y not between 1 and 9.5"), not(between.clone()));
    assert_eq!(
        ok("y BETWEEN 1 AND 9.5 AND z = 2"),
        Expr::And(vec![between, eq("z", 2)])
    );
}

#[test]
fn has() {
    let has = |all, v: Vec<Value>| Expr::Has {
        field: "tags".into(),
        all,
        values: v,
    };
    assert_eq!(ok("tags HAS 'a'"), has(false, vec![s("a")]));
    assert_eq!(ok("tags has 7"), has(false, vec![Value::Int(7)]));
    assert_eq!(
        ok("tags HAS ANY ('a', 'b')"),
        has(false, vec![s("a"), s("b")])
    );
    assert_eq!(
        ok("tags HAS ALL ('a', 'b',)"),
        has(true, vec![s("a"), s("b")])
    );
    assert_eq!(ok("tags Has All ('a')"), has(true, vec![s("a")]));
}

#[test]
fn precedence_and_grouping() {
    let (a, b, c, d) = (eq("a", 1), eq("b", 2), eq("c", 3), eq("d", 4));
    assert_eq!(
        ok("a = 1 OR b = 2 AND c = 3"),
        Expr::Or(vec![a.clone(), Expr::And(vec![b.clone(), c.clone()])])
    );
    assert_eq!(
        ok("a = 1 AND b = 2 OR c = 3 AND d = 4"),
        Expr::Or(vec![
            Expr::And(vec![a.clone(), b.clone()]),
            Expr::And(vec![c.clone(), d.clone()])
        ])
    );
    assert_eq!(
        ok("(a = 1 OR b = 2) AND c = 3"),
        Expr::And(vec![Expr::Or(vec![a.clone(), b.clone()]), c.clone()])
    );
    assert_eq!(
        ok("NOT a = 1 AND b = 2"),
        Expr::And(vec![not(a.clone()), b.clone()])
    );
    assert_eq!(
        ok("NOT (a = 1 AND b = 2)"),
        not(Expr::And(vec![a.clone(), b.clone()]))
    );
    assert_eq!(ok("NOT NOT a = 1"), not(not(a.clone())));
    assert_eq!(
        ok("a=1 or b=2 or c=3 or d=4"),
        Expr::Or(vec![a.clone(), b.clone(), c.clone(), d.clone()])
    );
    assert_eq!(ok("((a = 1))"), a.clone());
    // A parenthesised operand stays one operand.
    assert_eq!(
        ok("(a = 1 AND b = 2) AND c = 3"),
        Expr::And(vec![Expr::And(vec![a.clone(), b.clone()]), c.clone()])
    );
    assert_eq!(ok(" \t\n a\n=\n1 \r\n"), a);
}

#[test]
fn malformed() {
    fails("", 0, "the filter is empty");
    fails("   ", 3, "the filter is empty");
    fails(
        "year >= AND x",
        8,
        "expected a value after '>=' but found the keyword 'AND'",
    );
    fails(
        "year >=",
        7,
        "expected a value after '>=' but found the end of the filter",
    );
    fails(
        "year = 1 x",
        9,
        "expected AND, OR or the end of the filter but found 'x'",
    );
    fails("year = 1)", 8, "unmatched ')'");
    fails(
        "(year = 1",
        9,
        "expected AND, OR or ')' (closing the '(' at column 1)",
    );
    fails("(a = 1 AND (b = 2)", 18, "closing the '(' at column 1");
    fails("lang = 'en", 7, "unterminated string starting at column 8");
    fails(
        "lang = \"en\\\"",
        7,
        "unterminated string starting at column 8",
    );
    fails("`lang = 1", 0, "unterminated backquoted field name");
    fails("`` = 1", 0, "empty field name");
    fails(
        "t IN ()",
        6,
        "found ')' at column 7 (IN takes at least one value)",
    );
    fails(
        "t IN (1 AND 2)",
        8,
        "expected ')' or ',' but found the keyword 'AND'",
    );
    fails(
        "t IN (1, 2",
        10,
        "expected ')' or ',' but found the end of the filter",
    );
    fails("t IN 1", 5, "expected '(' after IN but found '1'");
    fails(
        "t IN (1,,2)",
        8,
        "expected a value in the IN list but found ','",
    );
    fails(
        "AND = 1",
        0,
        "expected a field name, NOT or '(' but found the keyword 'AND'",
    );
    fails(
        "or = 1",
        0,
        "found the keyword 'or' at column 1 (a field so named is written in backquotes: `or`)",
    );
    fails("x = 9223372036854775808", 4, "does not fit in 64 bits");
    fails("x = -9223372036854775809", 4, "does not fit in 64 bits");
    fails("x = 1e999", 4, "number 1e999 is out of range");
    fails("x = inf", 4, "numbers must be finite");
    fails("x = NaN", 4, "numbers must be finite");
    fails("x = 1.", 4, "malformed number '1.'");
    fails("x = 1.2.3", 4, "malformed number '1.2.3'");
    fails("x = 2024abc", 4, "malformed number '2024abc'");
    fails("x = 1e", 4, "malformed number '1e'");
    fails("x = -", 4, "expected a digit after '-'");
    fails(
        "x = en",
        4,
        "expected a value after '=' but found 'en' at column 5 (a string is quoted: \"en\")",
    );
    fails("x ! 1", 2, "expected '=' after '!'");
    fails(
        "x 1",
        2,
        "expected a comparison (=, !=, <, <=, >, >=), IN, NOT IN, BETWEEN or HAS",
    );
    fails(
        "x NOT = 1",
        6,
        "expected IN or BETWEEN after NOT but found '='",
    );
    fails(
        "x BETWEEN 1 OR 2",
        12,
        "expected AND after BETWEEN's lower bound",
    );
    fails("x HAS", 5, "expected a value after HAS");
    fails("x HAS ANY 'a'", 10, "expected '(' after HAS ANY");
    fails("x = 'a\\q'", 6, "unknown escape '\\q'");
    fails(
        "x = 1 AND",
        9,
        "expected a field name, NOT or '(' but found the end of the filter",
    );
    fails("x = 1 OR OR y = 2", 9, "found the keyword 'OR'");
    fails("NOT", 3, "expected a field name, NOT or '('");
    fails("x = 1 §", 6, "unexpected character '§'");
    fails("é = 1", 0, "unexpected character 'é'");
    fails("()", 1, "expected a field name, NOT or '(' but found ')'");
    fails("x = 'a' 'b'", 8, "but found the string \"b\"");
}

#[test]
fn multi_line_position() {
    let e = parse("a = 1\nAND b >=\n  AND c = 2").unwrap_err();
    assert_eq!(e.pos, 17);
    assert!(e.message.ends_with("at line 3, column 3"), "{}", e.message);
    assert_eq!(e.to_string().lines().nth(1), Some("    AND c = 2"));
    assert_eq!(e.to_string().lines().nth(2), Some("    ^"));
}

#[test]
fn error_display() {
    let e = parse("year >= AND x").unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected a value after '>=' but found the keyword 'AND' at column 9\n  \
         year >= AND x\n          ^"
    );
    let e = parse("é1 = 'x' AND\t\tb ? 2").unwrap_err();
    assert_eq!(e.to_string().lines().nth(2), Some("  ^"));
    let e = parse("`é` = 'x' AND\t\tb ? 2").unwrap_err();
    assert_eq!(e.to_string().lines().nth(2), Some("               \t\t  ^"));
    let e = parse("x = 1 AND").unwrap_err();
    assert_eq!(e.to_string().lines().nth(2), Some("           ^"));
    let std: &dyn std::error::Error = &e;
    assert!(std.to_string().starts_with("expected a field name"));
}

#[test]
fn long_lines_show_a_window() {
    let text = format!("{} AND x = ", vec!["a = 1"; 100].join(" AND "));
    let e = parse(&text).unwrap_err();
    assert_eq!(e.pos, text.len());
    let shown: Vec<String> = e.to_string().lines().map(String::from).collect();
    assert!(
        shown[1].starts_with("  ...") && shown[1].len() < 120,
        "{shown:?}"
    );
    assert_eq!(shown[2].len(), shown[1].len() + 1, "{shown:?}");
    assert!(shown[2].ends_with('^'));
}

#[test]
fn limits() {
    let deep = format!("{}a = 1", "NOT ".repeat(MAX_DEPTH));
    assert!(parse(&deep).is_ok());
    let deeper = format!("{}a = 1", "NOT ".repeat(MAX_DEPTH + 1));
    let e = parse(&deeper).unwrap_err();
    assert!(e.message.contains("nests deeper than 64 levels"), "{e}");
    assert_eq!(e.pos, 4 * MAX_DEPTH);
    let parens = format!("{}a = 1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert_eq!(parse(&parens), Ok(eq("a", 1)));
    fails(
        &"(".repeat(MAX_LEN),
        MAX_DEPTH,
        "nests deeper than 64 levels",
    );
    fails(&"NOT ".repeat(MAX_LEN / 4), 4 * MAX_DEPTH, "nests deeper");
    let long = format!("a = '{}'", "x".repeat(MAX_LEN));
    let e = parse(&long).unwrap_err();
    assert!(e.message.contains("at most 65536"), "{e}");
    assert_eq!((e.pos, e.input.as_str()), (0, ""));
    let chain = vec!["a = 1"; MAX_LEN / 16].join(" OR ");
    assert!(matches!(parse(&chain), Ok(Expr::Or(v)) if v.len() == MAX_LEN / 16));
}

#[test]
fn display_canonical_form() {
    let (a, b, c) = (eq("a", 1), eq("b", 2), eq("c", 3));
    let and = |v: Vec<Expr>| Expr::And(v);
    let or = |v: Vec<Expr>| Expr::Or(v);
    let cases = [
        (
            or(vec![a.clone(), and(vec![b.clone(), c.clone()])]),
            "a = 1 OR b = 2 AND c = 3",
        ),
        (
            and(vec![or(vec![a.clone(), b.clone()]), c.clone()]),
            "(a = 1 OR b = 2) AND c = 3",
        ),
        (
            and(vec![and(vec![a.clone(), b.clone()]), c.clone()]),
            "(a = 1 AND b = 2) AND c = 3",
        ),
        (
            or(vec![or(vec![a.clone(), b.clone()]), c.clone()]),
            "(a = 1 OR b = 2) OR c = 3",
        ),
        (
            not(and(vec![a.clone(), b.clone()])),
            "NOT (a = 1 AND b = 2)",
        ),
        (not(not(a.clone())), "NOT NOT a = 1"),
        // One operand is written as that operand, which still needs its parentheses.
        (
            and(vec![and(vec![or(vec![a.clone(), b.clone()])]), c.clone()]),
            "(a = 1 OR b = 2) AND c = 3",
        ),
        (and(vec![a.clone()]), "a = 1"),
        (cmp("x y", CmpOp::Ne, Value::Float(1.0)), "`x y` != 1.0"),
        (cmp("IN", CmpOp::Lt, Value::Float(1e-7)), "`IN` < 1e-7"),
        (
            cmp("a`b", CmpOp::Le, Value::Float(-1e300)),
            "`a``b` <= -1e300",
        ),
        (
            cmp("x", CmpOp::Eq, s("a\"b\\c'\n\t")),
            r#"x = "a\"b\\c'\n\t""#,
        ),
        (
            Expr::Has {
                field: "t".into(),
                all: true,
                values: vec![s("a"), Value::Int(2)],
            },
            r#"t HAS ALL ("a", 2)"#,
        ),
        (
            Expr::Has {
                field: "t".into(),
                all: false,
                values: vec![s("a")],
            },
            r#"t HAS ANY ("a")"#,
        ),
        (
            not(Expr::In {
                field: "t".into(),
                values: vec![Value::Int(1)],
            }),
            "NOT t IN (1)",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
        assert_eq!(parse(text).map(|p| p.to_string()), Ok(text.to_string()));
    }
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z_][A-Za-z0-9_.:-]{0,8}",
        Just("and".to_string()),
        Just("Between".to_string()),
        "[ -~]{1,6}",
        "\\PC{1,6}",
        "[`'\" \\\\]{1,4}",
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Int),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0), Just(-1)].prop_map(Value::Int),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::Float),
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(1.0),
            Just(f64::MAX),
            Just(f64::MIN_POSITIVE)
        ]
        .prop_map(Value::Float),
        "\\PC{0,8}".prop_map(Value::Str),
        "[\\\\'\"`\n\t\r a-z]{0,8}".prop_map(Value::Str),
    ]
}

fn predicate() -> impl Strategy<Value = Expr> {
    let op = prop_oneof![
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
    ];
    let values = || prop::collection::vec(value(), 1..4);
    prop_oneof![
        (field(), op, value()).prop_map(|(field, op, value)| Expr::Cmp { field, op, value }),
        (field(), values()).prop_map(|(field, values)| Expr::In { field, values }),
        (field(), any::<bool>(), values()).prop_map(|(field, all, values)| Expr::Has {
            field,
            all,
            values
        }),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    predicate().prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..5).prop_map(Expr::And),
            prop::collection::vec(inner.clone(), 2..5).prop_map(Expr::Or),
            inner.prop_map(|e| Expr::Not(Box::new(e))),
        ]
    })
}

/// Pieces of the language, so that random texts reach deep into the parser.
const PIECES: &[&str] = &[
    "a",
    "b.c",
    "AND",
    "and",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "HAS",
    "ANY",
    "ALL",
    "(",
    ")",
    ",",
    "=",
    "==",
    "!=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "!",
    "1",
    "-2",
    "3.5",
    "1e9",
    "1e999",
    "-",
    "'x'",
    "\"y\\\"z\"",
    "'",
    "\"",
    "`",
    "`f g`",
    "\\",
    " ",
    "\t",
    "\n",
    "é",
    "99999999999999999999",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn display_round_trips(e in expr()) {
        let text = e.to_string();
        prop_assert_eq!(parse(&text), Ok(e), "text: {}", text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,64}|[ -~]{0,64}") {
        check_any(&text)?;
    }

    #[test]
    fn token_soup_never_panics(pieces in prop::collection::vec(prop::sample::select(PIECES), 0..24),
                               spaces in prop::collection::vec(any::<bool>(), 24)) {
        let mut text = String::new();
        for (i, p) in pieces.iter().enumerate() {
            text.push_str(p);
            if spaces[i] {
                text.push(' ');
            }
        }
        check_any(&text)?;
    }
}

/// Whatever `text` is, parsing it does not panic; a result writes back to a text that reads
/// back to it, and an error points into the text.
fn check_any(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(e) => prop_assert_eq!(parse(&e.to_string()), Ok(e)),
        Err(e) => {
            prop_assert!(
                e.pos <= text.len() && text.is_char_boundary(e.pos),
                "{:?}",
                e
            );
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}
