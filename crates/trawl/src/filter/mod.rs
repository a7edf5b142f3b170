//! Filtered search: attributes of the indexed vectors (labels and numeric fields), the filter
//! language over them, and predicates compiled against an index's attributes.

pub mod expr;

pub use expr::{CmpOp, Expr, Value};
