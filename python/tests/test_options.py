"""One options layer: the same inputs given as the CLI's flags (`trawl resolve`, which prints
what the library resolves them to) and as Python's keyword arguments (`Index.open(...)`,
`SearchParams(...)`, `Index._resolved`) resolve to identical open options and search
parameters, for the graph, IVF and sharded kinds — defaults included."""

import subprocess

import pytest

import trawl
from conftest import FAST, gaussian, trawl_cli


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """A graph index (with a decoupled layout), an IVF index and a sharded index over one
    small dataset."""
    data = gaussian(2000, 16, seed=3)
    root = tmp_path_factory.mktemp("options")
    params = trawl.BuildParams(threads=1, decoupled=True, **FAST)
    trawl.build(data, root / "graph", params)
    trawl.build(data, root / "ivf", trawl.BuildParams(kind="ivf", threads=1, pq_bytes=8,
                                                      progress=False))
    trawl.build_sharded(data, root / "sharded", 2, trawl.BuildParams(threads=1, **FAST))
    return {"graph": root / "graph", "ivf": root / "ivf", "sharded": root / "sharded"}


# (kind, CLI flags, Index.open keyword arguments, SearchParams keyword arguments, k)
TABLE = [
    ("graph", [], {}, {}, 10),
    ("graph", ["-L", "40", "-W", "8"], {}, dict(L=40, beam_width=8), 10),
    ("graph", ["-k", "5", "-L", "5"], {}, dict(L=5), 5),
    ("graph", ["--strategy", "pipe", "--pipe-width", "static", "--pipe-max-width", "16",
               "--pipe-start-width", "2", "--entry-list", "10"], {},
     dict(strategy="pipe", pipe_width="static", pipe_max_width=16, pipe_start_width=2,
          entry_list=10), 10),
    ("graph", ["--dynamic-width", "3:4,8,16", "--page-search", "-W", "16"], {},
     dict(dynamic_width="3:4,8,16", page_search=True, beam_width=16), 10),
    ("graph", ["--strategy", "flash", "--staleness", "2", "--grain", "kernel",
               "--strict-steps", "3"], {},
     dict(strategy="flash", staleness=2, grain="kernel", strict_steps=3), 10),
    ("graph", ["--strategy", "flash", "--flash-batch", "8"], {},
     dict(strategy="flash", batch=8), 10),
    ("graph", ["--layout", "decoupled", "--rerank-batch", "5", "--rerank-threshold", "0.5",
               "--no-prefetch", "--prefetch-window", "3", "--no-converge-prefetch",
               "--rerank-lookahead", "2", "--rerank-depth", "4", "--list-cache-mb", "2"],
     dict(layout="decoupled", list_cache_mb=2.0),
     dict(rerank_batch=5, rerank_threshold=0.5, prefetch=False, prefetch_window=3,
          converge_prefetch=False, rerank_lookahead=2, rerank_depth=4), 10),
    ("graph", ["--layout", "decoupled", "--rerank-bound", "1.5"], dict(layout="decoupled"),
     dict(rerank_bound=1.5), 10),
    ("graph", ["--layout", "decoupled", "--rerank-skip-eps", "3"], dict(layout="decoupled"),
     dict(rerank_skip_eps=3.0), 10),
    ("graph", ["--engine", "pread", "--buffered", "--no-verify"],
     dict(engine="pread", direct=False, verify_pages=False), {}, 10),
    ("ivf", [], {}, {}, 10),
    ("ivf", ["-L", "20", "--rerank-n", "50", "--ivf-batch", "4", "--ivf-epsilon", "0.1",
             "--ivf-beta", "3"], {},
     dict(L=20, rerank_n=50, ivf_batch=4, ivf_epsilon=0.1, ivf_beta=3), 10),
    ("ivf", ["--no-heuristic", "--no-page-merge", "--no-page-buffer", "--no-page-mates",
             "--centroid-list", "48", "--accel-batch", "3"], {},
     dict(heuristic=False, page_merge=False, page_buffer=False, page_mates=False,
          centroid_list=48, accel_batch=3), 10),
    ("ivf", ["--ivf-vectors", "bucket", "-k", "3", "-L", "8"], dict(ivf_vectors="bucket"),
     dict(L=8), 3),
    ("sharded", [], {}, {}, 10),
    ("sharded", ["--probe", "1", "-L", "30", "--strategy", "pipe"], {},
     dict(probe=1, L=30, strategy="pipe"), 10),
]


@pytest.mark.parametrize("row", TABLE, ids=lambda r: f"{r[0]}:{' '.join(r[1]) or 'defaults'}")
def test_cli_and_python_resolve_alike(indexes, row):
    kind, flags, open_kwargs, search_kwargs, k = row
    d = indexes[kind]
    if "-k" not in flags:
        flags = flags + ["-k", str(k)]
    out = subprocess.run([str(trawl_cli()), "resolve", str(d), "--quiet"] + flags,
                         capture_output=True, text=True, check=True)
    # The CLI prints what it opened, then the resolution: keep the resolution.
    cli = out.stdout[out.stdout.index("OpenOptions {"):].strip()
    with trawl.Index.open(d, **open_kwargs) as index:
        py = index._resolved(k, trawl.SearchParams(**search_kwargs)).strip()
    assert cli == py
    # Every row reaches the kind it names, and the defaults reach the library's.
    assert {"graph": "Graph(", "ivf": "Ivf(", "sharded": "Sharded("}[kind] in py


def test_a_bad_option_is_refused_alike(indexes):
    d = indexes["graph"]
    out = subprocess.run([str(trawl_cli()), "resolve", str(d), "--quiet", "-W", "0"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "-W 0" in out.stderr
    with trawl.Index.open(d) as index:
        with pytest.raises(trawl.InvalidInputError, match="beam_width = 0"):
            index._resolved(10, trawl.SearchParams(beam_width=0))
