"""Sharded trawl indexes on a Ray cluster (``pip install 'trawl[ray]'``).

Builds run as Ray tasks, one per shard; searches go through one Ray actor per shard, each
holding its shard open, and a driver that routes every query to its ``probe`` nearest shards,
scatters the sub-batches, gathers the per-shard top-k with a deadline and merges them by exact
distance::

    import ray, trawl, trawl.ray

    ray.init()
    trawl.ray.build_sharded("base.fbin", "/shared/idx", shards=4,
                            params=trawl.BuildParams(metric="l2"))
    index = trawl.ray.RayShardedIndex("/shared/idx", max_restarts=3)
    ids, dists = index.batch_search(queries, k=10, params=trawl.SearchParams(L=60), probe=2,
                                    timeout=30)

The index directory must be readable at the same path by every node (a shared or replicated
file system); each actor reads its own shard only. A shard actor that dies (its process killed,
its node lost) is restarted by Ray up to ``max_restarts`` times and reopens its shard; a batch
whose sub-batch hit a dead actor resubmits it to the restarted actor (``retries`` times), and
otherwise fails with :class:`ShardUnavailableError`. A batch that is not complete after
``timeout`` seconds raises :class:`ShardTimeoutError` naming the shards still out. Nothing waits
without a deadline.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

try:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
except ImportError as _e:  # pragma: no cover - exercised without ray installed
    raise ImportError("trawl.ray needs Ray: pip install 'trawl[ray]'") from _e

import trawl

from .errors import Error

__all__ = [
    "build_sharded",
    "RayShardedIndex",
    "ShardActor",
    "ShardUnavailableError",
    "ShardTimeoutError",
]


class ShardUnavailableError(Error, RuntimeError):
    """A shard's actor died and could not answer (restarts or retries exhausted)."""


class ShardTimeoutError(Error, TimeoutError):
    """A batch did not complete within its timeout."""


def _fields(obj: Any) -> Dict[str, Any]:
    """The settable fields of a BuildParams / SearchParams, as keyword arguments."""
    out = {}
    for name in dir(obj):
        if name.startswith("_"):
            continue
        value = getattr(obj, name)
        if not callable(value):
            out[name] = value
    return out


# Ray's error for an actor that is restarting (older Rays have none: every actor error is then
# an attempt).
_ACTOR_UNAVAILABLE = getattr(ray.exceptions, "ActorUnavailableError", ())
# Most resubmissions to a restarting actor before it counts as unavailable (0.2 s apart; the
# batch's deadline bounds them too).
_MAX_RESTART_WAITS = 300


@ray.remote(max_retries=2)
def _build_shard_task(data: Any, index_dir: str, shard: int, params: Dict[str, Any]) -> Dict[str, Any]:
    return trawl.build_shard(data, index_dir, shard, trawl.BuildParams(**params))


def build_sharded(
    data: Any,
    index_dir: "os.PathLike[str] | str",
    shards: int,
    params: Optional["trawl.BuildParams"] = None,
    *,
    slack: float = 0.1,
    epsilon: float = 0.0,
    num_cpus_per_shard: float = 1,
    threads_per_shard: Optional[int] = None,
) -> Dict[str, Any]:
    """Builds a sharded index with one Ray task per shard.

    The partition runs here (``trawl.plan_shards``); each shard builds as a task with
    ``num_cpus_per_shard`` CPUs and ``threads_per_shard`` build threads (default: the CPUs);
    then ``trawl.finish_sharded`` writes the manifest. ``data`` is a vector file path (every
    task reads it: it must be at that path on every node) or a numpy array (put once into
    Ray's object store). A failed task is retried twice (Ray ``max_retries``); a shard that
    still fails raises its error. Returns ``{"plan", "shard_reports", "manifest", "secs"}``.
    """
    t0 = time.perf_counter()
    params = params if params is not None else trawl.BuildParams()
    index_dir = os.fspath(index_dir)
    plan = trawl.plan_shards(
        data,
        index_dir,
        shards,
        metric=params.metric,
        slack=slack,
        epsilon=epsilon,
        seed=params.seed,
        threads=params.threads,
    )
    if isinstance(data, (str, os.PathLike)):
        data_ref: Any = os.fspath(data)
    else:
        data_ref = ray.put(np.ascontiguousarray(data))
    fields = _fields(params)
    fields["threads"] = int(threads_per_shard or max(1, int(num_cpus_per_shard)))
    fields["progress"] = False
    refs = [
        _build_shard_task.options(num_cpus=num_cpus_per_shard).remote(data_ref, index_dir, s, fields)
        for s in range(plan["shards"])
    ]
    reports = ray.get(refs)
    manifest = trawl.finish_sharded(index_dir)
    return {
        "plan": plan,
        "shard_reports": reports,
        "manifest": {k: v for k, v in manifest.items() if k not in ("centroids", "shards")},
        "secs": time.perf_counter() - t0,
    }


@ray.remote
class ShardActor:
    """Holds shard ``shard`` of the sharded index in ``index_dir`` open and searches it; maps
    its row numbers to global ids. Refuses a shard that is not the build the manifest
    recorded, or whose write-ahead log holds updates not merged into its files."""

    def __init__(self, index_dir: str, shard: int, open_kwargs: Dict[str, Any]):
        manifest = trawl.shard_manifest(index_dir)
        entry = manifest["shards"][shard]
        self.shard = shard
        self.ids = np.asarray(entry["ids"], dtype=np.uint64)
        self.index = trawl.Index.open(entry["dir"], **open_kwargs)
        build_id = self.index.info().get("build_id", "")
        if build_id != entry["build_id"]:
            raise trawl.CorruptIndexError(
                f"shard {shard} ({entry['dir']}) is build {build_id!r}, the shard manifest "
                f"recorded {entry['build_id']!r}: rebuild the sharded index"
            )
        # A sharded index takes no updates (its shards' logs are not part of it): a shard
        # whose write-ahead log holds operations not merged into its files is refused, as
        # `trawl.ShardedIndex` refuses it.
        live = self.index.info()["live"]
        if live["delta_vectors"] or live["vectors"] != entry["count"]:
            log = os.path.join(entry["dir"], "wal.trawl")
            raise trawl.CorruptIndexError(
                f"shard {shard}: {log} holds logged update(s) not merged into the shard's "
                "files; a sharded search does not apply its shards' logs and updates to "
                "sharded indexes are not supported: rebuild the sharded index from the "
                "updated data (`trawl shard build`)"
            )

    def ready(self) -> Tuple[int, int]:
        """(shard, process id): answers once the shard is open."""
        return self.shard, os.getpid()

    def batch_search(
        self, queries: np.ndarray, k: int, params: Optional[Dict[str, Any]], threads: int
    ) -> Tuple[np.ndarray, np.ndarray, Dict[str, float]]:
        p = trawl.SearchParams(**params) if params is not None else None
        kk = min(k, len(self.ids))
        ids, dists = self.index.batch_search(queries, k=kk, params=p, threads=threads)
        out = np.full((len(queries), k), trawl.MISSING_ID, dtype=np.uint64)
        d = np.full((len(queries), k), np.inf, dtype=np.float32)
        found = ids != trawl.MISSING_ID
        out[:, :kk][found] = self.ids[ids[found].astype(np.int64)]
        d[:, :kk] = dists
        st = self.index.last_stats
        totals = {key: float(np.sum(st[key])) for key in ("pages_read", "io_requests", "hops")
                  if key in st}
        totals["latency_us"] = float(np.sum(st["latency_us"]))
        return out, d, totals

    def debug_sleep(self, seconds: float) -> None:
        """Keeps the actor busy (tests: a call queued behind it waits)."""
        time.sleep(seconds)


def _prepared(queries: np.ndarray, metric: str) -> np.ndarray:
    q = queries.astype(np.float32)
    if metric == "cosine":
        norms = np.linalg.norm(q, axis=1, keepdims=True)
        q = np.divide(q, norms, out=np.zeros_like(q), where=norms > 0)
    return q


def merge_topk(
    ids: Sequence[np.ndarray], dists: Sequence[np.ndarray], k: int
) -> Tuple[np.ndarray, np.ndarray]:
    """Merges per-shard results (each ``(nq, k_i)``, global ids) into the top ``k`` per row by
    distance, ties by id, a vector found in two shards once (its nearest copy)."""
    all_ids = np.concatenate(ids, axis=1)
    all_d = np.concatenate(dists, axis=1).astype(np.float32)
    # Duplicates: sort by (id, distance), hide every copy after the first.
    order = np.lexsort((all_d, all_ids), axis=1)
    s_ids = np.take_along_axis(all_ids, order, axis=1)
    s_d = np.take_along_axis(all_d, order, axis=1)
    dup = np.zeros_like(s_ids, dtype=bool)
    dup[:, 1:] = s_ids[:, 1:] == s_ids[:, :-1]
    dup |= s_ids == np.uint64(trawl.MISSING_ID)
    s_d = np.where(dup, np.float32(np.inf), s_d)
    s_ids = np.where(dup, np.uint64(trawl.MISSING_ID), s_ids)
    order = np.lexsort((s_ids, s_d), axis=1)[:, :k]
    out_ids = np.take_along_axis(s_ids, order, axis=1)
    out_d = np.take_along_axis(s_d, order, axis=1)
    if out_ids.shape[1] < k:  # fewer candidates than k in all: pad
        pad = k - out_ids.shape[1]
        out_ids = np.pad(out_ids, ((0, 0), (0, pad)), constant_values=np.uint64(trawl.MISSING_ID))
        out_d = np.pad(out_d, ((0, 0), (0, pad)), constant_values=np.inf)
    return out_ids, out_d


class RayShardedIndex:
    """A sharded index served by one Ray actor per shard (see the module docs).

    ``max_restarts``: times Ray restarts a dead shard actor (which reopens its shard).
    ``num_cpus_per_actor``: CPUs Ray reserves per actor while it lives (None: Ray's default for
    actors, none reserved, so more shards than CPUs can be served). ``open_kwargs``: passed to each
    shard's ``trawl.Index.open`` (engine, direct, cache_nodes, …). ``timeout``: seconds to
    wait for every actor to open its shard.
    """

    def __init__(
        self,
        index_dir: "os.PathLike[str] | str",
        *,
        max_restarts: int = 3,
        num_cpus_per_actor: Optional[float] = None,
        open_kwargs: Optional[Dict[str, Any]] = None,
        timeout: float = 120.0,
    ):
        self.index_dir = os.fspath(index_dir)
        m = trawl.shard_manifest(self.index_dir)
        self.n: int = int(m["n"])
        self.dim: int = int(m["dim"])
        self.dtype: str = m["dtype"]
        self.metric: str = m["metric"]
        self.centroids: np.ndarray = np.asarray(m["centroids"], dtype=np.float32)
        self.counts: List[int] = [int(s["count"]) for s in m["shards"]]
        self.open_kwargs = dict(open_kwargs or {})
        options: Dict[str, Any] = {"max_restarts": max_restarts, "max_task_retries": 0}
        if num_cpus_per_actor is not None:
            options["num_cpus"] = num_cpus_per_actor
        self.actors = [
            ShardActor.options(**options).remote(self.index_dir, s, self.open_kwargs)
            for s in range(len(self.counts))
        ]
        self.last_stats: Dict[str, float] = {}
        #: Sub-batches of the last batch resubmitted after their actor died, per shard.
        self.last_resubmits: Dict[int, int] = {}
        try:
            ray.get([a.ready.remote() for a in self.actors], timeout=timeout)
        except GetTimeoutError as e:
            raise ShardTimeoutError(
                f"the shard actors did not open their shards within {timeout} s"
            ) from e
        except RayActorError as e:
            raise ShardUnavailableError(f"a shard actor failed to open its shard: {e}") from e

    @property
    def shards(self) -> int:
        return len(self.actors)

    def route(self, queries: np.ndarray, probe: int = 0) -> np.ndarray:
        """Shards each query visits, nearest centroid first (squared L2 in the partition's
        space, ties by shard number): ``(len(queries), p)``; all shards in order when
        ``probe`` is 0 or at least the number of shards."""
        s = self.shards
        nq = len(queries)
        if probe <= 0 or probe >= s:
            return np.tile(np.arange(s, dtype=np.int64), (nq, 1))
        q = _prepared(np.asarray(queries), self.metric)
        d = ((q[:, None, :] - self.centroids[None, :, :]) ** 2).sum(axis=2, dtype=np.float32)
        return np.argsort(d, axis=1, kind="stable")[:, :probe].astype(np.int64)

    def batch_search(
        self,
        queries: np.ndarray,
        k: int = 10,
        params: Optional["trawl.SearchParams"] = None,
        *,
        probe: int = 0,
        threads: int = 1,
        timeout: Optional[float] = 60.0,
        retries: int = 1,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest neighbours of every row of ``queries`` (global ids, distances),
        as ``trawl.ShardedIndex.batch_search`` returns them. Each shard's sub-batch runs on its
        actor with ``threads`` threads. Raises ``ShardTimeoutError`` after ``timeout`` seconds
        (None: wait without a deadline), ``ShardUnavailableError`` when an actor is dead after
        ``retries`` resubmissions, and the shard's own error (``InvalidInputError``, …) as
        the actor raised it."""
        queries = np.ascontiguousarray(queries)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise trawl.InvalidInputError(
                f"queries must be a 2-D array with {self.dim} columns, not shape {queries.shape}"
            )
        if k < 1 or k > self.n:
            raise trawl.InvalidInputError(f"k = {k} must be between 1 and {self.n}")
        nq = len(queries)
        routes = self.route(queries, probe)
        per_shard = [np.nonzero((routes == s).any(axis=1))[0] for s in range(self.shards)]
        pdict = _fields(params) if params is not None else None
        deadline = None if timeout is None else time.monotonic() + timeout

        def submit(s: int) -> Any:
            sub = np.ascontiguousarray(queries[per_shard[s]])
            return self.actors[s].batch_search.remote(sub, k, pdict, threads)

        pending = {submit(s): s for s in range(self.shards) if len(per_shard[s])}
        attempts = {s: 0 for s in pending.values()}
        waits = {s: 0 for s in pending.values()}
        results: Dict[int, Tuple[np.ndarray, np.ndarray, Dict[str, float]]] = {}
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            if not done:
                out = sorted(pending.values())
                raise ShardTimeoutError(
                    f"batch of {nq} queries not complete after {timeout} s: shard(s) {out} "
                    "did not answer"
                )
            ref = done[0]
            s = pending.pop(ref)
            try:
                results[s] = ray.get(ref)
            except RayActorError as e:
                # The first failure of a shard's actor costs an attempt; while Ray restarts
                # it, the resubmissions it answers "temporarily unavailable" are waited out
                # (within the deadline) without spending more.
                if (isinstance(e, _ACTOR_UNAVAILABLE) and attempts[s] >= 1
                        and waits[s] < _MAX_RESTART_WAITS):
                    waits[s] += 1
                    time.sleep(0.2)
                    pending[submit(s)] = s
                    continue
                if attempts[s] >= retries:
                    raise ShardUnavailableError(
                        f"shard {s}'s actor is unavailable after {attempts[s] + 1} attempt(s): {e}"
                    ) from e
                attempts[s] += 1
                pending[submit(s)] = s
            except RayTaskError as e:
                # The shard raised: re-raise its own exception (trawl.InvalidInputError, …).
                cause = e.as_instanceof_cause()
                raise cause from None
        # Each query's candidates: its shards' rows, in shard order.
        id_parts, d_parts = [], []
        stats: Dict[str, float] = {}
        for s in sorted(results):
            ids_s, d_s, st = results[s]
            full_i = np.full((nq, k), np.uint64(trawl.MISSING_ID), dtype=np.uint64)
            full_d = np.full((nq, k), np.inf, dtype=np.float32)
            full_i[per_shard[s]] = ids_s
            full_d[per_shard[s]] = d_s
            id_parts.append(full_i)
            d_parts.append(full_d)
            for key, v in st.items():
                stats[key] = stats.get(key, 0.0) + v
        self.last_resubmits = {s: a for s, a in attempts.items() if a}
        if not id_parts:
            ids = np.full((nq, k), np.uint64(trawl.MISSING_ID), dtype=np.uint64)
            return ids, np.full((nq, k), np.inf, dtype=np.float32)
        self.last_stats = stats
        return merge_topk(id_parts, d_parts, k)

    def close(self) -> None:
        """Ends the shard actors."""
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []

    def __enter__(self) -> "RayShardedIndex":
        return self

    def __exit__(self, *args: object) -> None:
        self.close()
