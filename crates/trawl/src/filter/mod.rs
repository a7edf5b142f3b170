//! Filtered search: attributes of the indexed vectors (labels and numeric fields), the filter
//! language over them, and predicates compiled against an index's attributes.
//!
//! - [`expr`]: the filter expression tree; labels and fields, and how a filter names them.
//! - [`attrs`]: [`Attributes`], an index's attributes in memory (a Roaring bitmap per label,
//!   numeric columns with their rows ordered by value), built with [`AttrsBuilder`].
//! - [`input`]: attributes from DiskANN's label file and from JSON lines.
//! - [`file`]: `attrs.trawl`, the attributes as a file of the index.
//! - [`predicate`]: [`Predicate`], a filter compiled against attributes: `matches`, `count`,
//!   `collect`.

pub mod attrs;
mod error;
pub mod expr;
pub mod file;
pub mod input;
pub mod plan;
pub mod predicate;

pub use attrs::{Attributes, AttrsBuilder, Number};
pub use error::FilterError;
pub use expr::{CmpOp, Expr, Value};
pub use plan::{FilterParams, Filters, Plan, QueryFilter};
pub use predicate::{Count, Predicate};

#[cfg(test)]
mod tests;
