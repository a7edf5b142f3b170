//! Predicates against a naive evaluation of the expression over the raw rows; the file round
//! trip; the input readers' errors.

use std::collections::{HashMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::attrs::{AttrsBuilder, Number};
use super::expr::{CmpOp, Expr, Value};
use super::{file, input, FilterError, Predicate};

/// The rows as plain data: labels and numbers.
struct Raw {
    labels: Vec<HashSet<String>>,
    nums: Vec<HashMap<String, Number>>,
}

fn raw(n: usize, seed: u64) -> Raw {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut labels = Vec::new();
    let mut nums = Vec::new();
    for _ in 0..n {
        let mut l = HashSet::new();
        for _ in 0..rng.gen_range(0..4) {
            // Zipf-like: small label numbers far more often.
            let k: u32 = (rng.gen::<f64>().powi(3) * 40.0) as u32;
            l.insert(format!("L{k}"));
        }
        if rng.gen_bool(0.5) {
            l.insert(format!("lang={}", ["en", "de", "fr"][rng.gen_range(0..3)]));
        }
        let mut m = HashMap::new();
        if rng.gen_bool(0.8) {
            m.insert("year".to_string(), Number::I64(rng.gen_range(2000..2030)));
        }
        if rng.gen_bool(0.6) {
            m.insert("score".to_string(), Number::F64(rng.gen_range(-1.0..1.0)));
        }
        labels.push(l);
        nums.push(m);
    }
    Raw { labels, nums }
}

fn build(r: &Raw) -> super::Attributes {
    let mut b = AttrsBuilder::new(r.labels.len()).unwrap();
    for (row, (l, m)) in r.labels.iter().zip(&r.nums).enumerate() {
        for label in l {
            b.add_label(row as u32, label).unwrap();
        }
        for (k, v) in m {
            b.set_number(k, row as u32, *v).unwrap();
        }
    }
    b.finish().unwrap()
}

fn label_text(field: &str, v: &Value) -> String {
    let t = match v {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(x) => x.to_string(),
    };
    if field == "label" {
        t
    } else {
        format!("{field}={t}")
    }
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        Value::Str(_) => f64::NAN,
    }
}

/// The expression evaluated directly on row `row`.
fn naive(e: &Expr, r: &Raw, row: usize) -> bool {
    let is_num = |f: &str| f == "year" || f == "score";
    match e {
        Expr::And(xs) => xs.iter().all(|x| naive(x, r, row)),
        Expr::Or(xs) => xs.iter().any(|x| naive(x, r, row)),
        Expr::Not(x) => !naive(x, r, row),
        Expr::Cmp { field, op, value } if is_num(field) => {
            let Some(x) = r.nums[row].get(field) else {
                return false;
            };
            let (x, v) = (x.as_f64(), num(value));
            match op {
                CmpOp::Eq => x == v,
                CmpOp::Ne => x != v,
                CmpOp::Lt => x < v,
                CmpOp::Le => x <= v,
                CmpOp::Gt => x > v,
                CmpOp::Ge => x >= v,
            }
        }
        Expr::Cmp { field, op, value } => {
            let has = r.labels[row].contains(&label_text(field, value));
            if *op == CmpOp::Eq {
                has
            } else {
                !has
            }
        }
        Expr::In { field, values } if is_num(field) => r.nums[row]
            .get(field)
            .is_some_and(|x| values.iter().any(|v| x.as_f64() == num(v))),
        Expr::In { field, values }
        | Expr::Has {
            field,
            all: false,
            values,
        } => values
            .iter()
            .any(|v| r.labels[row].contains(&label_text(field, v))),
        Expr::Has { field, values, .. } => values
            .iter()
            .all(|v| r.labels[row].contains(&label_text(field, v))),
    }
}

fn random_leaf(rng: &mut ChaCha8Rng) -> Expr {
    let ops = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];
    let label = |rng: &mut ChaCha8Rng| Value::Str(format!("L{}", rng.gen_range(0..45)));
    match rng.gen_range(0..7) {
        0 => Expr::Cmp {
            field: "label".into(),
            op: [CmpOp::Eq, CmpOp::Ne][rng.gen_range(0..2)],
            value: label(rng),
        },
        1 => Expr::Cmp {
            field: "lang".into(),
            op: CmpOp::Eq,
            value: Value::Str(["en", "de", "xx"][rng.gen_range(0..3)].into()),
        },
        2 => Expr::Cmp {
            field: "year".into(),
            op: ops[rng.gen_range(0..6)],
            value: Value::Int(rng.gen_range(1998..2032)),
        },
        3 => Expr::Cmp {
            field: "score".into(),
            op: ops[rng.gen_range(0..6)],
            value: Value::Float(rng.gen_range(-1.2..1.2)),
        },
        4 => Expr::In {
            field: "year".into(),
            values: (0..rng.gen_range(1..4))
                .map(|_| Value::Int(rng.gen_range(2000..2030)))
                .collect(),
        },
        5 => Expr::In {
            field: "label".into(),
            values: (0..rng.gen_range(1..4)).map(|_| label(rng)).collect(),
        },
        _ => Expr::Has {
            field: "label".into(),
            all: rng.gen_bool(0.5),
            values: (0..rng.gen_range(1..3)).map(|_| label(rng)).collect(),
        },
    }
}

fn random_expr(rng: &mut ChaCha8Rng, depth: u32) -> Expr {
    if depth == 0 || rng.gen_bool(0.35) {
        return random_leaf(rng);
    }
    match rng.gen_range(0..3) {
        0 => Expr::And(
            (0..rng.gen_range(2..4))
                .map(|_| random_expr(rng, depth - 1))
                .collect(),
        ),
        1 => Expr::Or(
            (0..rng.gen_range(2..4))
                .map(|_| random_expr(rng, depth - 1))
                .collect(),
        ),
        _ => Expr::Not(Box::new(random_expr(rng, depth - 1))),
    }
}

#[test]
fn predicates_equal_the_naive_evaluation() {
    let r = raw(3000, 7);
    let attrs = build(&r);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for case in 0..400 {
        let e = random_expr(&mut rng, 3);
        let p = Predicate::compile(&e, &attrs).unwrap();
        let want: Vec<u32> = (0..r.labels.len())
            .filter(|&row| naive(&e, &r, row))
            .map(|row| row as u32)
            .collect();
        let got: Vec<u32> = (0..r.labels.len() as u32)
            .filter(|&row| p.matches(row))
            .collect();
        assert_eq!(got, want, "case {case}: {e:?}");
        assert_eq!(
            p.collect().iter().collect::<Vec<u32>>(),
            want,
            "case {case}: {e:?}"
        );
        // The scan's rows: the same set, each once, in any order.
        let mut rows = vec![7u32];
        p.rows_into(&mut rows);
        rows.sort_unstable();
        assert_eq!(rows, want, "case {case}: rows_into {e:?}");
        let c = p.count();
        if c.exact {
            assert_eq!(c.rows, want.len() as u64, "case {case}: {e:?}");
        }
    }
}

#[test]
fn ranges_of_one_field_merge_and_count_exactly() {
    let r = raw(5000, 3);
    let attrs = build(&r);
    let e = Expr::And(vec![
        Expr::Cmp {
            field: "year".into(),
            op: CmpOp::Ge,
            value: Value::Int(2010),
        },
        Expr::Cmp {
            field: "year".into(),
            op: CmpOp::Lt,
            value: Value::Int(2015),
        },
        Expr::Cmp {
            field: "year".into(),
            op: CmpOp::Gt,
            value: Value::Float(2009.5),
        },
    ]);
    let p = Predicate::compile(&e, &attrs).unwrap();
    let want = (0..5000).filter(|&row| naive(&e, &r, row)).count() as u64;
    assert!(want > 0);
    assert_eq!(
        p.count(),
        super::Count {
            rows: want,
            exact: true
        }
    );
}

#[test]
fn unknown_fields_and_bad_comparisons_are_errors() {
    let attrs = build(&raw(100, 1));
    let cmp = |field: &str, op, value| Expr::Cmp {
        field: field.into(),
        op,
        value,
    };
    let err = |e: Expr| Predicate::compile(&e, &attrs).unwrap_err();
    assert!(matches!(
        err(cmp("tenant", CmpOp::Eq, Value::Int(3))),
        FilterError::UnknownField { .. }
    ));
    assert!(matches!(
        err(cmp("lang", CmpOp::Lt, Value::Str("en".into()))),
        FilterError::Type { .. }
    ));
    assert!(matches!(
        err(cmp("year", CmpOp::Eq, Value::Str("x".into()))),
        FilterError::Type { .. }
    ));
    let has = Expr::Has {
        field: "year".into(),
        all: true,
        values: vec![Value::Int(1)],
    };
    assert!(matches!(err(has), FilterError::Type { .. }));
    assert_eq!(
        err(cmp("tenant", CmpOp::Eq, Value::Int(3))).kind(),
        crate::ErrorKind::InvalidInput
    );
    // A label no row has matches nothing.
    let p =
        Predicate::compile(&cmp("label", CmpOp::Eq, Value::Str("nope".into())), &attrs).unwrap();
    assert_eq!(p.count().rows, 0);
    let empty = AttrsBuilder::new(10).unwrap().finish().unwrap();
    assert!(matches!(
        Predicate::compile(&cmp("label", CmpOp::Eq, Value::Str("a".into())), &empty),
        Err(FilterError::NoAttributes)
    ));
}

#[test]
fn the_file_round_trips_and_refuses_damage() {
    let attrs = build(&raw(2000, 5));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file::FILE_NAME);
    file::save(&attrs, &path).unwrap();
    assert_eq!(file::load(&path, 2000).unwrap(), attrs);
    assert!(file::load(&path, 2001).is_err());
    let bytes = std::fs::read(&path).unwrap();
    for at in [0, 10, 40, bytes.len() / 2, bytes.len() - 1] {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        std::fs::write(&path, &b).unwrap();
        let e = file::load(&path, 2000).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Corrupt, "byte {at}");
    }
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    assert!(file::load(&path, 2000).is_err());
}

#[test]
fn selecting_rows_renumbers_them() {
    let r = raw(500, 9);
    let attrs = build(&r);
    let rows: Vec<u32> = (0..500).rev().step_by(3).collect();
    let sub = attrs.select(&rows).unwrap();
    assert_eq!(sub.n() as usize, rows.len());
    for (new, &old) in rows.iter().enumerate() {
        let mut a = attrs.labels_of(old);
        let mut b = sub.labels_of(new as u32);
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        for (fi, f) in attrs.fields().iter().enumerate() {
            let (si, _) = sub.field(&f.name).unwrap();
            assert_eq!(attrs.number(fi as u32, old), sub.number(si, new as u32));
        }
    }
}

#[test]
fn input_files_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let labels = dir.path().join("labels.txt");
    std::fs::write(&labels, "a,b\n\n c , lang=en\n").unwrap();
    let mut b = AttrsBuilder::new(3).unwrap();
    input::read_label_file(&labels, 3, &mut b).unwrap();
    let jsonl = dir.path().join("attrs.jsonl");
    std::fs::write(&jsonl, "{\"year\": 2020, \"tags\": [\"x\", \"y\"]}\n{}\n{\"year\": 2021.5, \"kind\": \"doc\", \"rank\": null}\n").unwrap();
    input::read_attrs_jsonl(&jsonl, 3, &mut b).unwrap();
    let a = b.finish().unwrap();
    assert_eq!(a.labels_of(2).len(), 3, "{:?}", a.labels_of(2));
    let (yi, y) = a.field("year").unwrap();
    assert_eq!(y.values.type_name(), "f64");
    assert_eq!(a.number(yi, 1), None);
    assert_eq!(a.number(yi, 2), Some(Number::F64(2021.5)));
    assert!(a.is_label_key("tags") && a.is_label_key("lang") && a.is_label_key("label"));

    // Wrong line counts, bad JSON, bad labels: errors naming the file and line.
    let mut b = AttrsBuilder::new(4).unwrap();
    let e = input::read_label_file(&labels, 4, &mut b).unwrap_err();
    assert!(e.to_string().contains("3 lines but the data has 4"), "{e}");
    for (text, needle) in [
        ("{\"a\": {\"b\": 1}}\n", "nested"),
        ("[1]\n", "JSON object"),
        ("{\"a\": \n", "not JSON"),
        ("{\"1a\": 2}\n", "not a field name"),
        ("{\"and\": 2}\n", "word of the filter"),
    ] {
        std::fs::write(&jsonl, text).unwrap();
        let mut b = AttrsBuilder::new(1).unwrap();
        let e = input::read_attrs_jsonl(&jsonl, 1, &mut b).unwrap_err();
        assert!(
            e.to_string().contains(needle) && e.to_string().contains("line 1"),
            "{e}"
        );
    }
    let mut b = AttrsBuilder::new(1).unwrap();
    assert!(b.set_number("x", 0, Number::F64(f64::NAN)).is_err());
    assert!(b.set_number("x", 1, Number::I64(1)).is_err());
    // A key both numeric and a label key is refused.
    let mut b = AttrsBuilder::new(2).unwrap();
    b.set_number("kind", 0, Number::I64(1)).unwrap();
    b.add_label(1, "kind=x").unwrap();
    assert!(b.finish().is_err());
}

#[test]
fn a_value_listed_twice_in_an_in_counts_once() {
    let r = raw(3000, 5);
    let attrs = build(&r);
    for text in [
        "year IN (2010, 2010, 2012)",
        "year IN (2010, 2010.0)",
        "NOT year IN (2001, 2001)",
    ] {
        let e = crate::filter::parse(text).unwrap();
        let p = Predicate::compile(&e, &attrs).unwrap();
        let want: Vec<u32> = (0..3000u32)
            .filter(|&row| naive(&e, &r, row as usize))
            .collect();
        assert!(!want.is_empty(), "{text}");
        assert_eq!(p.count().rows, want.len() as u64, "{text}");
        assert_eq!(p.collect().iter().collect::<Vec<u32>>(), want, "{text}");
        let mut rows = Vec::new();
        p.rows_into(&mut rows);
        rows.sort_unstable();
        assert_eq!(rows, want, "{text}");
    }
}
