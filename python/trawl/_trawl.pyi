"""Type stubs of the native module (import `trawl`, which re-exports all of it)."""

import os
from typing import Any, Dict, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
MISSING_ID: int
"""Id of a missing result (fewer than k vectors reachable): 2**64 - 1, with distance inf."""

_Vectors = Union[npt.NDArray[np.float32], npt.NDArray[np.uint8], npt.NDArray[np.int8]]
_Path = Union[str, "os.PathLike[str]"]
_Ids = Union[npt.NDArray[np.integer[Any]], Sequence[int], int]
"""Ids: a 1-D integer numpy array (any integer dtype) or a list of ints; each in
[0, 2**64 - 2]. A negative id is an InvalidInputError."""
_Filter = Union[str, Dict[str, Any]]
"""A filter: the text form (``'lang = "en" AND year >= 2024'``) or the JSON form
(``{"lang": "en", "year": {"$gte": 2024}}``). Labels: ``label = "x"`` for a plain label,
``key = "v"`` for a label ``key=v``; ``=``, ``!=``, ``IN (...)``, ``HAS ANY (...)``,
``HAS ALL (...)``. Numeric fields: ``= != < <= > >=``, ``IN``, ``BETWEEN lo AND hi`` (a vector
without a value matches no comparison). ``AND``, ``OR``, ``NOT``, parentheses. JSON:
``$and``, ``$or``, ``$not``, ``$eq``, ``$ne``, ``$lt``, ``$lte``, ``$gt``, ``$gte``, ``$in``,
``$nin``, ``$any``, ``$all``."""
_Filters = Union[_Filter, Sequence[Optional[_Filter]]]
"""One filter for every query, or (batch searches) a list of one per query, None = that
query unfiltered."""
_Labels = Union[
    Sequence[Optional[Sequence[str]]],
    Tuple[Union[npt.NDArray[np.integer[Any]], Sequence[int]], Union[npt.NDArray[Any], Sequence[str]]],
    _Path,
]
"""The vectors' labels: one list of strings per vector (``key=value`` is the value of the
label key ``key``), a CSR pair ``(offsets, values)`` (vector i has
``values[offsets[i]:offsets[i+1]]``), or the path of a DiskANN label file (one line per
vector, labels separated by commas)."""
_Attrs = Union[Dict[str, Union[npt.NDArray[Any], Sequence[Any]]], _Path]
"""The vectors' attributes: ``{name: one value per vector}`` — an integer numpy array is an
int64 field, a float array a float64 field (NaN and inf refused; a ``numpy.ma`` masked array
marks missing values), a boolean array the labels ``name=true`` / ``name=false``; a list holds
per vector None (no value), a number, a string (the label ``name=value``) or a list of strings
(several). Or the path of a JSON-lines attribute file (one object per vector)."""

class BuildParams:
    """Parameters of `build`; the defaults are those of `trawl build`.

    ``kind`` picks the index: ``"graph"`` (a Vamana graph on disk; the default) or ``"ivf"``
    (FusionANNS: posting lists over an in-memory centroid graph, PQ codes on an accelerator,
    vectors on disk in buckets by nearest centroid). An IVF build reads ``metric``,
    ``pq_bytes``, ``threads``, ``seed``, ``progress``, ``ivf_list_size``, ``ivf_epsilon``,
    ``ivf_max_replicas`` and ``by_id_vectors``; the graph-only fields (``R``, ``L``,
    ``alpha``, ``memory_budget_gb``, ``saturate``, ``visit_order``, ``entry_*``, ``decoupled``,
    ``pages``) are ignored for it, and the IVF fields for a graph build. ``pages=True`` also
    writes the page-node layout (PageANN), opened with ``Index.open(..., layout="pages")``.
    """

    kind: str
    metric: str
    R: int
    L: int
    alpha: float
    pq_bytes: Optional[int]
    threads: int
    seed: int
    memory_budget_gb: Optional[float]
    saturate: bool
    visit_order: str
    """The order the graph build links its points in: ``"blocks:N"`` (blocks of N
    consecutive ids in a seeded random order; default ``"blocks:64"``), ``"random"`` or
    ``"ids"``."""
    opq: bool
    quant: str
    """The codes searches navigate with: ``"pq"`` (``pq_bytes`` per vector) or ``"rabitq"``
    (Extended RaBitQ, ``bits`` per dimension plus 8–16 bytes of factors; graph kind)."""
    bits: Optional[int]
    """RaBitQ bits per dimension, 1–8 (``quant="rabitq"``; ``None`` = 4)."""
    entry_ratio: float
    entry_degree: int
    entry_build_list: int
    entry_sampling: str
    decoupled: bool
    pages: bool
    ivf_list_size: int
    """IVF: target posting-list size before replication (lists ≈ n / size)."""
    ivf_epsilon: float
    """IVF: boundary replication's ε: a vector joins list i when
    dist(v, c_i) ≤ (1 + ε) · dist(v, c_1)."""
    ivf_max_replicas: int
    """IVF: most lists a vector joins (1..64)."""
    by_id_vectors: bool
    """IVF: also write the vectors in id order, searched with
    ``Index.open(..., ivf_vectors="by_id")``."""
    label_aware: str
    """A label-aware graph build when labels are given (per-label start nodes, a prune that
    keeps a path for every label): "auto" (on unless a memory budget is set), "on", "off"."""
    progress: bool
    def __init__(
        self,
        *,
        kind: str = "graph",
        metric: str = "l2",
        R: int = 64,
        L: int = 100,
        alpha: float = 1.2,
        pq_bytes: Optional[int] = None,
        threads: int = 0,
        seed: int = ...,
        memory_budget_gb: Optional[float] = None,
        saturate: bool = False,
        visit_order: str = "blocks:64",
        opq: bool = False,
        quant: str = "pq",
        bits: Optional[int] = None,
        entry_ratio: float = 0.01,
        entry_degree: int = 32,
        entry_build_list: int = 64,
        entry_sampling: str = "uniform",
        decoupled: bool = False,
        pages: bool = False,
        ivf_list_size: int = 10,
        ivf_epsilon: float = 0.25,
        ivf_max_replicas: int = 8,
        by_id_vectors: bool = False,
        label_aware: str = "auto",
        progress: bool = True,
    ) -> None: ...

class SearchParams:
    """Parameters of `Index.search` / `Index.batch_search` / `Index.range_search`; the
    defaults are those of `trawl search`.

    One object serves both index kinds, each ignoring the other's fields. ``L``: for a graph
    index the candidate list size (None = max(100, k); on the page-node layout L counts pages,
    None = max(100, k) / min(capacity, 4), and k may exceed it); for an IVF index the number of
    posting lists probed (None = 32, or every list when there are fewer).
    """

    L: Optional[int]
    beam_width: int
    strategy: str
    entry_list: int
    pipe_width: str
    pipe_start_width: int
    pipe_max_width: int
    dynamic_width: Optional[str]
    page_search: bool
    rerank_batch: int
    rerank_threshold: float
    rerank_bound: float
    rerank_skip_eps: float
    """RaBitQ codes: skip re-ranking a candidate whose lower bound (estimate − ε₀·σ) is beyond
    the k-th exact distance so far; ε₀ (1.9 ≈ 94% per candidate, 3 ≈ 99.7%; 0 never skips)."""
    prefetch: bool
    rerank_n: Optional[int]
    """IVF: candidates the filter stage keeps for the re-rank; None = max(10·k, 4·L)."""
    ivf_batch: int
    """IVF: re-rank mini-batch size."""
    ivf_epsilon: float
    """IVF: the early stop's change-rate threshold ε in [0, 1] (0 re-ranks all rerank_n)."""
    ivf_beta: int
    """IVF: mini-batches in a row below ε that stop the re-rank (β)."""
    heuristic: bool
    """IVF: the early stop (False: re-rank all rerank_n, the same as ivf_epsilon=0)."""
    page_merge: bool
    """IVF: one read for the vectors of a mini-batch on one page."""
    page_buffer: bool
    """IVF: keep the pages read for the rest of the query (no page read twice)."""
    page_mates: bool
    """IVF: re-rank every vector on a page read for a candidate (its bucket mates), no extra read."""
    centroid_list: int
    """IVF: list size of the centroid-graph search; 0 = max(2·L, 32)."""
    accel_batch: int
    """IVF, batch_search: queries per accelerator job; 0 = 1 on the CPU, 32 on a GPU."""
    batch: int
    """Flash search: queries in flight per search thread; 0 = 32 (1024 on a GPU)."""
    staleness: int
    """Flash search: steps a read is chosen ahead (0 = strict best-first)."""
    grain: str
    """Flash search: "query" (a query resumes when its read lands) or "kernel" (a batch-wide
    barrier per step)."""
    prefetch_window: int
    """Decoupled layout: expansions in a row that leave the PQ top-(k+B) unchanged before the
    prefetch starts (0 = rerank_batch)."""
    converge_prefetch: bool
    """Decoupled layout: prefetch when the traversal is ending."""
    rerank_lookahead: int
    """Decoupled layout: re-rank batches read ahead of the one being processed."""
    rerank_depth: int
    """Decoupled layout: most vector reads in flight after the traversal (0 = the strategy's
    width)."""
    strict_steps: int
    """Flash search: steps each query takes strictly before its reads are chosen ahead."""
    probe: int
    """Sharded index: shards each query visits, nearest first (0 = all)."""
    range_slack: float
    """Range search on a graph index: keep candidates whose code distance is within
    radius + range_slack·|radius| (results are checked exactly: more slack costs reads, never
    precision); a finite number ≥ 0."""
    range_width: int
    """Range search with beam search: reads per round trip while the candidates within the
    radius are expanded (at least ``beam_width``; 0 keeps ``beam_width``)."""
    range_early_stop: int
    """Range search on a graph index: round trips without progress after which a query that
    has found nothing within the radius stops (0 = never)."""
    def __init__(
        self,
        *,
        L: Optional[int] = None,
        beam_width: int = 4,
        strategy: str = "beam",
        entry_list: int = 0,
        pipe_width: str = "dynamic",
        pipe_start_width: int = 4,
        pipe_max_width: int = 32,
        dynamic_width: Optional[str] = None,
        page_search: bool = False,
        rerank_batch: int = 10,
        rerank_threshold: float = 0.01,
        rerank_bound: float = 0.0,
        prefetch: bool = True,
        prefetch_window: int = 0,
        converge_prefetch: bool = True,
        rerank_lookahead: int = 0,
        rerank_depth: int = 0,
        rerank_skip_eps: float = 1.9,
        rerank_n: Optional[int] = None,
        ivf_batch: int = 2,
        ivf_epsilon: float = 0.1,
        ivf_beta: int = 2,
        heuristic: bool = True,
        page_merge: bool = True,
        page_buffer: bool = True,
        page_mates: bool = True,
        centroid_list: int = 0,
        accel_batch: int = 0,
        batch: int = 0,
        staleness: int = 1,
        grain: str = "query",
        strict_steps: int = 0,
        probe: int = 0,
        range_slack: float = 0.15,
        range_width: int = 16,
        range_early_stop: int = 0,
    ) -> None: ...

class Index:
    """An opened disk index; thread-safe.

    Opened read-only by default. With ``writable=True`` it takes updates (``insert``,
    ``upsert``, ``delete``; ``merge`` folds them into the disk files) and holds the
    directory's writer lock until ``close()``. Searches see every update made through the
    handle at once (and, for a read-only handle, the updates logged when it was opened).
    Result ids are uint64: the vectors' ids — row numbers of the data the index was built
    from, or the ids given to (or assigned by) ``insert`` / ``upsert`` — and ``MISSING_ID``
    (2**64 - 1) where fewer than k vectors are reachable.

    An IVF index (``kind == "ivf"``) is read-only: ``writable=True`` and the write methods
    raise InvalidInputError; its ids are row numbers.
    """

    def __init__(
        self,
        index_dir: _Path,
        *,
        layout: str = "packed",
        engine: str = "auto",
        direct: bool = True,
        verify_pages: bool = True,
        cache_nodes: int = 0,
        cache_policy: str = "freq",
        list_cache_mb: float = 16.0,
        list_pin: float = 0.0,
        refine_bits: int = 0,
        queue_depth: Optional[int] = None,
        writable: bool = False,
        durability: str = "sync",
        accel: str = "cpu",
        ivf_vectors: str = "bucket",
    ) -> None: ...
    @staticmethod
    def open(
        index_dir: _Path,
        *,
        layout: str = "packed",
        engine: str = "auto",
        direct: bool = True,
        verify_pages: bool = True,
        cache_nodes: int = 0,
        cache_policy: str = "freq",
        list_cache_mb: float = 16.0,
        list_pin: float = 0.0,
        refine_bits: int = 0,
        queue_depth: Optional[int] = None,
        writable: bool = False,
        durability: str = "sync",
        accel: str = "cpu",
        ivf_vectors: str = "bucket",
    ) -> "Index":
        """Opens the index in ``index_dir``.

        ``writable=True`` opens it for writing: a second writer (this process or another) is
        refused with ``StorageError`` while this handle is open. ``durability`` (writable
        only): ``"sync"`` (each write returns once logged and synced to the device) or
        ``"buffered"`` (once written to the log; ``flush()`` syncs). ``cache_nodes`` (page-packed
        layouts) holds that many nodes in a static cache; an index with updates chooses and
        loads them again after every merge. ``list_pin`` (decoupled layout, read-only opens):
        the share of the ``list_cache_mb`` budget pinned by value — the lists sample searches
        read most, at their exact size; the rest stays LRU. ``refine_bits`` (decoupled layout,
        read-only opens): 4 or 8 holds every vector in memory as a scalar code of that many
        bits per dimension (dim/2 or dim bytes + 4 per vector, built at open from the vector
        files) whose distances order the re-rank instead of PQ's: far fewer vector reads
        where PQ is coarse; 0 = off.

        Opens an index of any kind, as the directory's manifest says. ``accel`` — the
        accelerator of an IVF index's filter stage and of a graph index's flash strategy,
        ``"cpu"``, ``"gpu"`` (InvalidInputError when no GPU adapter is found or this build has
        no GPU backend) or ``"auto"`` (the GPU when found, else the CPU). IVF only:
        ``ivf_vectors`` — the vector file the
        re-rank reads, ``"bucket"`` or ``"by_id"`` (built with
        ``BuildParams(by_id_vectors=True)``). An IVF index refuses ``writable=True``
        ("IVF indexes do not take updates yet"), a ``layout`` other than ``"packed"`` and
        ``cache_nodes > 0`` with InvalidInputError.
        """
    @property
    def n(self) -> int:
        """Live vectors (what a search can return); the same as ``len(index)``."""
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def kind(self) -> str:
        """Index kind: ``"graph"`` or ``"ivf"``."""
    @property
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def delta_len(self) -> int:
        """Vectors inserted since the last merge, held in memory (deleted ones included)."""
    def __len__(self) -> int:
        """Live vectors: inserted ones counted, deleted ones not."""
    def search(
        self,
        query: _Vectors,
        k: int = 10,
        params: Optional[SearchParams] = None,
        *,
        filter: Optional[_Filter] = None,
        filter_plan: str = "auto",
    ) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """The k nearest neighbours of one 1-D query: (uint64 ids, float32 distances),
        nearest first; ``MISSING_ID`` / inf where fewer than k vectors are reachable.

        ``filter`` (a graph index built with ``labels`` / ``attrs``): only vectors that match
        it are returned (fewer than k matches: padded with ``MISSING_ID``). ``filter_plan``:
        ``"auto"`` (the planner's choice from the number of matches), ``"inline"`` (the graph
        search, results filtered, list scaled), ``"scan"`` (the matches scored by PQ in memory,
        the best read) or ``"exact"`` (every match read and scored exactly). A filter that does
        not parse (the message gives the column, with a caret), names an unknown field or
        compares labels by order, and any filter on an index without attributes, raise
        InvalidInputError. ``last_stats`` has ``plan_inline`` / ``plan_scan`` / ``plan_exact``,
        ``matches``, ``matches_exact``, ``filter_list`` and ``rejected`` per query."""
    def batch_search(
        self,
        queries: _Vectors,
        k: int = 10,
        params: Optional[SearchParams] = None,
        threads: int = 0,
        *,
        filter: Optional[_Filters] = None,
        filter_plan: str = "auto",
    ) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """Every row of a 2-D array: uint64 ids and float32 distances of shape
        (len(queries), k). ``filter``: one for every query, or a list of one per query
        (None: unfiltered; the list's length must be len(queries)); ``filter_plan`` as in
        ``search``."""
    def range_search(
        self,
        queries: _Vectors,
        radius: float,
        max_results: Optional[int] = None,
        params: Optional[SearchParams] = None,
        threads: int = 0,
        *,
        filter: Optional[_Filters] = None,
        filter_plan: str = "auto",
    ) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """Range search (faiss's ``range_search``): every vector within ``radius`` of each
        query (a 2-D array, one query per row, or one 1-D query). Returns ``(lims, ids,
        distances)``: int64 offsets of length ``nq + 1``, uint64 ids and float32 distances;
        query ``i``'s results are ``ids[lims[i]:lims[i + 1]]``, nearest first, each within the
        radius by its exact distance (squared for l2). ``radius`` must be finite (NaN or inf:
        InvalidInputError); ``max_results`` (None or ≥ 1) keeps the nearest that many per
        query. On a graph index ``params.L`` and ``range_slack`` / ``range_width`` /
        ``range_early_stop`` trade reads for recall (a vector within the radius may be
        missed, never one outside it); a flat index is exact. ``filter`` / ``filter_plan`` as
        in ``batch_search``; ``last_stats`` holds one entry per query."""
    def insert(
        self,
        vectors: _Vectors,
        ids: Optional[_Ids] = None,
        *,
        labels: Optional[_Labels] = None,
        attrs: Optional[_Attrs] = None,
    ) -> npt.NDArray[np.uint64]:
        """Inserts vectors (2-D, or one 1-D vector, of the index's dtype and dimension)
        under new ids (None: assigned). Returns the ids. Searchable and logged when it
        returns. An id already present or given twice, a negative id, a wrong dtype or
        dimension, NaN or inf: InvalidInputError, nothing changed. ``labels`` / ``attrs``:
        the vectors' attributes, in the forms ``build`` takes, logged with them and
        filterable at once (a numeric field arriving as a label key, or the reverse:
        InvalidInputError)."""
    def upsert(
        self,
        ids: _Ids,
        vectors: _Vectors,
        *,
        labels: Optional[_Labels] = None,
        attrs: Optional[_Attrs] = None,
    ) -> None:
        """Inserts or replaces the vectors of ``ids`` (one operation); ``labels`` /
        ``attrs`` replace their attributes (without them the new vectors have none)."""
    def delete(self, ids: _Ids) -> int:
        """Deletes ``ids`` (each must be present, given once; otherwise InvalidInputError and
        nothing deleted). Returns the number deleted."""
    def merge(self, threads: int = 0, progress: bool = False,
              deletes: Literal["in-place", "in-place-search", "consolidate"] = "in-place",
              replace: int = 3) -> Dict[str, Any]:
        """Folds inserts and deletes into the disk files (atomic commit). ``deletes``: how
        deleted vectors leave the graph — "in-place" (every node pointing to one swaps that
        edge for at most ``replace`` edges to its out-neighbours), "in-place-search"
        (IP-DiskANN: the nodes a search finds) or "consolidate" (FreshDiskANN re-prunes).
        Returns the merge report (``inserted``, ``deleted``, ``repaired``, ``patched``,
        ``touched_nodes``, ``touched_pages``, ``graph_pages``, ``in_edges``, ``slots``,
        ``holes``, seconds per phase, ``bytes_written``, ``peak_rss_bytes``). The GIL is
        released; Ctrl-C stops it with KeyboardInterrupt (the index keeps its files and
        updates)."""
    def flush(self) -> None:
        """Syncs the write-ahead log (a no-op with durability "sync")."""
    @property
    def stats(self) -> Dict[str, int]:
        """Counters summed over every query since opening (or ``reset_stats()``), with
        ``queries``. An IVF index also counts ``lists_probed``, ``candidates``,
        ``candidates_unique``, ``pages_merged``, ``pages_buffered``, ``page_mates`` and
        ``centroid_distances`` (zero for a graph index)."""
    @property
    def last_stats(self) -> Dict[str, npt.NDArray[Any]]:
        """The same counters per query of the last ``search`` / ``batch_search`` /
        ``range_search`` call (uint64 arrays), plus ``latency_us``."""
    def reset_stats(self) -> None: ...
    def info(self) -> Dict[str, Any]:
        """The index's description (``trawl info --json``), plus the cache, the I/O engine
        and ``live``; an IVF index's has an ``ivf`` section (``nlist``, ``replication``, the
        vector layout and pages, ``accel``, memory per part)."""
    def verify(self) -> Dict[str, Any]:
        """Reads every file whole and checks it: ``{"manifest", "files": [{"name", "bytes",
        "checked"}]}``; CorruptIndexError names the first damaged file. An IVF index's other
        files are checked when it opens: it checks the posting lists against the build record
        and the buckets and reads every vector page (``vector_pages``)."""
    def close(self) -> None:
        """Releases the handle (engines, files, the writer lock after syncing the log);
        later calls raise InvalidInputError."""
    def __enter__(self) -> "Index": ...
    def __exit__(self, *args: object) -> None: ...

def build(
    data: Union[_Vectors, _Path],
    index_dir: _Path,
    params: Optional[BuildParams] = None,
    query_sample: Optional[Union[_Vectors, _Path]] = None,
    *,
    labels: Optional[_Labels] = None,
    attrs: Optional[_Attrs] = None,
) -> Dict[str, Any]:
    """Builds a graph index, or an IVF index with ``BuildParams(kind="ivf")``, replacing
    what ``index_dir`` holds; returns the build report (``kind`` names the index kind).
    ``query_sample`` (graph only; the data's dtype and dimension, not stored): queries like
    the ones the index will serve, whose exact nearest points the build links to one another
    (``query_edges`` in the report).

    ``labels`` / ``attrs`` (graph only): the vectors' attributes, stored with the index for
    filtered search (``Index.search(..., filter=...)``), one entry per vector (a length other
    than the data's is an InvalidInputError, as are NaN, bad labels and bad field names;
    nothing is written then). See ``_Labels`` and ``_Attrs``."""

def filtered_ground_truth(
    base: Union[_Vectors, _Path],
    queries: Union[_Vectors, _Path],
    k: int = 10,
    metric: str = "l2",
    *,
    labels: Optional[_Labels] = None,
    attrs: Optional[_Attrs] = None,
    filter: Optional[_Filters] = None,
) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
    """The exact k nearest neighbours of every query among the rows of ``base`` its filter
    matches (ties by id): uint64 ids and float32 distances of shape (len(queries), k),
    ``MISSING_ID`` / inf where fewer than k rows match. ``labels`` / ``attrs`` as ``build``
    takes them, ``filter`` as ``Index.batch_search`` does (None: every row). ``metric``:
    ``"l2"``, ``"ip"`` or ``"cosine"``. What ``trawl gt --filter`` computes."""

class ShardedIndex:
    """A sharded index (``build_sharded`` / ``trawl shard build``), every shard open in this
    process: each query searched in its ``probe`` nearest shards (0 = all), per-shard top-k
    merged by exact distance; ids are global (row numbers of the data it was built from).

    Read-only: ``Index.open(shard_dir, writable=True)`` on one of its shards raises
    ``InvalidInputError`` (updates to sharded indexes are not supported), and a shard whose
    ``wal.trawl`` holds unmerged operations makes the constructor raise ``CorruptIndexError``."""
    def __init__(
        self,
        index_dir: _Path,
        *,
        engine: str = "auto",
        direct: bool = True,
        verify_pages: bool = True,
        queue_depth: int = 64,
    ) -> None: ...
    @property
    def n(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def metric(self) -> str: ...
    @property
    def shards(self) -> int: ...
    def __len__(self) -> int: ...
    def route(self, queries: _Vectors, probe: int = 0) -> npt.NDArray[np.int64]:
        """Shards each query visits, nearest centroid first: shape (len(queries), p)."""
    def batch_search(
        self,
        queries: _Vectors,
        k: int = 10,
        params: Optional[SearchParams] = None,
        threads: int = 0,
        probe: int = 0,
        *,
        filter: Optional[_Filters] = None,
        filter_plan: str = "auto",
    ) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """``filter`` / ``filter_plan``: as ``Index.batch_search`` takes them; a filtered
        query visits every shard holding a match (whatever ``probe``)."""
    @property
    def last_stats(self) -> Dict[str, npt.NDArray[Any]]:
        """Per-query counters of the last batch, summed over the shards each query visited."""
    def memory_bytes(self) -> int: ...
    def disk_bytes(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> "ShardedIndex": ...
    def __exit__(self, *args: object) -> None: ...

def build_sharded(
    data: Union[_Vectors, _Path],
    index_dir: _Path,
    shards: int,
    params: Optional[BuildParams] = None,
    *,
    slack: float = 0.1,
    epsilon: float = 0.0,
    labels: Optional[Any] = None,
    attrs: Optional[Any] = None,
) -> Dict[str, Any]:
    """Partitions ``data`` by balanced k-means into ``shards`` graph indexes under
    ``index_dir`` and writes the shard manifest; returns the build report. ``labels`` /
    ``attrs``: as ``build`` takes them (each shard keeps its rows')."""

def plan_shards(
    data: Union[_Vectors, _Path],
    index_dir: _Path,
    shards: int,
    *,
    metric: str = "l2",
    slack: float = 0.1,
    epsilon: float = 0.0,
    seed: int = ...,
    threads: int = 0,
) -> Dict[str, Any]:
    """Step 1 of a distributed build: partition and write the plan."""

def build_shard(
    data: Union[_Vectors, _Path],
    index_dir: _Path,
    shard: int,
    params: Optional[BuildParams] = None,
) -> Dict[str, Any]:
    """Step 2: build one shard of the plan (shards build independently)."""

def finish_sharded(index_dir: _Path) -> Dict[str, Any]:
    """Step 3: write the shard manifest with every shard's build id."""

def shard_manifest(index_dir: _Path) -> Dict[str, Any]:
    """The shard manifest: shape, metric, centroids, and per shard its directory, count,
    build id and global ids."""
