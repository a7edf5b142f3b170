"""Type stubs of the native module (import `trawl`, which re-exports all of it)."""

import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
MISSING_ID: int
"""Id of a missing result (fewer than k nodes reachable): 2**32 - 1, with distance inf."""

_Vectors = Union[npt.NDArray[np.float32], npt.NDArray[np.uint8], npt.NDArray[np.int8]]
_Path = Union[str, "os.PathLike[str]"]

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
    """An opened disk index; thread-safe."""

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
    ) -> "Index": ...
    @property
    def n(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def metric(self) -> str: ...
    def __len__(self) -> int: ...
    def search(
        self, query: _Vectors, k: int = 10, params: Optional[SearchParams] = None
    ) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.float32]]: ...
    def batch_search(
        self,
        queries: _Vectors,
        k: int = 10,
        params: Optional[SearchParams] = None,
        threads: int = 0,
    ) -> Tuple[npt.NDArray[np.uint32], npt.NDArray[np.float32]]: ...
    @property
    def stats(self) -> Dict[str, int]: ...
    @property
    def last_stats(self) -> Dict[str, npt.NDArray[Any]]: ...
    def reset_stats(self) -> None: ...
    def info(self) -> Dict[str, Any]: ...
    def verify(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Index": ...
    def __exit__(self, *args: object) -> None: ...

def build(
    data: Union[_Vectors, _Path],
    index_dir: _Path,
    params: Optional[BuildParams] = None,
) -> Dict[str, Any]: ...
