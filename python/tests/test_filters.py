"""Filtered search: build(labels=, attrs=), search / batch_search(filter=, filter_plan=),
filtered_ground_truth, and their errors."""

import json
import shutil

import numpy as np
import pytest

import trawl
from conftest import FAST

N, DIM, NQ, K = 3000, 16, 30, 10
PLANS = ["auto", "inline", "scan", "exact"]


def make_inputs(seed=7):
    """Vectors, queries, and their attributes: plain labels a (50 %), b (30 %), c (10 %),
    d (2 %) and rare (5 vectors), the keyed labels lang=en / lang=fr in the same lists; an
    int column (year), a float column with missing values (price, masked; NaN under the
    mask), a column of strings (color, None = no value) and one of lists (tags)."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((N, DIM)).astype(np.float32)
    queries = rng.standard_normal((NQ, DIM)).astype(np.float32)
    has = {name: rng.random(N) < p for name, p in [("a", 0.5), ("b", 0.3), ("c", 0.1), ("d", 0.02)]}
    has["rare"] = np.zeros(N, dtype=bool)
    has["rare"][[3, 500, 1200, 2000, 2999]] = True
    lang = rng.choice(["en", "fr", ""], size=N, p=[0.4, 0.4, 0.2])
    labels = []
    for i in range(N):
        row = [name for name in ("a", "b", "c", "d", "rare") if has[name][i]]
        if lang[i]:
            row.append(f"lang={lang[i]}")
        labels.append(row)
    year = rng.integers(1990, 2025, size=N).astype(np.int64)
    price_values = rng.random(N)
    price_missing = rng.random(N) < 0.1
    price_values[price_missing] = np.nan  # hidden by the mask: accepted
    price = np.ma.masked_array(price_values, mask=price_missing)
    color_pick = rng.choice(["red", "green", "blue", "none"], size=N, p=[0.2, 0.3, 0.3, 0.2])
    color = [None if c == "none" else str(c) for c in color_pick]
    tag_x, tag_y = rng.random(N) < 0.4, rng.random(N) < 0.4
    tags = [[t for t, on in (("x", tag_x[i]), ("y", tag_y[i])) if on] for i in range(N)]
    attrs = {"year": year, "price": price, "color": color, "tags": tags}
    masks = {
        "has": has,
        "lang_en": lang == "en",
        "year": year,
        "price": price_values,
        "price_ok": ~price_missing,
        "color": np.array([c or "" for c in color]),
        "tag_x": tag_x,
        "tag_y": tag_y,
    }
    return data, queries, labels, attrs, masks


def cases(m):
    """(name, text form, JSON form, numpy mask of the vectors that match)."""
    h = m["has"]
    price_lt = m["price_ok"] & (np.nan_to_num(m["price"], nan=1.0) < 0.2)
    return [
        ("one label", 'label = "a"', {"label": "a"}, h["a"]),
        ("two labels AND", 'label = "a" AND label = "b"',
         {"$and": [{"label": "a"}, {"label": "b"}]}, h["a"] & h["b"]),
        ("OR", "label = 'c' OR label = 'd'", {"$or": [{"label": "c"}, {"label": "d"}]},
         h["c"] | h["d"]),
        ("int range", "year BETWEEN 2000 AND 2005", {"year": {"$gte": 2000, "$lte": 2005}},
         (m["year"] >= 2000) & (m["year"] <= 2005)),
        ("float range", "price < 0.2", {"price": {"$lt": 0.2}}, price_lt),
        ("NOT float (missing values match)", "NOT price < 0.2", {"$not": {"price": {"$lt": 0.2}}},
         ~price_lt),
        ("keyed label (labels list)", 'lang = "en"', {"lang": "en"}, m["lang_en"]),
        ("keyed label (attrs column)", 'color IN ("red", "blue")',
         {"color": {"$in": ["red", "blue"]}}, np.isin(m["color"], ["red", "blue"])),
        ("HAS ALL (list of lists)", 'tags HAS ALL ("x", "y")', {"tags": {"$all": ["x", "y"]}},
         m["tag_x"] & m["tag_y"]),
        ("NOT label", 'NOT label = "a"', {"$not": {"label": "a"}}, ~h["a"]),
        ("mixed", 'label = "b" AND year >= 2010 AND NOT color = "green"',
         {"label": "b", "year": {"$gte": 2010}, "color": {"$ne": "green"}},
         h["b"] & (m["year"] >= 2010) & (m["color"] != "green")),
        ("fewer than k", 'label = "rare"', {"label": "rare"}, h["rare"]),
    ]


def numpy_truth(data, queries, mask, k):
    d = data.astype(np.float64)
    q = queries.astype(np.float64)
    dist = (q * q).sum(1)[:, None] - 2 * q @ d.T + (d * d).sum(1)[None, :]
    dist[:, ~mask] = np.inf
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    ids = order.astype(np.uint64)
    ids[np.take_along_axis(dist, order, axis=1) == np.inf] = trawl.MISSING_ID
    return ids


def filtered_recall(found, truth):
    """Recall of the ground truth's present ids (a query with no match counts 1)."""
    out = []
    for f, t in zip(found, truth):
        t = set(t[t != trawl.MISSING_ID].tolist())
        out.append(len(set(f.tolist()) & t) / len(t) if t else 1.0)
    return float(np.mean(out))


@pytest.fixture(scope="module")
def filtered(tmp_path_factory):
    data, queries, labels, attrs, masks = make_inputs()
    d = tmp_path_factory.mktemp("filtered") / "index"
    report = trawl.build(data, d, trawl.BuildParams(threads=2, **FAST), labels=labels,
                         attrs=attrs)
    index = trawl.Index.open(d)
    truth = {}
    for name, text, _, _ in cases(masks):
        truth[name] = trawl.filtered_ground_truth(data, queries, K, "l2", labels=labels,
                                                  attrs=attrs, filter=text)
    yield index, data, queries, labels, attrs, masks, truth, report
    index.close()


CASE_NAMES = [c[0] for c in cases(make_inputs()[4])]


def case(masks, name):
    return next(c for c in cases(masks) if c[0] == name)


# --- ground truth ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", CASE_NAMES)
def test_ground_truth_is_numpy_brute_force(filtered, name):
    _, data, queries, labels, attrs, masks, truth, _ = filtered
    _, text, as_dict, mask = case(masks, name)
    ids, dists = truth[name]
    assert ids.shape == (NQ, K) and ids.dtype == np.uint64 and dists.dtype == np.float32
    np.testing.assert_array_equal(ids, numpy_truth(data, queries, mask, K))
    # The JSON form gives the same truth.
    ids2, dists2 = trawl.filtered_ground_truth(data, queries, K, "l2", labels=labels,
                                               attrs=attrs, filter=as_dict)
    np.testing.assert_array_equal(ids2, ids)
    np.testing.assert_array_equal(dists2, dists)
    present = ids != trawl.MISSING_ID
    exact = ((data[ids[present].astype(np.int64)] - np.repeat(queries, present.sum(1), 0)) ** 2).sum(-1)
    np.testing.assert_allclose(dists[present], exact, rtol=1e-4, atol=1e-4)
    assert np.all(np.isinf(dists[~present]))


def test_ground_truth_takes_every_attribute_form(filtered, tmp_path):
    """CSR labels, a label file and a JSON-lines attribute file read as the lists do."""
    _, data, queries, labels, attrs, masks, truth, _ = filtered
    offsets = np.cumsum([0] + [len(r) for r in labels]).astype(np.int64)
    values = [v for r in labels for v in r]
    text = case(masks, "two labels AND")[1]
    csr = trawl.filtered_ground_truth(data, queries, K, labels=(offsets, np.array(values)),
                                      filter=text)
    np.testing.assert_array_equal(csr[0], truth["two labels AND"][0])
    (tmp_path / "labels.txt").write_text("".join(",".join(r) + "\n" for r in labels))
    with open(tmp_path / "attrs.jsonl", "w") as f:
        for i in range(N):
            row = {"year": int(attrs["year"][i]), "color": attrs["color"][i],
                   "tags": attrs["tags"][i]}
            if not attrs["price"].mask[i]:
                row["price"] = float(attrs["price"][i])
            f.write(json.dumps(row) + "\n")
    for name in ["mixed", "NOT float (missing values match)", "keyed label (labels list)",
                 "HAS ALL (list of lists)"]:
        got = trawl.filtered_ground_truth(data, queries, K, labels=str(tmp_path / "labels.txt"),
                                          attrs=tmp_path / "attrs.jsonl",
                                          filter=case(masks, name)[1])
        np.testing.assert_array_equal(got[0], truth[name][0])


def test_ground_truth_per_query_filters(filtered):
    _, data, queries, labels, attrs, masks, truth, _ = filtered
    names = [CASE_NAMES[i % len(CASE_NAMES)] for i in range(NQ)]
    per_query = [case(masks, n)[1] for n in names]
    per_query[1] = None
    ids, _ = trawl.filtered_ground_truth(data, queries, K, labels=labels, attrs=attrs,
                                         filter=per_query)
    for i, n in enumerate(names):
        if i == 1:
            mask = np.ones(N, dtype=bool)
            np.testing.assert_array_equal(ids[i], numpy_truth(data, queries[i:i + 1], mask, K)[0])
        else:
            np.testing.assert_array_equal(ids[i], truth[n][0][i])


# --- search ---------------------------------------------------------------------------------

@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("form", ["text", "dict"])
@pytest.mark.parametrize("name", CASE_NAMES)
def test_filtered_batch_search(filtered, name, form, plan):
    index, data, queries, _, _, masks, truth, _ = filtered
    _, text, as_dict, mask = case(masks, name)
    f = text if form == "text" else as_dict
    ids, dists = index.batch_search(queries, k=K, filter=f, filter_plan=plan, threads=2)
    assert ids.shape == (NQ, K)
    present = ids != trawl.MISSING_ID
    # Every returned id matches the filter, once per query, and its distance is exact.
    assert mask[ids[present].astype(np.int64)].all()
    for row in ids:
        row = row[row != trawl.MISSING_ID]
        assert len(set(row.tolist())) == len(row)
    exact = ((data[ids[present].astype(np.int64)] - np.repeat(queries, present.sum(1), 0)) ** 2).sum(-1)
    np.testing.assert_allclose(dists[present], exact, rtol=1e-4, atol=1e-3)
    assert np.all(np.isinf(dists[~present]))

    t_ids, t_dists = truth[name]
    r = filtered_recall(ids, t_ids)
    if plan == "exact":
        assert r == 1.0
        np.testing.assert_array_equal(ids, t_ids)
        np.testing.assert_allclose(dists, t_dists, rtol=1e-5, atol=1e-5)
    elif plan in ("auto", "scan"):
        assert r >= 0.9, f"{name} {plan}: recall {r}"

    st = index.last_stats
    for key in ["plan_inline", "plan_scan", "plan_exact", "matches", "matches_exact",
                "filter_list", "rejected"]:
        assert st[key].shape == (NQ,), key
    assert (st["plan_inline"] + st["plan_scan"] + st["plan_exact"] == 1).all()
    if plan != "auto":
        assert (st[f"plan_{plan}"] == 1).all()
    exact_count = st["matches_exact"] == 1
    assert (st["matches"][exact_count] == mask.sum()).all()
    if plan == "exact":
        assert exact_count.all()


def test_single_search_with_a_filter_equals_the_batch_row(filtered):
    index, _, queries, _, _, masks, _, _ = filtered
    for name in ["two labels AND", "float range", "fewer than k"]:
        _, text, as_dict, mask = case(masks, name)
        ids, dists = index.batch_search(queries[:5], k=K, filter=text, threads=1)
        for i in range(5):
            one_ids, one_dists = index.search(queries[i], k=K, filter=as_dict)
            np.testing.assert_array_equal(one_ids, ids[i])
            np.testing.assert_array_equal(one_dists, dists[i])
        assert index.last_stats["matches"].shape == (1,)
        assert index.last_stats["matches"][0] == mask.sum()


def test_no_filter_is_the_plain_search(filtered):
    index, _, queries, _, _, _, _, _ = filtered
    plain = index.batch_search(queries, k=K, threads=1)
    for none in (None, [None] * NQ):
        got = index.batch_search(queries, k=K, threads=1, filter=none)
        np.testing.assert_array_equal(got[0], plain[0])
    assert (index.last_stats["plan_inline"] == 0).all()
    assert (index.last_stats["matches"] == 0).all()


def test_batch_search_per_query_filters(filtered):
    index, data, queries, _, _, masks, truth, _ = filtered
    names = [CASE_NAMES[i % len(CASE_NAMES)] for i in range(NQ)]
    per_query = [case(masks, n)[1] if i % 2 else case(masks, n)[2] for i, n in enumerate(names)]
    per_query[4] = None
    ids, _ = index.batch_search(queries, k=K, filter=per_query, filter_plan="exact", threads=2)
    plain, _ = index.batch_search(queries[4:5], k=K)
    for i, n in enumerate(names):
        if i == 4:
            np.testing.assert_array_equal(ids[i], plain[0])
            continue
        np.testing.assert_array_equal(ids[i], truth[n][0][i])
    # A tuple is a list too.
    ids2, _ = index.batch_search(queries, k=K, filter=tuple(per_query), filter_plan="exact")
    np.testing.assert_array_equal(ids2, ids)


def test_build_report_and_stats(filtered):
    index, report = filtered[0], filtered[-1]
    assert report["kind"] == "graph"
    assert "plan_exact" in index.stats and "matches" in index.stats
    # The attributes' memory is part of the index's memory report.
    mem = index.info()["memory_bytes"]
    assert mem["attrs_bytes"] > 0


def test_label_aware_build_switch(tmp_path):
    """BuildParams(label_aware=): "on" writes the labels' start nodes (d at 2 % and rare are
    tracked), "off" does not, both answer a rare-label filter with matching ids only; a bad
    value is refused before anything is written."""
    data, queries, labels, _, masks = make_inputs()
    assert trawl.BuildParams().label_aware == "auto"
    truth = numpy_truth(data, queries, masks["has"]["d"], K)
    for mode in ("on", "off"):
        p = trawl.BuildParams(threads=2, label_aware=mode, **FAST)
        assert f'label_aware="{mode}"' in repr(p)
        d = tmp_path / mode
        rep = trawl.build(data, d, p, labels=labels)
        assert (d / "label-starts.trawl").is_file() == (mode == "on")
        assert rep["label_starts"] == (2 if mode == "on" else 0)
        with trawl.Index.open(d) as index:
            ids, _ = index.batch_search(queries, k=K, filter='label = "d"',
                                        params=trawl.SearchParams(L=64), threads=2)
        assert all(masks["has"]["d"][i] for i in ids.ravel() if i != trawl.MISSING_ID)
        assert filtered_recall(ids, truth) >= 0.9
    with pytest.raises(trawl.InvalidInputError, match="label_aware"):
        trawl.build(data, tmp_path / "bad", trawl.BuildParams(label_aware="maybe", **FAST),
                    labels=labels)
    assert not (tmp_path / "bad" / "manifest.trawl").exists()


def test_updates_carry_attributes_through_the_log_and_a_merge(filtered, tmp_path):
    """Inserts and upserts with labels / attrs, deletes: filtered searches return only live
    vectors that match, before and after a merge and a reopen; a name used the other way
    round is refused, nothing changed."""
    index, data, queries = filtered[0], filtered[1], filtered[2]
    d = tmp_path / "copy"
    shutil.copytree(index.info()["dir"], d, ignore=shutil.ignore_patterns(".trawl.lock"))
    rng = np.random.default_rng(3)
    new = rng.standard_normal((300, DIM)).astype(np.float32)
    with trawl.Index.open(d, writable=True) as ix:
        ids = ix.insert(new, labels=[["fresh", "lang=de"]] * 300,
                        attrs={"year": np.full(300, 2030, dtype=np.int64)})
        assert ids.tolist() == list(range(N, N + 300))
        ix.delete(ids[:100])
        ix.upsert(np.arange(10), new[:10], labels=[["fresh"]] * 10)
        with pytest.raises(trawl.InvalidInputError, match="year"):
            ix.insert(new[:1], labels=[["year=1"]])
        fresh = set(range(N + 100, N + 300)) | set(range(10))
        de = set(range(N + 100, N + 300))
        for stage in ("unmerged", "merged"):
            for text, allowed in [('label = "fresh"', fresh),
                                  ('lang = "de" AND year >= 2030', de)]:
                for plan in PLANS:
                    got, _ = ix.batch_search(queries, K, filter=text, filter_plan=plan)
                    assert got.shape == (NQ, K)
                    assert set(got.ravel().tolist()) <= allowed, (stage, text, plan)
                    # Every query finds k of them: the exact plan the exact ones.
                    if plan == "exact":
                        assert (got != trawl.MISSING_ID).all()
            got, _ = ix.batch_search(queries, K, filter="year < 2030")
            assert not (set(got.ravel().tolist()) & (fresh | set(range(N, N + 100))))
            if stage == "unmerged":
                ix.merge()
    with trawl.Index.open(d) as ro:
        got, _ = ro.batch_search(queries, K, filter='label = "fresh"', filter_plan="exact")
        assert set(got.ravel().tolist()) <= fresh


# --- errors ---------------------------------------------------------------------------------

def test_bad_filters_are_refused(filtered):
    index, _, queries, _, _, _, _, _ = filtered
    with pytest.raises(trawl.InvalidInputError, match="column") as e:
        index.batch_search(queries, k=K, filter="year >= ")
    assert isinstance(e.value, ValueError) and "^" in str(e.value)
    with pytest.raises(trawl.InvalidInputError, match="column"):
        index.search(queries[0], k=K, filter='label = "a" AND (year > 3')
    with pytest.raises(trawl.InvalidInputError, match="nosuch"):
        index.batch_search(queries, k=K, filter="nosuch = 3")
    with pytest.raises(trawl.InvalidInputError, match="nosuch"):
        index.search(queries[0], k=K, filter={"nosuch": {"$gt": 1}})
    with pytest.raises(trawl.InvalidInputError, match=r"filter\[2\]"):
        index.batch_search(queries[:3], k=K, filter=["label = 'a'", None, "year >"])
    with pytest.raises(trawl.InvalidInputError, match=r"\$gte"):
        index.search(queries[0], k=K, filter={"year": {"$gte": [1, 2]}})
    with pytest.raises(trawl.InvalidInputError, match="4 filters for 5 queries"):
        index.batch_search(queries[:5], k=K, filter=['label = "a"'] * 4)
    with pytest.raises(trawl.InvalidInputError, match="batch_search"):
        index.search(queries[0], k=K, filter=['label = "a"'])
    with pytest.raises(trawl.InvalidInputError, match="must be a string"):
        index.search(queries[0], k=K, filter=42)
    with pytest.raises(trawl.InvalidInputError, match="filter_plan"):
        index.search(queries[0], k=K, filter='label = "a"', filter_plan="fast")
    # A label compared by order.
    with pytest.raises(trawl.InvalidInputError, match="color"):
        index.search(queries[0], k=K, filter='color > "a"')


def test_filter_on_an_index_without_attributes(f32_index):
    d, _, queries, _ = f32_index
    index = trawl.Index.open(d)
    with pytest.raises(trawl.InvalidInputError, match="no labels or attributes"):
        index.search(queries[0], k=10, filter='label = "a"')
    with pytest.raises(trawl.InvalidInputError, match="no labels or attributes"):
        index.batch_search(queries, k=10, filter=[None] * (len(queries) - 1) + ['label = "a"'])
    # No filter is fine, and a plan alone changes nothing.
    index.batch_search(queries, k=10, filter=[None] * len(queries), filter_plan="exact")


def test_bad_attributes_are_refused(tmp_path):
    data, _, labels, attrs, _ = make_inputs()
    params = trawl.BuildParams(threads=1, **FAST)
    d = tmp_path / "ix"

    def refused(match, **kw):
        with pytest.raises(trawl.InvalidInputError, match=match):
            trawl.build(data, d, params, **kw)
        assert not (d / "manifest.json").exists()

    refused("labels has 2999 entries but data has 3000 vectors", labels=labels[:-1])
    refused(r"attrs\[\"year\"\] has 2999 entries but data has 3000 vectors",
            attrs={"year": attrs["year"][:-1]})
    refused(r"labels\[2\] must be a list of strings", labels=labels[:2] + ["a"] + labels[3:])
    refused(r"labels\[0\]: a label is a string, not int", labels=[[1]] + labels[1:])
    refused(r"labels\[0\].*','", labels=[["a,b"]] + labels[1:])
    price = np.array(attrs["price"].filled(0.5))
    price[17] = np.nan
    refused(r"attrs\[\"price\"\]: row 17 is NaN", attrs={"price": price})
    price[17] = np.inf
    refused(r"attrs\[\"price\"\]: row 17 is inf", attrs={"price": price})
    refused(r"attrs\[\"p\"\]: row 3 is NaN",
            attrs={"p": [0.5, 0.5, 0.5, float("nan")] + [0.5] * (N - 4)})
    refused("1-D", attrs={"year": np.zeros((N, 2), dtype=np.int64)})
    refused("word of the filter language", attrs={"and": attrs["year"]})
    refused("must be a dict", attrs=[attrs["year"]])
    refused("offsets has 3000 entries", labels=(np.arange(N), ["a"] * (N - 1)))
    refused("both a numeric field and a label key",
            labels=[["year=1"]] + labels[1:], attrs={"year": attrs["year"]})


@pytest.mark.parametrize("kind", ["ivf", "flat"])
def test_ivf_and_flat_indexes_filter(tmp_path, kind):
    data, queries, labels, attrs, masks = make_inputs()
    d = tmp_path / kind
    trawl.build(data, d, trawl.BuildParams(kind=kind, threads=2, progress=False),
                labels=labels, attrs=attrs)
    with trawl.Index.open(d) as index:
        for name, text, _, mask in cases(masks):
            truth = numpy_truth(data, queries, mask, K)
            ids, _ = index.batch_search(queries, k=K, filter=text)
            found = ids[ids != trawl.MISSING_ID].astype(np.int64)
            assert mask[found].all(), name
            r = filtered_recall(ids, truth)
            assert r >= (1.0 if kind == "flat" else 0.9), f"{kind}, {name}: {r:.3f}"


def test_sharded_index_filters(tmp_path):
    data, queries, labels, attrs, masks = make_inputs()
    trawl.build_sharded(data, tmp_path / "s", 2, trawl.BuildParams(threads=2, **FAST),
                        labels=labels, attrs=attrs)
    with trawl.ShardedIndex(tmp_path / "s") as index:
        for name, text, _, mask in cases(masks):
            ids, _ = index.batch_search(queries, k=K, filter=text, probe=1)
            found = ids[ids != trawl.MISSING_ID].astype(np.int64)
            assert mask[found].all(), name
            r = filtered_recall(ids, numpy_truth(data, queries, mask, K))
            assert r >= 0.9, f"{name}: {r:.3f}"
        ids, _ = index.batch_search(queries, k=10, filter=None)
        assert ids.shape == (NQ, 10)
