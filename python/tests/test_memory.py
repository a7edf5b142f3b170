"""The memory budget and the cold start from Python: Index.open(memory_budget=..., warm=...),
the plan in info(), warm_progress, and the errors of a budget too small and of inserts past
the update delta's share."""

import time

import numpy as np
import pytest

import trawl
from conftest import FAST, gaussian


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    data = gaussian(6000, 32, seed=11)
    d = tmp_path_factory.mktemp("mem") / "index"
    trawl.build(data, d, trawl.BuildParams(threads=1, **FAST))
    return d


def test_a_budget_is_planned_and_reported(index_dir):
    q = gaussian(20, 32, seed=12)
    with trawl.Index.open(index_dir, memory_budget="16M") as ix:
        plan = ix.info()["cache"]["memory_plan"]
        assert plan["budget"] == 16 << 20
        assert plan["cache_nodes"] == 6000  # 16 MiB holds every node
        names = [i["name"] for i in plan["items"]]
        assert names[:3] == ["pq_codebooks", "layout", "pq_codes"]
        assert sum(i["bytes"] for i in plan["items"]) <= plan["budget"]
        ids, _ = ix.batch_search(q, k=10, params=trawl.SearchParams(L=40))
        assert ids.shape == (20, 10)
        assert ix.warm_progress["done"]
    with trawl.Index.open(index_dir, memory_budget=plan["minimum"]) as ix:
        assert ix.info()["cache"]["memory_plan"]["cache_nodes"] == 0
    with pytest.raises(trawl.InvalidInputError, match="below this index's minimum"):
        trawl.Index.open(index_dir, memory_budget=plan["minimum"] - 1)
    with pytest.raises(trawl.InvalidInputError, match="memory_budget"):
        trawl.Index.open(index_dir, memory_budget="a lot")
    with pytest.raises(trawl.InvalidInputError, match="leave cache_nodes"):
        trawl.Index.open(index_dir, memory_budget="16M", cache_nodes=10)


def test_the_planner_picks_the_layout(index_dir):
    q = gaussian(20, 32, seed=14)
    with trawl.Index.open(index_dir, memory_budget="16M", layout="auto") as ix:
        plan = ix.info()["cache"]["memory_plan"]
        # The index has the packed layout only: it is the pick, and the plan says so.
        assert plan["layout_picked"] and plan["layout"] == "packed"
        assert any("picked" in n for n in plan["notes"])
        ids, _ = ix.batch_search(q, k=10, params=trawl.SearchParams(L=40))
        assert ids.shape == (20, 10)
    with pytest.raises(trawl.InvalidInputError, match="memory budget"):
        trawl.Index.open(index_dir, layout="auto")


def test_a_background_warm_serves_while_it_fills(index_dir):
    q = gaussian(50, 32, seed=13)
    with trawl.Index.open(index_dir, cache_nodes=3000) as ix:
        want, _ = ix.batch_search(q, k=10, params=trawl.SearchParams(L=40))
    with trawl.Index.open(index_dir, cache_nodes=3000, warm="background") as ix:
        got, _ = ix.batch_search(q, k=10, params=trawl.SearchParams(L=40))
        np.testing.assert_array_equal(got, want)  # a cache never changes results
        deadline = time.time() + 30
        while not ix.warm_progress["done"] and time.time() < deadline:
            time.sleep(0.01)
        p = ix.warm_progress
        assert (p["filled"], p["total"], p["error"]) == (3000, 3000, None)
    with pytest.raises(trawl.InvalidInputError, match="warm"):
        trawl.Index.open(index_dir, warm="soon")


def test_inserts_past_the_delta_budget_are_refused_until_a_merge(tmp_path):
    data = gaussian(3000, 16, seed=21)
    d = tmp_path / "index"
    trawl.build(data, d, trawl.BuildParams(threads=1, **FAST))
    with pytest.raises(trawl.InvalidInputError, match="minimum"):
        trawl.Index.open(d, writable=True, memory_budget=1)
    extra = gaussian(5000, 16, seed=22)
    with trawl.Index.open(d, writable=True, memory_budget="2M") as ix:
        done = 0
        with pytest.raises(trawl.InvalidInputError, match="merge"):
            for i in range(0, len(extra), 100):
                ix.insert(extra[i:i + 100])
                done += 100
        assert done > 0 and ix.delta_len == done
        ix.merge()
        ix.insert(extra[:100])  # room again after the merge
        assert ix.delta_len == 100
