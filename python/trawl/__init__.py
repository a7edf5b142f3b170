"""trawl: disk-resident approximate nearest neighbour search.

The index lives on an SSD — the graph and the full vectors in 4 KiB pages read with O_DIRECT,
only compressed (PQ) codes in memory — and is searched with beam search or PipeSearch::

    import numpy as np
    import trawl

    data = np.random.default_rng(0).standard_normal((20_000, 64), dtype=np.float32)
    trawl.build(data, "my-index", trawl.BuildParams(metric="l2", R=64, L=100, pq_bytes=32))
    index = trawl.Index.open("my-index")
    ids, dists = index.search(data[0], k=10)
    ids, dists = index.batch_search(data[:100], k=10, params=trawl.SearchParams(L=50))
    print(index.stats["pages_read"] / index.stats["queries"], "pages per query")

Inputs are numpy arrays of float32, uint8 or int8 (read in place when C-contiguous). Results
are uint64 ids (``MISSING_ID`` = 2**64 - 1 where fewer than k results exist) and float32
distances in the metric's own units: squared Euclidean for "l2", ``-<a, b>`` for "ip",
``1 - cos`` for "cosine". An index built from an array has ids = row numbers.

The same calls build and search an IVF index (FusionANNS: posting lists over an in-memory
centroid graph, PQ codes scored on an accelerator, vectors on disk in buckets), where ``L`` is
the number of posting lists probed::

    trawl.build(data, "my-ivf", trawl.BuildParams(kind="ivf", metric="l2", pq_bytes=32))
    index = trawl.Index.open("my-ivf", accel="cpu")   # or "gpu" / "auto"
    ids, dists = index.batch_search(data[:100], k=10, params=trawl.SearchParams(L=64, rerank_n=300))
    print(index.kind, index.stats["lists_probed"] / index.stats["queries"], "lists per query")

Opened with ``writable=True``, a graph index takes streaming updates, searchable at once::

    with trawl.Index.open("my-index", writable=True) as index:
        new_ids = index.insert(more_vectors)          # or index.insert(vectors, ids=[...])
        index.upsert([5], replacement[None, :])       # replace the vector of id 5
        index.delete([7, 8])                          # hidden from every search from now on
        index.merge()                                 # fold it all into the disk files

A sharded index splits the data by balanced k-means into graph indexes of its own, searched
together (each query in its ``probe`` nearest shards) and merged by exact distance; ``trawl.ray``
runs the same shards as Ray actors::

    trawl.build_sharded(data, "my-shards", shards=4, params=trawl.BuildParams(metric="l2"))
    with trawl.ShardedIndex("my-shards") as index:
        ids, dists = index.batch_search(data[:100], k=10, probe=2)

A graph index built with the vectors' labels and attributes answers filtered searches (the
text form of a filter as a string, the JSON form as a dict, or one per query as a list)::

    trawl.build(data, "my-filtered", labels=[["en", "news"], ...],   # one list per vector
                attrs={"year": years, "price": np.ma.masked_invalid(prices)})
    index = trawl.Index.open("my-filtered")
    ids, dists = index.search(data[0], k=10, filter='label = "en" AND year >= 2020')
    ids, dists = index.batch_search(queries, k=10, filter={"price": {"$lt": 9.5}})
    truth, _ = trawl.filtered_ground_truth(data, queries, 10, "l2", labels=..., attrs=...,
                                           filter='label = "en" AND year >= 2020')
"""

from . import errors
from ._trawl import (MISSING_ID, BuildParams, Index, SearchParams, ShardedIndex, __version__,
                     build, build_shard, build_sharded, filtered_ground_truth, finish_sharded,
                     plan_shards, shard_manifest)
from .client import AuthError, Client, ServerBusyError, ServerUnreachableError
from .errors import (CorruptIndexError, Error, IndexNotFoundError, InternalError,
                     InvalidInputError, StorageError)

__all__ = [
    "build",
    "Client",
    "AuthError",
    "ServerBusyError",
    "ServerUnreachableError",
    "filtered_ground_truth",
    "BuildParams",
    "Index",
    "SearchParams",
    "ShardedIndex",
    "build_sharded",
    "plan_shards",
    "build_shard",
    "finish_sharded",
    "shard_manifest",
    "MISSING_ID",
    "Error",
    "InvalidInputError",
    "IndexNotFoundError",
    "StorageError",
    "CorruptIndexError",
    "InternalError",
    "errors",
    "__version__",
]
