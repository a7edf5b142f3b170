//! A filter compiled against an index's attributes: labels resolved to bitmaps, fields to
//! columns, comparisons of one field merged into ranges. It answers three questions — does
//! row `r` match ([`Predicate::matches`], what a traversal asks of each node), how many rows
//! match ([`Predicate::count`], exact for labels and ranges, what the planner asks) and which
//! ([`Predicate::collect`], what a scan of the matches reads).

use roaring::RoaringBitmap;

use crate::filter::attrs::{cmp_numbers, Attributes, Number, LABEL_FIELD};
use crate::filter::expr::{CmpOp, Expr, Value};
use crate::filter::FilterError;

/// Counts up to this are made exact by collecting the rows (an `AND` or `OR` of fields and
/// labels); above, children are taken as independent.
const EXACT_UP_TO: u64 = 1 << 16;

/// How many rows match, and whether the figure is exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Count {
    /// Rows matching (estimated when not `exact`).
    pub rows: u64,
    /// Whether `rows` is exact.
    pub exact: bool,
}

/// One end of a range.
#[derive(Debug, Clone, Copy, PartialEq)]
struct End {
    value: Number,
    /// Excludes `value` itself.
    strict: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum NumTest {
    Range { lo: Option<End>, hi: Option<End> },
    Ne(Number),
    In(Vec<Number>),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Const(bool),
    Label(u32),
    AnyOf(Vec<u32>),
    AllOf(Vec<u32>),
    Num { field: u32, test: NumTest },
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
}

/// A filter compiled against one set of attributes.
#[derive(Debug, Clone)]
pub struct Predicate<'a> {
    attrs: &'a Attributes,
    root: Node,
}

impl<'a> Predicate<'a> {
    /// Compiles `expr` against `attrs`: unknown fields, order comparisons of labels and
    /// strings compared with numbers are errors; a label no row has matches nothing.
    pub fn compile(expr: &Expr, attrs: &'a Attributes) -> Result<Self, FilterError> {
        if attrs.is_empty() {
            return Err(FilterError::NoAttributes);
        }
        Ok(Self {
            attrs,
            root: compile(expr, attrs)?,
        })
    }

    /// The attributes it reads.
    pub fn attrs(&self) -> &'a Attributes {
        self.attrs
    }

    /// Whether row `row` matches.
    #[inline]
    pub fn matches(&self, row: u32) -> bool {
        self.eval(&self.root, row)
    }

    /// Whether it matches every row (no filter in effect).
    pub fn is_all(&self) -> bool {
        self.root == Node::Const(true)
    }

    fn eval(&self, node: &Node, row: u32) -> bool {
        match node {
            Node::Const(b) => *b,
            Node::Label(l) => self.attrs.bitmap(*l).contains(row),
            Node::AnyOf(ls) => ls.iter().any(|&l| self.attrs.bitmap(l).contains(row)),
            Node::AllOf(ls) => ls.iter().all(|&l| self.attrs.bitmap(l).contains(row)),
            Node::Num { field, test } => match self.attrs.number(*field, row) {
                None => false,
                Some(x) => num_test(test, x),
            },
            Node::And(xs) => xs.iter().all(|x| self.eval(x, row)),
            Node::Or(xs) => xs.iter().any(|x| self.eval(x, row)),
            Node::Not(x) => !self.eval(x, row),
        }
    }

    /// Labels every matching row carries one of (`None`: no such labels, e.g. a numeric
    /// range or a `NOT`): a label → itself; `ANY` / `OR` → the union of its operands' (`None`
    /// when one has none); `ALL` / `AND` → the operand's with the fewest rows. A label-aware
    /// graph search starts from these labels' start nodes. Empty when nothing matches.
    pub fn label_cover(&self) -> Option<Vec<u32>> {
        let mut out = self.cover_of(&self.root)?;
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    fn cover_of(&self, node: &Node) -> Option<Vec<u32>> {
        let rows = |ls: &[u32]| -> u64 { ls.iter().map(|&l| self.attrs.bitmap(l).len()).sum() };
        match node {
            Node::Const(false) => Some(Vec::new()),
            Node::Const(true) | Node::Num { .. } | Node::Not(_) => None,
            Node::Label(l) => Some(vec![*l]),
            Node::AnyOf(ls) => Some(ls.clone()),
            Node::AllOf(ls) => ls
                .iter()
                .min_by_key(|&&l| (self.attrs.bitmap(l).len(), l))
                .map(|&l| vec![l]),
            Node::Or(xs) => {
                let mut out = Vec::new();
                for x in xs {
                    out.extend(self.cover_of(x)?);
                }
                Some(out)
            }
            Node::And(xs) => xs
                .iter()
                .filter_map(|x| self.cover_of(x))
                .min_by_key(|c| rows(c)),
        }
    }

    /// How many rows match.
    pub fn count(&self) -> Count {
        self.count_of(&self.root)
    }

    /// The fraction of rows that match.
    pub fn selectivity(&self) -> f64 {
        let n = self.attrs.n();
        if n == 0 {
            return 0.0;
        }
        self.count().rows as f64 / f64::from(n)
    }

    fn count_of(&self, node: &Node) -> Count {
        let n = u64::from(self.attrs.n());
        let exact = |rows: u64| Count { rows, exact: true };
        match node {
            Node::Const(b) => exact(if *b { n } else { 0 }),
            Node::Label(l) => exact(self.attrs.bitmap(*l).len()),
            Node::AnyOf(_) | Node::AllOf(_) => exact(self.collect_of(node).len()),
            Node::Num { field, test } => exact(self.num_count(*field, test)),
            Node::Not(x) => {
                let c = self.count_of(x);
                Count {
                    rows: n - c.rows.min(n),
                    exact: c.exact,
                }
            }
            Node::And(xs) | Node::Or(xs) => {
                let counts: Vec<Count> = xs.iter().map(|x| self.count_of(x)).collect();
                let and = matches!(node, Node::And(_));
                let small = if and {
                    counts.iter().map(|c| c.rows).min().unwrap_or(0)
                } else {
                    counts.iter().map(|c| c.rows).sum()
                };
                if small <= EXACT_UP_TO || !has_num(node) {
                    return exact(self.collect_of(node).len());
                }
                let nf = n.max(1) as f64;
                let frac = if and {
                    counts.iter().map(|c| c.rows as f64 / nf).product::<f64>()
                } else {
                    1.0 - counts
                        .iter()
                        .map(|c| 1.0 - c.rows as f64 / nf)
                        .product::<f64>()
                };
                Count {
                    rows: (frac * nf).round() as u64,
                    exact: false,
                }
            }
        }
    }

    /// The rows that match.
    pub fn collect(&self) -> RoaringBitmap {
        self.collect_of(&self.root)
    }

    /// The rows that match, each once, in no particular order, into `out` (cleared first):
    /// a numeric test's rows straight from the column's value order (no sort, no bitmap),
    /// other filters' from [`Predicate::collect`]. For a scan, which scores every one.
    pub fn rows_into(&self, out: &mut Vec<u32>) {
        out.clear();
        if let Node::Num { field, test } = &self.root {
            let order = &self.attrs.field_at(*field).order;
            let spans = match test {
                NumTest::Range { lo, hi } => vec![self.span(*field, *lo, *hi)],
                NumTest::Ne(v) => {
                    let eq = self.eq_span(*field, *v);
                    vec![0..eq.start, eq.end..order.len()]
                }
                NumTest::In(vs) => self.in_spans(*field, vs),
            };
            for s in spans {
                out.extend_from_slice(&order[s]);
            }
            return;
        }
        out.extend(self.collect().iter());
    }

    fn collect_of(&self, node: &Node) -> RoaringBitmap {
        let n = self.attrs.n();
        match node {
            Node::Const(true) => {
                let mut b = RoaringBitmap::new();
                b.insert_range(0..n);
                b
            }
            Node::Const(false) => RoaringBitmap::new(),
            Node::Label(l) => self.attrs.bitmap(*l).clone(),
            Node::AnyOf(ls) => {
                ls.iter()
                    .map(|&l| self.attrs.bitmap(l))
                    .fold(RoaringBitmap::new(), |mut acc, b| {
                        acc |= b;
                        acc
                    })
            }
            Node::AllOf(ls) => {
                let mut it = ls.iter().map(|&l| self.attrs.bitmap(l));
                let first = it.next().cloned().unwrap_or_default();
                it.fold(first, |mut acc, b| {
                    acc &= b;
                    acc
                })
            }
            Node::Num { field, test } => self.num_collect(*field, test),
            Node::Not(x) => {
                let mut all = self.collect_of(&Node::Const(true));
                all -= self.collect_of(x);
                all
            }
            Node::Or(xs) => xs.iter().fold(RoaringBitmap::new(), |mut acc, x| {
                acc |= self.collect_of(x);
                acc
            }),
            Node::And(xs) => {
                // The smallest operand collected, the others checked on its rows (labels by
                // intersecting their bitmaps).
                let Some((first, _)) = xs
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, x)| self.count_of(x).rows)
                else {
                    return self.collect_of(&Node::Const(true));
                };
                let mut acc = self.collect_of(&xs[first]);
                for (i, x) in xs.iter().enumerate() {
                    if i == first {
                        continue;
                    }
                    if has_num(x) {
                        acc = RoaringBitmap::from_sorted_iter(
                            acc.iter().filter(|&r| self.eval(x, r)),
                        )
                        .unwrap_or_default();
                    } else {
                        acc &= self.collect_of(x);
                    }
                }
                acc
            }
        }
    }

    /// The span of `field`'s order that a range covers.
    fn span(&self, field: u32, lo: Option<End>, hi: Option<End>) -> std::ops::Range<usize> {
        let f = self.attrs.field_at(field);
        let start = lo.map_or(0, |e| f.lower_bound(e.value, e.strict));
        let end = hi.map_or(f.count(), |e| f.lower_bound(e.value, !e.strict));
        start..end.max(start)
    }

    /// The spans of the column's value order holding `vs`, each once (a value listed twice,
    /// or as `3` and `3.0`, gives one span).
    fn in_spans(&self, field: u32, vs: &[Number]) -> Vec<std::ops::Range<usize>> {
        let mut spans: Vec<_> = vs.iter().map(|&v| self.eq_span(field, v)).collect();
        spans.retain(|r| !r.is_empty());
        spans.sort_by_key(|r| (r.start, r.end));
        spans.dedup();
        spans
    }

    fn eq_span(&self, field: u32, v: Number) -> std::ops::Range<usize> {
        let end = Some(End {
            value: v,
            strict: false,
        });
        self.span(field, end, end)
    }

    fn num_count(&self, field: u32, test: &NumTest) -> u64 {
        let total = self.attrs.field_at(field).count() as u64;
        match test {
            NumTest::Range { lo, hi } => self.span(field, *lo, *hi).len() as u64,
            NumTest::Ne(v) => total - self.eq_span(field, *v).len() as u64,
            NumTest::In(vs) => self
                .in_spans(field, vs)
                .iter()
                .map(|s| s.len() as u64)
                .sum(),
        }
    }

    fn num_collect(&self, field: u32, test: &NumTest) -> RoaringBitmap {
        let order = &self.attrs.field_at(field).order;
        let rows = |spans: &[std::ops::Range<usize>]| {
            let mut v: Vec<u32> = spans
                .iter()
                .flat_map(|s| order[s.clone()].iter().copied())
                .collect();
            v.sort_unstable();
            v.dedup();
            RoaringBitmap::from_sorted_iter(v).unwrap_or_default()
        };
        match test {
            NumTest::Range { lo, hi } => rows(&[self.span(field, *lo, *hi)]),
            NumTest::Ne(v) => {
                let eq = self.eq_span(field, *v);
                rows(&[0..eq.start, eq.end..order.len()])
            }
            NumTest::In(vs) => rows(&self.in_spans(field, vs)),
        }
    }
}

fn has_num(node: &Node) -> bool {
    match node {
        Node::Num { .. } => true,
        Node::And(xs) | Node::Or(xs) => xs.iter().any(has_num),
        Node::Not(x) => has_num(x),
        _ => false,
    }
}

fn num_test(test: &NumTest, x: Number) -> bool {
    use std::cmp::Ordering::*;
    match test {
        NumTest::Range { lo, hi } => {
            lo.is_none_or(|e| match cmp_numbers(x, e.value) {
                Greater => true,
                Equal => !e.strict,
                Less => false,
            }) && hi.is_none_or(|e| match cmp_numbers(x, e.value) {
                Less => true,
                Equal => !e.strict,
                Greater => false,
            })
        }
        NumTest::Ne(v) => cmp_numbers(x, *v) != Equal,
        NumTest::In(vs) => vs.iter().any(|v| cmp_numbers(x, *v) == Equal),
    }
}

fn compile(expr: &Expr, attrs: &Attributes) -> Result<Node, FilterError> {
    Ok(match expr {
        Expr::And(xs) => {
            let xs = xs
                .iter()
                .map(|x| compile(x, attrs))
                .collect::<Result<Vec<_>, _>>()?;
            simplify_and(xs)
        }
        Expr::Or(xs) => {
            let mut out = Vec::new();
            for x in xs {
                match compile(x, attrs)? {
                    Node::Const(true) => return Ok(Node::Const(true)),
                    Node::Const(false) => {}
                    Node::Or(ys) => out.extend(ys),
                    y => out.push(y),
                }
            }
            match out.len() {
                0 => Node::Const(false),
                1 => out.pop().unwrap_or(Node::Const(false)),
                _ => Node::Or(out),
            }
        }
        Expr::Not(x) => match compile(x, attrs)? {
            Node::Const(b) => Node::Const(!b),
            Node::Not(y) => *y,
            y => Node::Not(Box::new(y)),
        },
        Expr::Cmp { field, op, value } => compile_cmp(field, *op, value, attrs)?,
        Expr::In { field, values } => match attrs.field(field) {
            Some((f, _)) => {
                let mut vs = values
                    .iter()
                    .map(|v| number(field, v))
                    .collect::<Result<Vec<_>, _>>()?;
                // Each value once, so counts add up.
                vs.sort_by(|a, b| cmp_numbers(*a, *b));
                vs.dedup_by(|a, b| cmp_numbers(*a, *b) == std::cmp::Ordering::Equal);
                Node::Num {
                    field: f,
                    test: NumTest::In(vs),
                }
            }
            None => {
                let ids = label_ids(field, values, attrs)?;
                match ids.iter().flatten().copied().collect::<Vec<u32>>() {
                    v if v.is_empty() => Node::Const(false),
                    v => Node::AnyOf(v),
                }
            }
        },
        Expr::Has { field, all, values } => {
            if attrs.field(field).is_some() {
                return Err(FilterError::Type {
                    field: field.clone(),
                    message: "HAS ANY / HAS ALL ask for labels; this is a numeric field (use IN)"
                        .into(),
                });
            }
            let ids = label_ids(field, values, attrs)?;
            if *all {
                match ids.into_iter().collect::<Option<Vec<u32>>>() {
                    Some(v) => Node::AllOf(v),
                    None => Node::Const(false),
                }
            } else {
                match ids.iter().flatten().copied().collect::<Vec<u32>>() {
                    v if v.is_empty() => Node::Const(false),
                    v => Node::AnyOf(v),
                }
            }
        }
    })
}

/// An `AND`'s operands: constants folded, nested `AND`s flattened, comparisons of one field
/// merged into one range.
fn simplify_and(xs: Vec<Node>) -> Node {
    let mut out: Vec<Node> = Vec::new();
    let mut queue = xs;
    while let Some(x) = queue.pop() {
        match x {
            Node::Const(true) => {}
            Node::Const(false) => return Node::Const(false),
            Node::And(ys) => queue.extend(ys),
            Node::Num {
                field,
                test: NumTest::Range { lo, hi },
            } => {
                let merged = out.iter_mut().find_map(|o| match o {
                    Node::Num {
                        field: f,
                        test: NumTest::Range { lo: l2, hi: h2 },
                    } if *f == field => Some((l2, h2)),
                    _ => None,
                });
                match merged {
                    Some((l2, h2)) => {
                        *l2 = tighter(*l2, lo, true);
                        *h2 = tighter(*h2, hi, false);
                    }
                    None => out.push(Node::Num {
                        field,
                        test: NumTest::Range { lo, hi },
                    }),
                }
            }
            y => out.push(y),
        }
    }
    out.reverse();
    match out.len() {
        0 => Node::Const(true),
        1 => out.pop().unwrap_or(Node::Const(true)),
        _ => Node::And(out),
    }
}

/// The tighter of two ends (`low`: the larger lower end, else the smaller upper end).
fn tighter(a: Option<End>, b: Option<End>, low: bool) -> Option<End> {
    use std::cmp::Ordering::*;
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => Some(match cmp_numbers(a.value, b.value) {
            Equal => End {
                value: a.value,
                strict: a.strict || b.strict,
            },
            Less => {
                if low {
                    b
                } else {
                    a
                }
            }
            Greater => {
                if low {
                    a
                } else {
                    b
                }
            }
        }),
    }
}

fn compile_cmp(
    field: &str,
    op: CmpOp,
    value: &Value,
    attrs: &Attributes,
) -> Result<Node, FilterError> {
    if let Some((f, _)) = attrs.field(field) {
        let v = number(field, value)?;
        let end = |strict| Some(End { value: v, strict });
        let test = match op {
            CmpOp::Eq => NumTest::Range {
                lo: end(false),
                hi: end(false),
            },
            CmpOp::Ne => NumTest::Ne(v),
            CmpOp::Lt => NumTest::Range {
                lo: None,
                hi: end(true),
            },
            CmpOp::Le => NumTest::Range {
                lo: None,
                hi: end(false),
            },
            CmpOp::Gt => NumTest::Range {
                lo: end(true),
                hi: None,
            },
            CmpOp::Ge => NumTest::Range {
                lo: end(false),
                hi: None,
            },
        };
        return Ok(Node::Num { field: f, test });
    }
    let id = label_ids(field, std::slice::from_ref(value), attrs)?[0];
    let has = id.map_or(Node::Const(false), Node::Label);
    match op {
        CmpOp::Eq => Ok(has),
        CmpOp::Ne => Ok(match has {
            Node::Const(b) => Node::Const(!b),
            h => Node::Not(Box::new(h)),
        }),
        _ => Err(FilterError::Type {
            field: field.to_string(),
            message: format!(
                "'{}' orders numbers, and {field:?} is a label key (labels take =, !=, IN, HAS)",
                op.symbol()
            ),
        }),
    }
}

fn number(field: &str, v: &Value) -> Result<Number, FilterError> {
    match v {
        Value::Int(i) => Ok(Number::I64(*i)),
        Value::Float(x) if x.is_finite() => Ok(Number::F64(*x)),
        Value::Float(x) => Err(FilterError::Type {
            field: field.to_string(),
            message: format!("{x} is not a finite number"),
        }),
        Value::Str(s) => Err(FilterError::Type {
            field: field.to_string(),
            message: format!("a numeric field is compared with the string {s:?}"),
        }),
    }
}

/// The label ids `field`'s values name (`None`: a label no row has).
fn label_ids(
    field: &str,
    values: &[Value],
    attrs: &Attributes,
) -> Result<Vec<Option<u32>>, FilterError> {
    if field != LABEL_FIELD && !attrs.is_label_key(field) {
        let keys: Vec<&str> = attrs.label_keys().collect();
        let fields: Vec<&str> = attrs.fields().iter().map(|f| f.name.as_str()).collect();
        return Err(FilterError::UnknownField {
            field: field.to_string(),
            known: format!(
                "the index has numeric fields [{}] and label keys [{}]",
                fields.join(", "),
                keys.join(", ")
            ),
        });
    }
    Ok(values
        .iter()
        .map(|v| {
            let text = match v {
                Value::Str(s) => s.clone(),
                Value::Int(i) => i.to_string(),
                Value::Float(x) => x.to_string(),
            };
            let label = if field == LABEL_FIELD {
                text
            } else {
                format!("{field}={text}")
            };
            attrs.label_id(&label)
        })
        .collect())
}
