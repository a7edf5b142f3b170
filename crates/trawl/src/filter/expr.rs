//! The filter expression: what a query asks of a vector's attributes, as a tree.
//!
//! Fields are of two sorts, told apart by the index's attributes, not by the syntax:
//!
//! - a **numeric field** (a column of `i64` or `f64`, `--attrs`): compared with numbers
//!   (`year >= 2024`, `rank BETWEEN 1 AND 100`, `tenant IN (3, 42)`); a vector without a value
//!   for the field matches no comparison (and so `NOT year >= 2024` matches it);
//! - a **label key**: every other name. A vector's labels are strings; `label` names the plain
//!   labels (DiskANN's label file: `label = "en"` holds when the vector has the label `en`),
//!   and any other key `K` names the labels written `K=V` (`lang = "en"` holds when the vector
//!   has the label `lang=en`; numbers are written as text, so `tenant IN (3, 42)` asks for
//!   `tenant=3` or `tenant=42` when `tenant` is not a numeric field). Equality is membership,
//!   `IN` / `HAS ANY` is any of the values, `HAS ALL` all of them; order comparisons are refused.

/// A literal of a filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An integer literal (no `.` or exponent).
    Int(i64),
    /// A floating-point literal.
    Float(f64),
    /// A quoted string.
    Str(String),
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=` (also `==`).
    Eq,
    /// `!=` (also `<>`).
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl CmpOp {
    /// The operator as the text syntax writes it.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::Ne => "!=",
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
        }
    }
}

/// A filter expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Every operand holds (at least one operand).
    And(Vec<Expr>),
    /// At least one operand holds (at least one operand).
    Or(Vec<Expr>),
    /// The operand does not hold.
    Not(Box<Expr>),
    /// `field op value`.
    Cmp {
        /// The field.
        field: String,
        /// The comparison.
        op: CmpOp,
        /// The value compared with.
        value: Value,
    },
    /// `field IN (values)`: equal to one of the values (at least one).
    In {
        /// The field.
        field: String,
        /// The values.
        values: Vec<Value>,
    },
    /// `field HAS ANY (values)` / `field HAS ALL (values)`: label-set containment (at least
    /// one value).
    Has {
        /// The label key.
        field: String,
        /// `true`: every value; `false`: at least one.
        all: bool,
        /// The values.
        values: Vec<Value>,
    },
}
