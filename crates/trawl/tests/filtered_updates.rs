//! Filtered search of a live index: labels and numeric fields travel through inserts,
//! upserts and deletes (the log, replay at open) and merges (packed and decoupled layouts);
//! every plan returns only live vectors that match, with a high recall of the exact filtered
//! neighbours, before and after the merge; bad attributes of an update are refused whole.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use trawl::data::Matrix;
use trawl::filter::{
    parse, Attributes, AttrsBuilder, FilterParams, Filters, Number, Plan, Predicate,
};
use trawl::kinds::graph::search::SearchParams;
use trawl::kinds::graph::updates::live::{Access, LiveIndex};
use trawl::kinds::graph::{build_index, DiskIndex, IndexLayout, OpenOptions};
use trawl::progress::Control;
use trawl::Metric;

const DIM: usize = 16;
const BUILT: usize = 2000;
const ALL: usize = 3000;

/// One vector's attributes in the test's model.
#[derive(Clone, Default)]
struct Row {
    labels: Vec<String>,
    numbers: Vec<(&'static str, Number)>,
}

/// The attributes of vector `i` (version `v`: an upsert gives other ones). The built vectors
/// have `L0..L9`, `lang=en` on a third and `year`; the inserted ones also the label `fresh`,
/// `lang=de` (a value the disk rows lack) and the field `score` (a field they lack).
fn row(i: usize, v: usize) -> Row {
    let mut r = Row::default();
    r.labels.push(format!("L{}", (i + v) % 10));
    if i.is_multiple_of(3) {
        r.labels.push("lang=en".into());
    }
    r.numbers
        .push(("year", Number::I64(1990 + (i % 50) as i64)));
    if i >= BUILT || v > 0 {
        r.labels.push("fresh".into());
        if i.is_multiple_of(4) {
            r.labels.push("lang=de".into());
        }
        r.numbers
            .push(("score", Number::F64((i % 100) as f64 + 0.5)));
    }
    r
}

fn attrs_of(rows: &[Row]) -> Attributes {
    let mut b = AttrsBuilder::new(rows.len()).unwrap();
    for (i, r) in rows.iter().enumerate() {
        for l in &r.labels {
            b.add_label(i as u32, l).unwrap();
        }
        for (f, v) in &r.numbers {
            b.set_number(f, i as u32, *v).unwrap();
        }
    }
    b.finish().unwrap()
}

/// The live vectors: id → (vector, attributes).
type Model = BTreeMap<u64, (Vec<f32>, Row)>;

/// Every id `got` returns is live and matches `filter` in the model; returns the recall of
/// the model's exact filtered top 10 and the number of matches.
fn check(model: &Model, queries: &Matrix<f32>, filter: &str, got: &[u64], what: &str) -> f64 {
    let ids: Vec<u64> = model.keys().copied().collect();
    let rows: Vec<Row> = model.values().map(|v| v.1.clone()).collect();
    let a = attrs_of(&rows);
    let p = Predicate::compile(&parse(filter).unwrap(), &a).unwrap();
    let (mut found, mut wanted) = (0usize, 0usize);
    for q in 0..queries.n() {
        let mut d: Vec<(f32, u64)> = (0..ids.len())
            .filter(|&r| p.matches(r as u32))
            .map(|r| {
                let v = &model[&ids[r]].0;
                (
                    trawl::kernels::distance(Metric::L2, queries.row(q), v),
                    ids[r],
                )
            })
            .collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let row = &got[q * 10..(q + 1) * 10];
        for &id in row.iter().filter(|&&id| id != trawl::kinds::HOLE) {
            let r = ids.binary_search(&id);
            assert!(r.is_ok(), "{what}: {filter}: {id} is not live");
            assert!(
                p.matches(r.unwrap() as u32),
                "{what}: {filter}: {id} does not match"
            );
        }
        let want: Vec<u64> = d.iter().take(10).map(|x| x.1).collect();
        found += want.iter().filter(|x| row.contains(x)).count();
        wanted += want.len();
    }
    if wanted == 0 {
        return 1.0;
    }
    found as f64 / wanted as f64
}

const FILTERS: [&str; 7] = [
    "label = \"L3\"",
    "label = \"fresh\"",
    "score > 50",
    "NOT (label = \"L0\")",
    "lang = \"en\" AND year >= 2000",
    "lang = \"de\" OR label = \"L7\"",
    "label = \"nothing\"",
];

fn search_all(ix: &LiveIndex, model: &Model, queries: &Matrix<f32>, what: &str) {
    let sp = SearchParams::beam(10, 40, 4);
    for f in FILTERS {
        let e = parse(f).unwrap();
        for plan in [
            None,
            Some(Plan::Inline),
            Some(Plan::Scan),
            Some(Plan::Exact),
        ] {
            let fp = FilterParams {
                plan,
                ..FilterParams::default()
            };
            let got = ix
                .search_rows_where(queries.as_slice(), &sp, 2, 1, Filters::All(&e), &fp)
                .unwrap();
            let recall = check(model, queries, f, &got.ids, &format!("{what}, {plan:?}"));
            // Inline alone is held to a floor only where matches are common (see
            // tests/filtered.rs); every other plan reaches 0.9, the exact one everything.
            let floor = match plan {
                Some(Plan::Exact) => 0.999,
                Some(Plan::Inline) => 0.0,
                _ => 0.9,
            };
            assert!(
                recall >= floor,
                "{what}, {f}, {plan:?}: recall {recall:.3} below {floor}"
            );
        }
    }
}

fn run(layout: IndexLayout) {
    let (all, queries) = common::data::<f32>(ALL, 20, DIM, 11);
    let vec_of = |i: usize| all.row(i).to_vec();
    // A vector near vector `i` but equal to none (ties would make the exact order arbitrary).
    let near = |i: usize| -> Vec<f32> { all.row(i).iter().map(|x| x + 0.013).collect() };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base = Matrix::from_vec(all.as_slice()[..BUILT * DIM].to_vec(), DIM).unwrap();
    let built: Vec<Row> = (0..BUILT).map(|i| row(i, 0)).collect();
    let mut params = common::params(Metric::L2, 8);
    params.attrs = Some(Arc::new(attrs_of(&built)));
    build_index(&base, dir, &params, &Control::silent()).unwrap();
    if layout == IndexLayout::Decoupled {
        DiskIndex::open(dir, OpenOptions::default())
            .unwrap()
            .write_layout(layout, &Default::default(), &Control::silent())
            .unwrap();
    }
    let opts = OpenOptions {
        layout,
        ..OpenOptions::default()
    };
    let mut model: Model = (0..BUILT)
        .map(|i| (i as u64, (vec_of(i), built[i].clone())))
        .collect();
    let ix = LiveIndex::open(dir, opts, Access::ReadWrite).unwrap();
    // Inserts with attributes, in two batches.
    for chunk in [(BUILT..2600), (2600..ALL)] {
        let ids: Vec<u64> = chunk.clone().map(|i| i as u64).collect();
        let rows: Vec<Row> = chunk.clone().map(|i| row(i, 0)).collect();
        let data: Vec<f32> = chunk.clone().flat_map(vec_of).collect();
        ix.insert_with(Some(&ids), &data, Some(&attrs_of(&rows)))
            .unwrap();
        for i in chunk {
            model.insert(i as u64, (vec_of(i), row(i, 0)));
        }
    }
    // Deletes on disk and in the delta; upserts that change the attributes (and one that
    // drops them).
    let gone: Vec<u64> = (0..ALL as u64).filter(|i| i % 7 == 0).collect();
    ix.delete(&gone).unwrap();
    for id in &gone {
        model.remove(id);
    }
    let up: Vec<u64> = (1..ALL as u64).filter(|i| i % 11 == 1).collect();
    let up_rows: Vec<Row> = up.iter().map(|&i| row(i as usize, 1)).collect();
    let up_data: Vec<f32> = up
        .iter()
        .flat_map(|&i| near((i as usize + 1) % ALL))
        .collect();
    ix.upsert_with(&up, &up_data, Some(&attrs_of(&up_rows)))
        .unwrap();
    for (k, &id) in up.iter().enumerate() {
        model.insert(id, (near((id as usize + 1) % ALL), up_rows[k].clone()));
    }
    ix.upsert(&[2], &near(5)).unwrap();
    model.insert(2, (near(5), Row::default()));
    search_all(&ix, &model, &queries, "unmerged");

    // Bad attributes change nothing.
    let before = ix.delta_len();
    let clash = attrs_of(&[Row {
        labels: vec!["year=2020".into()],
        numbers: vec![],
    }]);
    let e = ix
        .insert_with(Some(&[90_000]), &vec_of(0), Some(&clash))
        .unwrap_err();
    assert!(e.to_string().contains("year"), "{e}");
    let two = attrs_of(&[row(0, 0), row(1, 0)]);
    let e = ix
        .insert_with(Some(&[90_000]), &vec_of(0), Some(&two))
        .unwrap_err();
    assert!(e.to_string().contains("attributes of 2 vectors"), "{e}");
    assert_eq!(ix.delta_len(), before);
    drop(ix);

    // The log replayed at open gives the same answers.
    let ro = LiveIndex::open(dir, opts, Access::ReadOnly).unwrap();
    search_all(&ro, &model, &queries, "replayed");
    drop(ro);

    // Merged: the attributes of the new version's slots, in attrs.trawl.
    let ix = LiveIndex::open(dir, opts, Access::ReadWrite).unwrap();
    ix.merge(2, &Control::silent()).unwrap();
    assert_eq!(ix.delta_len(), 0);
    search_all(&ix, &model, &queries, "merged");
    // Updates after the merge, and a second merge.
    let more: Vec<u64> = (0..50).map(|i| 50_000 + i).collect();
    let more_rows: Vec<Row> = (0..50).map(|i| row(BUILT + i, 2)).collect();
    let more_data: Vec<f32> = (0..50).flat_map(|i| near(i * 13 % ALL + 1)).collect();
    ix.insert_with(Some(&more), &more_data, Some(&attrs_of(&more_rows)))
        .unwrap();
    for (i, &id) in more.iter().enumerate() {
        model.insert(id, (near(i * 13 % ALL + 1), more_rows[i].clone()));
    }
    ix.delete(&[1, 3]).unwrap();
    model.remove(&1);
    model.remove(&3);
    search_all(&ix, &model, &queries, "merged + new updates");
    ix.merge(2, &Control::silent()).unwrap();
    drop(ix);
    let ro = LiveIndex::open(dir, opts, Access::ReadOnly).unwrap();
    search_all(&ro, &model, &queries, "merged twice, reopened");
    let r = trawl::kinds::graph::verify_index(dir, &Control::silent()).unwrap();
    assert!(r.files.iter().any(|f| f.name == "attrs.trawl"), "{r:?}");
}

#[test]
fn attributes_travel_through_updates_and_merges_packed() {
    run(IndexLayout::Packed);
}

#[test]
fn attributes_travel_through_updates_and_merges_decoupled() {
    run(IndexLayout::Decoupled);
}

#[test]
fn an_index_without_attributes_takes_vectors_with_them() {
    let (all, queries) = common::data::<f32>(1200, 10, DIM, 12);
    let tmp = tempfile::tempdir().unwrap();
    let base = Matrix::from_vec(all.as_slice()[..1000 * DIM].to_vec(), DIM).unwrap();
    common::build(&base, tmp.path(), Metric::L2, 8);
    let ix = LiveIndex::open(tmp.path(), OpenOptions::default(), Access::ReadWrite).unwrap();
    let sp = SearchParams::beam(10, 40, 4);
    let e = parse("label = \"fresh\"").unwrap();
    let no = ix
        .search_rows_where(
            queries.as_slice(),
            &sp,
            1,
            1,
            Filters::All(&e),
            &FilterParams::default(),
        )
        .unwrap_err();
    assert!(no.to_string().contains("attributes"), "{no}");
    let mut model: Model = (0..1000)
        .map(|i| (i as u64, (all.row(i).to_vec(), Row::default())))
        .collect();
    let ids: Vec<u64> = (1000..1200).collect();
    let rows: Vec<Row> = (1000..1200).map(|i| row(i + BUILT, 0)).collect();
    ix.insert_with(
        Some(&ids),
        &all.as_slice()[1000 * DIM..],
        Some(&attrs_of(&rows)),
    )
    .unwrap();
    for i in 1000..1200 {
        model.insert(i as u64, (all.row(i).to_vec(), row(i + BUILT, 0)));
    }
    search_all(&ix, &model, &queries, "no disk attributes");
    ix.merge(1, &Control::silent()).unwrap();
    search_all(&ix, &model, &queries, "no disk attributes, merged");
}
