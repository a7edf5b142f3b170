"""Type stubs of the native module (import `trawl`, which re-exports all of it)."""

import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

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

class BuildParams:
    """Parameters of `build`; the defaults are those of `trawl build`."""

    metric: str
    R: int
    L: int
    alpha: float
    pq_bytes: Optional[int]
    threads: int
    seed: int
    memory_budget_gb: Optional[float]
    saturate: bool
    entry_ratio: float
    entry_degree: int
    entry_build_list: int
    entry_sampling: str
    decoupled: bool
    progress: bool
    def __init__(
        self,
        *,
        metric: str = "l2",
        R: int = 64,
        L: int = 100,
        alpha: float = 1.2,
        pq_bytes: Optional[int] = None,
        threads: int = 0,
        seed: int = ...,
        memory_budget_gb: Optional[float] = None,
        saturate: bool = False,
        entry_ratio: float = 0.01,
        entry_degree: int = 32,
        entry_build_list: int = 64,
        entry_sampling: str = "uniform",
        decoupled: bool = False,
        progress: bool = True,
    ) -> None: ...

class SearchParams:
    """Parameters of `Index.search` / `Index.batch_search`; the defaults are those of
    `trawl search` (L = None means max(100, k))."""

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
    prefetch: bool
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
        prefetch: bool = True,
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
        queue_depth: int = 64,
        writable: bool = False,
        durability: str = "sync",
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
        queue_depth: int = 64,
        writable: bool = False,
        durability: str = "sync",
    ) -> "Index":
        """Opens the index in ``index_dir``.

        ``writable=True`` opens it for writing: a second writer (this process or another) is
        refused with ``StorageError`` while this handle is open. ``durability`` (writable
        only): ``"sync"`` (each write returns once logged and synced to the device) or
        ``"buffered"`` (once written to the log; ``flush()`` syncs). ``cache_nodes`` (page-packed
        layouts) holds that many nodes in a static cache; an index with updates chooses and
        loads them again after every merge.
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
    def writable(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def delta_len(self) -> int:
        """Vectors inserted since the last merge, held in memory (deleted ones included)."""
    def __len__(self) -> int:
        """Live vectors: inserted ones counted, deleted ones not."""
    def search(
        self, query: _Vectors, k: int = 10, params: Optional[SearchParams] = None
    ) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """The k nearest neighbours of one 1-D query: (uint64 ids, float32 distances),
        nearest first; ``MISSING_ID`` / inf where fewer than k vectors are reachable."""
    def batch_search(
        self,
        queries: _Vectors,
        k: int = 10,
        params: Optional[SearchParams] = None,
        threads: int = 0,
    ) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """Every row of a 2-D array: uint64 ids and float32 distances of shape
        (len(queries), k)."""
    def insert(self, vectors: _Vectors, ids: Optional[_Ids] = None) -> npt.NDArray[np.uint64]:
        """Inserts vectors (2-D, or one 1-D vector, of the index's dtype and dimension)
        under new ids (None: assigned). Returns the ids. Searchable and logged when it
        returns. An id already present or given twice, a negative id, a wrong dtype or
        dimension, NaN or inf: InvalidInputError, nothing changed."""
    def upsert(self, ids: _Ids, vectors: _Vectors) -> None:
        """Inserts or replaces the vectors of ``ids`` (one operation)."""
    def delete(self, ids: _Ids) -> int:
        """Deletes ``ids`` (each must be present, given once; otherwise InvalidInputError and
        nothing deleted). Returns the number deleted."""
    def merge(self, threads: int = 0, progress: bool = False) -> Dict[str, Any]:
        """Folds inserts and deletes into the disk files (atomic commit). Returns the merge
        report (``inserted``, ``deleted``, ``repaired``, ``patched``, ``slots``, ``holes``,
        seconds per phase, ``bytes_written``, ``peak_rss_bytes``). The GIL is released;
        Ctrl-C stops it with KeyboardInterrupt (the index keeps its files and updates)."""
    def flush(self) -> None:
        """Syncs the write-ahead log (a no-op with durability "sync")."""
    @property
    def stats(self) -> Dict[str, int]: ...
    @property
    def last_stats(self) -> Dict[str, npt.NDArray[Any]]: ...
    def reset_stats(self) -> None: ...
    def info(self) -> Dict[str, Any]: ...
    def verify(self) -> Dict[str, Any]: ...
    def close(self) -> None:
        """Releases the handle (engines, files, the writer lock after syncing the log);
        later calls raise InvalidInputError."""
    def __enter__(self) -> "Index": ...
    def __exit__(self, *args: object) -> None: ...

def build(
    data: Union[_Vectors, _Path],
    index_dir: _Path,
    params: Optional[BuildParams] = None,
) -> Dict[str, Any]: ...
