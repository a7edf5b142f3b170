//! The attributes of an index's vectors, held in memory: labels as one compressed bitmap per
//! label (Roaring), numeric fields as columns with the vectors ordered by value (exact counts
//! of a range by two binary searches, its vectors as a slice).
//!
//! Rows are the index's own numbering (the graph kind's slots, the IVF and flat kinds' ids).
//! Labels are non-empty strings without `,` or a line break; a label `K=V` is the value `V` of
//! the label key `K` (see [`crate::filter::expr`]). Field names are identifiers
//! (`[A-Za-z_][A-Za-z0-9_.:-]*`, not a keyword of the filter language, not `label`).

use std::collections::{BTreeMap, HashMap};

use roaring::RoaringBitmap;

use crate::filter::FilterError;

/// The name under which a filter reads the plain labels (those without a `K=` key).
pub const LABEL_FIELD: &str = "label";

/// Words of the filter language, refused as field names.
pub const KEYWORDS: [&str; 8] = ["and", "or", "not", "in", "between", "has", "any", "all"];

/// One numeric value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// An integer.
    I64(i64),
    /// A finite float.
    F64(f64),
}

impl Number {
    /// As a float (integers beyond 2^53 round).
    pub fn as_f64(self) -> f64 {
        match self {
            Self::I64(v) => v as f64,
            Self::F64(v) => v,
        }
    }
}

/// The values of one numeric field, by row (a row without a value holds 0).
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Integers.
    I64(Vec<i64>),
    /// Floats (finite).
    F64(Vec<f64>),
}

impl Column {
    /// Rows.
    pub fn len(&self) -> usize {
        match self {
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
        }
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `row`.
    #[inline]
    pub fn get(&self, row: usize) -> Number {
        match self {
            Self::I64(v) => Number::I64(v[row]),
            Self::F64(v) => Number::F64(v[row]),
        }
    }

    /// `i64` or `f64`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::I64(_) => "i64",
            Self::F64(_) => "f64",
        }
    }
}

/// A numeric field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Values by row.
    pub values: Column,
    /// The rows with a value (`None`: every row).
    pub present: Option<RoaringBitmap>,
    /// The rows with a value, ordered by value (then row).
    pub order: Vec<u32>,
}

impl Field {
    /// Whether `row` has a value.
    #[inline]
    pub fn has(&self, row: u32) -> bool {
        self.present.as_ref().is_none_or(|p| p.contains(row))
    }

    /// Rows with a value.
    pub fn count(&self) -> usize {
        self.order.len()
    }

    /// The position in [`Field::order`] of the first row whose value is not below `v`
    /// (`strict`: not at or below `v`).
    pub fn lower_bound(&self, v: Number, strict: bool) -> usize {
        self.order.partition_point(|&r| {
            let x = self.values.get(r as usize);
            match cmp_numbers(x, v) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Equal => strict,
                std::cmp::Ordering::Greater => false,
            }
        })
    }

    pub(super) fn sort_order(values: &Column, present: Option<&RoaringBitmap>) -> Vec<u32> {
        let mut order: Vec<u32> = match present {
            None => (0..values.len() as u32).collect(),
            Some(p) => p.iter().collect(),
        };
        match values {
            Column::I64(v) => order.sort_by_key(|&r| (v[r as usize], r)),
            Column::F64(v) => {
                order.sort_by(|&a, &b| v[a as usize].total_cmp(&v[b as usize]).then(a.cmp(&b)))
            }
        }
        order
    }
}

/// Orders two numbers: integers exactly, anything else as floats.
#[inline]
pub fn cmp_numbers(a: Number, b: Number) -> std::cmp::Ordering {
    match (a, b) {
        (Number::I64(x), Number::I64(y)) => x.cmp(&y),
        _ => a.as_f64().total_cmp(&b.as_f64()),
    }
}

/// The attributes of every row of an index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributes {
    pub(super) n: u32,
    pub(super) names: Vec<String>,
    pub(super) ids: HashMap<String, u32>,
    pub(super) bitmaps: Vec<RoaringBitmap>,
    pub(super) fields: Vec<Field>,
    /// Label keys with the number of their labels some row has; a key of count 0 is one only
    /// the schema knows ([`Attributes::extend_schema`]).
    pub(super) keys: BTreeMap<String, u32>,
}

impl Attributes {
    /// Assembles attributes from their parts, checking them (what a file holds).
    pub fn from_parts(
        n: u32,
        labels: Vec<(String, RoaringBitmap)>,
        fields: Vec<Field>,
    ) -> Result<Self, String> {
        let mut a = Self {
            n,
            ..Self::default()
        };
        for (name, bits) in labels {
            check_label(&name)?;
            if bits.max().is_some_and(|m| m >= n) {
                return Err(format!("label {name:?} names a row past the {n} rows"));
            }
            if a.ids.insert(name.clone(), a.names.len() as u32).is_some() {
                return Err(format!("label {name:?} appears twice"));
            }
            a.names.push(name);
            a.bitmaps.push(bits);
        }
        let mut seen = std::collections::HashSet::new();
        for f in &fields {
            check_field_name(&f.name)?;
            if !seen.insert(f.name.clone()) {
                return Err(format!("field {:?} appears twice", f.name));
            }
            check_field(f, n)?;
        }
        a.fields = fields;
        a.index_keys()?;
        Ok(a)
    }

    pub(super) fn index_keys(&mut self) -> Result<(), String> {
        self.keys.clear();
        for (name, bits) in self.names.iter().zip(&self.bitmaps) {
            let key = name.split_once('=').map_or(LABEL_FIELD, |(k, _)| k);
            *self.keys.entry(key.to_string()).or_default() += u32::from(!bits.is_empty());
        }
        if let Some(f) = self.fields.iter().find(|f| self.keys.contains_key(&f.name)) {
            return Err(format!(
                "{:?} is both a numeric field and a label key",
                f.name
            ));
        }
        Ok(())
    }

    /// Rows.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// Whether there is no label, no label key and no field.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.fields.is_empty() && self.keys.is_empty()
    }

    /// Labels, in id order.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &RoaringBitmap)> {
        self.names.iter().map(String::as_str).zip(&self.bitmaps)
    }

    /// The id of a label.
    pub fn label_id(&self, label: &str) -> Option<u32> {
        self.ids.get(label).copied()
    }

    /// The rows of label `id`.
    pub fn bitmap(&self, id: u32) -> &RoaringBitmap {
        &self.bitmaps[id as usize]
    }

    /// Whether `key` names labels (`label` the plain ones, another key those written `key=…`).
    pub fn is_label_key(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    /// The label keys (`label` when there are plain labels).
    pub fn label_keys(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// The numeric fields.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The numeric field named `name`, with its index.
    pub fn field(&self, name: &str) -> Option<(u32, &Field)> {
        self.fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)
            .map(|(i, f)| (i as u32, f))
    }

    /// The numeric field at index `i`.
    pub fn field_at(&self, i: u32) -> &Field {
        &self.fields[i as usize]
    }

    /// Label occurrences (the sum over rows of their label counts).
    pub fn label_occurrences(&self) -> u64 {
        self.bitmaps.iter().map(RoaringBitmap::len).sum()
    }

    /// Bytes held in memory: the bitmaps at their serialised size (Roaring's containers), the
    /// label texts, and per field its values, its order and its presence bitmap.
    pub fn memory_bytes(&self) -> u64 {
        let labels: usize = self
            .names
            .iter()
            .zip(&self.bitmaps)
            .map(|(s, b)| s.len() + b.serialized_size() + 48)
            .sum();
        let fields: usize = self
            .fields
            .iter()
            .map(|f| {
                f.values.len() * 8
                    + f.order.len() * 4
                    + f.present.as_ref().map_or(0, RoaringBitmap::serialized_size)
            })
            .sum();
        (labels + fields) as u64
    }

    /// Bytes of the label bitmaps alone.
    pub fn label_bytes(&self) -> u64 {
        self.bitmaps
            .iter()
            .map(|b| b.serialized_size() as u64)
            .sum()
    }

    /// The labels of `row` (by scanning every label: for tests and small tools).
    pub fn labels_of(&self, row: u32) -> Vec<&str> {
        self.labels()
            .filter(|(_, b)| b.contains(row))
            .map(|(s, _)| s)
            .collect()
    }

    /// The value of field `f` at `row`, if it has one.
    pub fn number(&self, f: u32, row: u32) -> Option<Number> {
        let field = &self.fields[f as usize];
        field.has(row).then(|| field.values.get(row as usize))
    }

    /// The attributes of the rows `rows` (in that order), renumbered from 0: a subset of an
    /// index (a shard), or its rows in a new order (a merge).
    pub fn select(&self, rows: &[u32]) -> Result<Self, FilterError> {
        let mut b = AttrsBuilder::new(rows.len())?;
        let mut at: HashMap<u32, Vec<u32>> = HashMap::new();
        for (new, &old) in rows.iter().enumerate() {
            at.entry(old).or_default().push(new as u32);
        }
        for (name, bits) in self.labels() {
            let id = b.label(name)?;
            for row in bits {
                for &new in at.get(&row).into_iter().flatten() {
                    b.bitmaps[id as usize].insert(new);
                }
            }
        }
        for (fi, f) in self.fields.iter().enumerate() {
            for (new, &old) in rows.iter().enumerate() {
                if let Some(v) = self.number(fi as u32, old) {
                    b.set_number(&f.name, new as u32, v)?;
                }
            }
        }
        b.finish()
    }
}

/// Builds [`Attributes`] row by row.
#[derive(Debug)]
pub struct AttrsBuilder {
    n: u32,
    names: Vec<String>,
    ids: HashMap<String, u32>,
    bitmaps: Vec<RoaringBitmap>,
    fields: BTreeMap<String, (Column, RoaringBitmap)>,
}

impl AttrsBuilder {
    /// Attributes of `n` rows, none set yet.
    pub fn new(n: usize) -> Result<Self, FilterError> {
        let n = u32::try_from(n).map_err(|_| {
            FilterError::Attrs(format!("{n} rows: at most {} are supported", u32::MAX))
        })?;
        Ok(Self {
            n,
            names: Vec::new(),
            ids: HashMap::new(),
            bitmaps: Vec::new(),
            fields: BTreeMap::new(),
        })
    }

    fn label(&mut self, label: &str) -> Result<u32, FilterError> {
        if let Some(&id) = self.ids.get(label) {
            return Ok(id);
        }
        check_label(label).map_err(FilterError::Attrs)?;
        let id = self.names.len() as u32;
        self.ids.insert(label.to_string(), id);
        self.names.push(label.to_string());
        self.bitmaps.push(RoaringBitmap::new());
        Ok(id)
    }

    fn check_row(&self, row: u32) -> Result<(), FilterError> {
        if row >= self.n {
            return Err(FilterError::Attrs(format!(
                "row {row} is past the {} rows",
                self.n
            )));
        }
        Ok(())
    }

    /// Gives `row` the label `label`.
    pub fn add_label(&mut self, row: u32, label: &str) -> Result<(), FilterError> {
        self.check_row(row)?;
        let id = self.label(label)?;
        self.bitmaps[id as usize].insert(row);
        Ok(())
    }

    /// Sets field `field` of `row` (a field holding integers and floats becomes a float field).
    pub fn set_number(&mut self, field: &str, row: u32, v: Number) -> Result<(), FilterError> {
        self.check_row(row)?;
        if let Number::F64(x) = v {
            if !x.is_finite() {
                return Err(FilterError::Attrs(format!(
                    "field {field:?}, row {row}: {x} is not a finite number"
                )));
            }
        }
        if !self.fields.contains_key(field) {
            check_field_name(field).map_err(FilterError::Attrs)?;
            let n = self.n as usize;
            let col = match v {
                Number::I64(_) => Column::I64(vec![0; n]),
                Number::F64(_) => Column::F64(vec![0.0; n]),
            };
            self.fields
                .insert(field.to_string(), (col, RoaringBitmap::new()));
        }
        let Some((col, present)) = self.fields.get_mut(field) else {
            return Err(FilterError::Attrs(format!("field {field:?} vanished")));
        };
        if let (Column::I64(ints), Number::F64(_)) = (&*col, v) {
            *col = Column::F64(ints.iter().map(|&i| i as f64).collect());
        }
        match (col, v) {
            (Column::I64(c), Number::I64(x)) => c[row as usize] = x,
            (Column::F64(c), x) => c[row as usize] = x.as_f64(),
            (Column::I64(_), Number::F64(_)) => unreachable!("promoted above"),
        }
        present.insert(row);
        Ok(())
    }

    /// The attributes (a name both a numeric field and a label key is refused).
    pub fn finish(self) -> Result<Attributes, FilterError> {
        let n = self.n;
        let fields = self
            .fields
            .into_iter()
            .map(|(name, (values, present))| {
                let present = (present.len() != u64::from(n)).then_some(present);
                let order = Field::sort_order(&values, present.as_ref());
                Field {
                    name,
                    values,
                    present,
                    order,
                }
            })
            .collect();
        let mut a = Attributes {
            n,
            names: self.names,
            ids: self.ids,
            bitmaps: self.bitmaps,
            fields,
            keys: BTreeMap::new(),
        };
        a.index_keys().map_err(FilterError::Attrs)?;
        Ok(a)
    }
}

/// Checks that `attrs` (if any) describe `n` rows: what a build checks before it writes.
pub fn check_rows(attrs: Option<&Attributes>, n: usize) -> Result<(), FilterError> {
    match attrs {
        Some(a) if a.n() as usize != n => Err(FilterError::Attrs(format!(
            "attributes of {} vectors for data of {n}",
            a.n()
        ))),
        _ => Ok(()),
    }
}

/// Checks a label's text.
pub fn check_label(label: &str) -> Result<(), String> {
    if label.is_empty() {
        return Err("a label is empty".into());
    }
    if label.len() > 1024 {
        return Err(format!("a label of {} bytes (at most 1024)", label.len()));
    }
    if label.contains([',', '\n', '\r']) {
        return Err(format!("label {label:?} holds a ',' or a line break"));
    }
    if let Some((k, _)) = label.split_once('=') {
        check_field_name(k).map_err(|e| format!("label {label:?}: its key {e}"))?;
    }
    Ok(())
}

/// Checks a field name (or label key).
pub fn check_field_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
    if !ok {
        return Err(format!(
            "{name:?} is not a field name ([A-Za-z_][A-Za-z0-9_.:-]*)"
        ));
    }
    let lower = name.to_ascii_lowercase();
    if KEYWORDS.contains(&lower.as_str()) || lower == LABEL_FIELD {
        return Err(format!("{name:?} is a word of the filter language"));
    }
    Ok(())
}

fn check_field(f: &Field, n: u32) -> Result<(), String> {
    if f.values.len() != n as usize {
        return Err(format!(
            "field {:?} holds {} values for {n} rows",
            f.name,
            f.values.len()
        ));
    }
    if let Column::F64(v) = &f.values {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(format!("field {:?}, row {i}: not a finite number", f.name));
        }
    }
    let expected = f.present.as_ref().map_or(u64::from(n), RoaringBitmap::len);
    if f.present
        .as_ref()
        .is_some_and(|p| p.max().is_some_and(|m| m >= n))
    {
        return Err(format!("field {:?} marks a row past the {n} rows", f.name));
    }
    if f.order.len() as u64 != expected {
        return Err(format!(
            "field {:?}: its order holds {} rows, not {expected}",
            f.name,
            f.order.len()
        ));
    }
    let sorted = f.order.windows(2).all(|w| {
        let (a, b) = (f.values.get(w[0] as usize), f.values.get(w[1] as usize));
        cmp_numbers(a, b).then(w[0].cmp(&w[1])) == std::cmp::Ordering::Less
    });
    if !sorted || f.order.iter().any(|&r| r >= n || !f.has(r)) {
        return Err(format!(
            "field {:?}: its order is not the rows sorted by value",
            f.name
        ));
    }
    Ok(())
}
