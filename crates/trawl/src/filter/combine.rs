//! Attributes combined: what a live index needs to carry them through its updates — rows
//! appended (the in-memory delta), a schema shared between the disk rows and the new ones (a
//! filter naming a field only the new vectors have is not an unknown field on the disk rows),
//! and the rows of a merged version gathered from the old rows and the new ones.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;

use crate::filter::attrs::{Attributes, Column, Field};
use crate::filter::FilterError;

/// Per field name: its column type (`true` for floats).
type Types = BTreeMap<String, bool>;

impl Attributes {
    /// Attributes of `n` rows, none with a label or a value.
    pub fn empty(n: u32) -> Self {
        Self {
            n,
            ..Self::default()
        }
    }

    /// Whether every label key and numeric field of `other` is known here.
    pub fn has_schema_of(&self, other: &Attributes) -> bool {
        other.keys.keys().all(|k| self.keys.contains_key(k))
            && other.fields.iter().all(|f| self.field(&f.name).is_some())
    }

    /// Makes the label keys and numeric fields of `other` known here (with no row having
    /// them), so a filter compiled here names what `other` holds: a label key absent here
    /// matches no row, a field absent here has no value in any row.
    pub fn extend_schema(&mut self, other: &Attributes) {
        for k in other.keys.keys() {
            self.keys.entry(k.clone()).or_insert(0);
        }
        for f in &other.fields {
            if self.field(&f.name).is_none() {
                let n = self.n as usize;
                self.fields.push(Field {
                    name: f.name.clone(),
                    values: match f.values {
                        Column::I64(_) => Column::I64(vec![0; n]),
                        Column::F64(_) => Column::F64(vec![0.0; n]),
                    },
                    present: Some(RoaringBitmap::new()),
                    order: Vec::new(),
                });
            }
        }
    }

    /// Checks that `other` uses no name the other way round from here: a numeric field here
    /// that is a label key there, or the reverse.
    pub fn check_compatible(&self, other: &Attributes) -> Result<(), FilterError> {
        let clash = |a: &Attributes, b: &Attributes| {
            a.fields
                .iter()
                .find(|f| b.keys.contains_key(&f.name))
                .map(|f| f.name.clone())
        };
        match clash(self, other).or_else(|| clash(other, self)) {
            Some(name) => Err(FilterError::Attrs(format!(
                "{name:?} is a numeric field on one side and a label key on the other: a name \
                 keeps one meaning in an index"
            ))),
            None => Ok(()),
        }
    }

    /// These rows, rows without attributes up to row `at` (at least [`Attributes::n`]), then
    /// the rows of `other`: the attributes of a delta that took `other`'s vectors at `at`.
    pub fn appended(&self, at: u32, other: &Attributes) -> Result<Attributes, FilterError> {
        self.check_compatible(other)?;
        let at = at.max(self.n);
        let n = at.checked_add(other.n).ok_or_else(|| {
            FilterError::Attrs(format!("more than {} rows of attributes", u32::MAX))
        })?;
        let keep = RoaringBitmap::from_sorted_iter(0..self.n).unwrap_or_default();
        let placed: Vec<(u32, u32)> = (0..other.n).map(|r| (r, at + r)).collect();
        gather(n, Some((self, &keep)), Some((other, &placed)))
    }

    /// The attributes of a merged version of `n` rows: row `r` of `self` where `kept` holds
    /// it (the slots a merge keeps keep their numbers), row `src` of `new` at row `dst` for
    /// each `(src, dst)` of `placed` (the new vectors' slots), no attribute elsewhere.
    /// Labels and fields of `self` that no row keeps stay known (a filter naming them still
    /// compiles).
    pub fn merged(
        &self,
        n: u32,
        kept: &RoaringBitmap,
        new: Option<&Attributes>,
        placed: &[(u32, u32)],
    ) -> Result<Attributes, FilterError> {
        if let Some(o) = new {
            self.check_compatible(o)?;
        }
        gather(n, Some((self, kept)), new.map(|o| (o, placed)))
    }
}

/// Rows gathered from two sources into attributes of `n` rows: `old` keeps its rows in `kept`
/// at their numbers, `new` moves row `src` to `dst`. Every label of either survives (empty
/// when no row keeps it), and the schema-only keys of both.
fn gather(
    n: u32,
    old: Option<(&Attributes, &RoaringBitmap)>,
    new: Option<(&Attributes, &[(u32, u32)])>,
) -> Result<Attributes, FilterError> {
    if let Some(bad) = new.and_then(|(_, p)| p.iter().find(|&&(_, d)| d >= n)) {
        return Err(FilterError::Attrs(format!(
            "row {} is past the {n} rows",
            bad.1
        )));
    }
    let mut out = Attributes::empty(n);
    let label = |out: &mut Attributes, name: &str| -> usize {
        match out.ids.get(name) {
            Some(&id) => id as usize,
            None => {
                out.ids.insert(name.to_string(), out.names.len() as u32);
                out.names.push(name.to_string());
                out.bitmaps.push(RoaringBitmap::new());
                out.names.len() - 1
            }
        }
    };
    let mut types = Types::new();
    if let Some((a, kept)) = old {
        for (name, bits) in a.labels() {
            let id = label(&mut out, name);
            out.bitmaps[id] |= bits & kept;
        }
        for f in &a.fields {
            types.insert(f.name.clone(), matches!(f.values, Column::F64(_)));
        }
    }
    if let Some((a, placed)) = new {
        let to: std::collections::HashMap<u32, u32> = placed.iter().copied().collect();
        for (name, bits) in a.labels() {
            let id = label(&mut out, name);
            let moved: RoaringBitmap = bits.iter().filter_map(|r| to.get(&r).copied()).collect();
            out.bitmaps[id] |= moved;
        }
        for f in &a.fields {
            *types.entry(f.name.clone()).or_default() |= matches!(f.values, Column::F64(_));
        }
    }
    for (name, float) in types {
        out.fields.push(gather_field(n, &name, float, old, new));
    }
    out.index_keys().map_err(FilterError::Attrs)?;
    for a in [old.map(|o| o.0), new.map(|o| o.0)].into_iter().flatten() {
        for k in a.keys.keys() {
            out.keys.entry(k.clone()).or_insert(0);
        }
    }
    Ok(out)
}

/// One numeric field of [`gather`] (floats when either side holds floats).
fn gather_field(
    n: u32,
    name: &str,
    float: bool,
    old: Option<(&Attributes, &RoaringBitmap)>,
    new: Option<(&Attributes, &[(u32, u32)])>,
) -> Field {
    let mut values = if float {
        Column::F64(vec![0.0; n as usize])
    } else {
        Column::I64(vec![0; n as usize])
    };
    let mut present = RoaringBitmap::new();
    let mut put = |row: u32, v: crate::filter::Number| {
        match (&mut values, v) {
            (Column::I64(c), crate::filter::Number::I64(x)) => c[row as usize] = x,
            (Column::F64(c), x) => c[row as usize] = x.as_f64(),
            // Not reached: the column is a float one when either side has floats.
            (Column::I64(c), crate::filter::Number::F64(x)) => c[row as usize] = x as i64,
        }
        present.insert(row);
    };
    if let Some((a, kept)) = old {
        if let Some((fi, f)) = a.field(name) {
            for &row in &f.order {
                if kept.contains(row) && row < n {
                    if let Some(v) = a.number(fi, row) {
                        put(row, v);
                    }
                }
            }
        }
    }
    if let Some((a, placed)) = new {
        if let Some((fi, _)) = a.field(name) {
            for &(src, dst) in placed {
                if src < a.n {
                    if let Some(v) = a.number(fi, src) {
                        put(dst, v);
                    }
                }
            }
        }
    }
    let present = (present.len() != u64::from(n)).then_some(present);
    let order = Field::sort_order(&values, present.as_ref());
    Field {
        name: name.to_string(),
        values,
        present,
        order,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{parse, AttrsBuilder, Number, Predicate};

    fn attrs(n: usize, rows: &[(u32, &[&str], Option<i64>)]) -> Attributes {
        let mut b = AttrsBuilder::new(n).unwrap();
        for (r, labels, v) in rows {
            for l in *labels {
                b.add_label(*r, l).unwrap();
            }
            if let Some(v) = v {
                b.set_number("year", *r, Number::I64(*v)).unwrap();
            }
        }
        b.finish().unwrap()
    }

    fn matching(a: &Attributes, f: &str) -> Vec<u32> {
        let p = Predicate::compile(&parse(f).unwrap(), a).unwrap();
        (0..a.n()).filter(|&r| p.matches(r)).collect()
    }

    #[test]
    fn appended_rows_keep_their_attributes_after_a_gap() {
        let a = attrs(3, &[(0, &["x"], Some(2020)), (2, &["lang=en"], None)]);
        let b = attrs(
            2,
            &[(0, &["x", "lang=fr"], Some(2024)), (1, &[], Some(2019))],
        );
        let c = a.appended(5, &b).unwrap();
        assert_eq!(c.n(), 7);
        assert_eq!(matching(&c, "label = \"x\""), vec![0, 5]);
        assert_eq!(matching(&c, "lang = \"fr\""), vec![5]);
        assert_eq!(matching(&c, "lang != \"fr\""), vec![0, 1, 2, 3, 4, 6]);
        assert_eq!(matching(&c, "year >= 2020"), vec![0, 5]);
        assert_eq!(matching(&c, "year < 2020"), vec![6]);
    }

    #[test]
    fn a_merge_keeps_kept_rows_in_place_and_moves_new_ones() {
        let a = attrs(
            4,
            &[
                (0, &["x"], Some(1)),
                (1, &["y"], Some(2)),
                (3, &["x"], None),
            ],
        );
        let b = attrs(2, &[(0, &["z"], Some(9)), (1, &["x"], None)]);
        // Row 1 deleted: new row 0 takes slot 1, new row 1 slot 4.
        let kept: RoaringBitmap = [0u32, 2, 3].into_iter().collect();
        let m = a.merged(5, &kept, Some(&b), &[(0, 1), (1, 4)]).unwrap();
        assert_eq!(matching(&m, "label = \"x\""), vec![0, 3, 4]);
        assert_eq!(matching(&m, "label = \"z\""), vec![1]);
        // `y` survives as a label no row has: it compiles and matches nothing.
        assert_eq!(matching(&m, "label = \"y\""), Vec::<u32>::new());
        assert_eq!(matching(&m, "year > 1"), vec![1]);
        assert_eq!(matching(&m, "year = 1"), vec![0]);
    }

    #[test]
    fn a_shared_schema_makes_new_names_known_and_clashes_are_refused() {
        let disk = attrs(3, &[(0, &["x"], None)]);
        let new = attrs(1, &[(0, &["lang=en"], Some(2024))]);
        let p = parse("lang = \"en\" OR year > 3").unwrap();
        assert!(Predicate::compile(&p, &disk).is_err());
        let mut d2 = disk.clone();
        assert!(!d2.has_schema_of(&new));
        d2.extend_schema(&new);
        assert!(d2.has_schema_of(&new));
        assert_eq!(
            matching(&d2, "lang = \"en\" OR year > 3"),
            Vec::<u32>::new()
        );
        assert_eq!(matching(&d2, "NOT (lang = \"en\")"), vec![0, 1, 2]);
        let clash = attrs(1, &[(0, &["year=2024"], None)]);
        assert!(new.check_compatible(&clash).is_err());
        assert!(new.appended(1, &clash).is_err());
        // Floats on one side make the merged column floats.
        let mut fb = AttrsBuilder::new(1).unwrap();
        fb.set_number("year", 0, Number::F64(2.5)).unwrap();
        let f = fb.finish().unwrap();
        let m = new.appended(1, &f).unwrap();
        assert_eq!(m.number(0, 0), Some(Number::F64(2024.0)));
        assert_eq!(m.number(0, 1), Some(Number::F64(2.5)));
    }
}
