"""A client of ``trawl serve``, with the method names and array types of :class:`trawl.Index`.

::

    import trawl
    client = trawl.Client("http://127.0.0.1:7700", api_key="...")      # one index served
    ids, dists = client.search(query, k=10)
    ids, dists = client.batch_search(queries, k=10, params=trawl.SearchParams(L=64))
    new_ids = client.insert(vectors)
    client.delete(new_ids[:2])
    report = client.merge()                   # waits for the background merge
    other = client.index("products")          # another index of the same server

Vectors travel as ``.npy`` bodies and results come back as raw arrays (``float32`` distances,
``uint64`` ids, :data:`trawl.MISSING_ID` / ``inf`` where fewer than k results exist); only
per-query filters and attributes go as JSON. Errors raise the classes of
:mod:`trawl.errors` (a refused value :class:`~trawl.errors.InvalidInputError`, an unknown
index :class:`~trawl.errors.IndexNotFoundError`, ...), plus :class:`AuthError` (401, 403) and
:class:`ServerBusyError` (429, 503, 408: retry after ``retry_after`` seconds) and
:class:`ServerUnreachableError` (no answer: refused, reset, TLS, timeout). Only the
standard library and numpy are used.
"""

import http.client
import io
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import errors

MISSING_ID = np.uint64(2**64 - 1)

_DTYPES = {"f32": np.float32, "u8": np.uint8, "i8": np.int8}


class AuthError(errors.Error, PermissionError):
    """The server refused the API key: none or an unknown one (401), or a read key on a
    write (403)."""

    status = 401


class ServerBusyError(errors.Error):
    """The server is overloaded (429), not ready or stopping (503), or the request took
    longer than its limit (408); ``retry_after`` is the seconds it asks to wait, if it said."""

    status = 429
    retry_after: Optional[float] = None


class ServerUnreachableError(errors.Error, ConnectionError):
    """The server could not be reached (refused, reset, a TLS failure, a timeout)."""


_CODES = {
    "invalid_input": errors.InvalidInputError,
    "too_large": errors.InvalidInputError,
    "unsupported_media_type": errors.InvalidInputError,
    "method_not_allowed": errors.InvalidInputError,
    "merge_running": errors.InvalidInputError,
    "not_found": errors.IndexNotFoundError,
    "corrupt": errors.CorruptIndexError,
    "storage": errors.StorageError,
    "internal": errors.InternalError,
    "unauthorized": AuthError,
    "forbidden": AuthError,
    "overloaded": ServerBusyError,
    "unavailable": ServerBusyError,
    "timeout": ServerBusyError,
    "cancelled": ServerBusyError,
}


def _error(status: int, body: bytes, headers: Any) -> errors.Error:
    try:
        e = json.loads(body)["error"]
        code, message = e["code"], e["message"]
    except (ValueError, KeyError, TypeError):
        code, message = "internal", body.decode("utf-8", "replace") or f"HTTP {status}"
    cls = _CODES.get(code, errors.Error)
    err = cls(f"{message} (HTTP {status}, request {headers.get('x-request-id', '?')})")
    err.status = status  # type: ignore[attr-defined]
    err.code = code  # type: ignore[attr-defined]
    retry = headers.get("retry-after")
    if retry is not None:
        try:
            err.retry_after = float(retry)  # type: ignore[attr-defined]
        except ValueError:
            pass
    return err


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _params(params: Any) -> Dict[str, Any]:
    """A ``SearchParams`` (its fields that differ from the defaults) or a dict, as the
    server's named parameters."""
    if params is None:
        return {}
    if isinstance(params, dict):
        return dict(params)
    from . import SearchParams

    default = SearchParams()
    out = {}
    for name in dir(default):
        if name.startswith("_"):
            continue
        value = getattr(params, name)
        if callable(value):
            continue
        if value != getattr(default, name):
            out[name] = value
    return out


def _column(values: Any) -> List[Any]:
    """An attribute column as JSON values (masked or NaN entries: null)."""
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values)
        return [None if m else v.item() for v, m in zip(values.data, mask)]
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return [None if np.isnan(v) else float(v) for v in arr]
    if arr.dtype.kind in "iub":
        return arr.tolist()
    return [None if v is None else v for v in list(values)]


class Client:
    """A connection to one index of a ``trawl serve`` server.

    ``url``: ``http://host:port`` (or ``https://``); ``api_key``: sent as ``Authorization:
    Bearer``; ``index``: the index's name (``None``: the server's only index; an error if it
    serves several); ``timeout``: seconds per request; ``cafile`` / ``ssl_context``: TLS trust
    for a server whose certificate is not in the system's store; ``retries``: times a request
    refused with 429 (queue full) or 503 (index opening) is sent again after the server's
    ``Retry-After`` (safe for writes too: a refused request changed nothing), then
    :class:`ServerBusyError`."""

    def __init__(
        self,
        url: str,
        api_key: Optional[str] = None,
        *,
        index: Optional[str] = None,
        timeout: float = 60.0,
        cafile: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        retries: int = 3,
    ) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        if ssl_context is None and cafile is not None:
            ssl_context = ssl.create_default_context(cafile=cafile)
        self._ssl = ssl_context
        if index is None:
            names = [i["name"] for i in self.indexes()]
            if len(names) != 1:
                raise errors.InvalidInputError(
                    f"the server serves {len(names)} indexes ({', '.join(names)}): "
                    "give index=NAME"
                )
            index = names[0]
        self.name = index
        self._meta: Optional[Dict[str, Any]] = None

    # ---- transport ----

    def _request(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        content_type: str = "application/json",
        query: Optional[Dict[str, Any]] = None,
        accept: Optional[str] = None,
    ) -> Tuple[bytes, Any]:
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(
                {k: (json.dumps(v) if isinstance(v, (dict, list)) else _text(v)) for k, v in query.items()}
            )
        req = urllib.request.Request(url, data=body, method=method)
        if body is not None:
            req.add_header("Content-Type", content_type)
        if accept:
            req.add_header("Accept", accept)
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        for attempt in range(max(0, self.retries) + 1):
            try:
                with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as r:
                    return r.read(), r.headers
            except urllib.error.HTTPError as e:
                err = _error(e.code, e.read(), e.headers)
                if e.code in (429, 503) and attempt < self.retries:
                    time.sleep(min(float(getattr(err, "retry_after", 1.0) or 1.0), 30.0))
                    continue
                raise err from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", e)
                raise ServerUnreachableError(f"{self.url}: {reason}") from e
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _json(self, method: str, path: str, payload: Any = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        data, _ = self._request(method, path, body)
        return json.loads(data)

    def _path(self, what: str = "") -> str:
        return f"/indexes/{urllib.parse.quote(self.name)}" + (f"/{what}" if what else "")

    # ---- description ----

    def indexes(self) -> List[Dict[str, Any]]:
        """Every index the server serves, in brief."""
        return self._json("GET", "/indexes")["indexes"]

    def index(self, name: str) -> "Client":
        """A client of another index of the same server."""
        c = Client.__new__(Client)
        c.url, c.api_key, c.timeout, c._ssl = self.url, self.api_key, self.timeout, self._ssl
        c.retries = self.retries
        c.name, c._meta = name, None
        return c

    def info(self) -> Dict[str, Any]:
        """The index's description (``trawl info --json``), with its memory, disk, delta and
        last merge."""
        return self._json("GET", self._path())

    def _brief(self) -> Dict[str, Any]:
        if self._meta is None:
            self._meta = self.info()
        return self._meta

    @property
    def dim(self) -> int:
        return int(self._brief()["dim"])

    @property
    def dtype(self) -> str:
        return str(self._brief()["dtype"])

    @property
    def metric(self) -> str:
        return str(self._brief()["metric"])

    @property
    def kind(self) -> str:
        return str(self._brief()["kind"])

    @property
    def n(self) -> int:
        """Live vectors now (asks the server)."""
        return int(self.info()["n"])

    def __len__(self) -> int:
        return self.n

    def healthy(self) -> bool:
        """Whether the server answers ``/readyz`` with 200."""
        try:
            self._request("GET", "/readyz")
            return True
        except errors.Error:
            return False

    # ---- search ----

    def _queries(self, x: Any, two_d: bool) -> np.ndarray:
        a = np.asarray(x)
        want = _DTYPES[self.dtype]
        if a.dtype != want:
            if a.dtype.kind == "f" and want == np.float32:
                a = a.astype(np.float32)
            else:
                raise errors.InvalidInputError(
                    f"vectors of {a.dtype} for an index of {np.dtype(want)}"
                )
        if two_d and a.ndim != 2:
            raise errors.InvalidInputError(f"queries must be a 2-D array, not {a.ndim}-D")
        if not two_d and a.ndim != 1:
            raise errors.InvalidInputError(f"query must be a 1-D vector, not {a.ndim}-D")
        return a

    def _search(self, a: np.ndarray, k: int, params: Any, filter: Any, filter_plan: str):
        query: Dict[str, Any] = {"k": k, **_params(params)}
        if filter_plan != "auto":
            query["filter_plan"] = filter_plan
        per_query = isinstance(filter, (list, tuple))
        if per_query:
            payload = {"vectors": a.tolist(), "k": k, "params": _params(params),
                       "filter": list(filter)}
            if filter_plan != "auto":
                payload["filter_plan"] = filter_plan
            data, headers = self._request(
                "POST", self._path("search"), json.dumps(payload).encode(),
                accept="application/octet-stream")
        else:
            if filter is not None:
                query["filter"] = filter
            data, headers = self._request(
                "POST", self._path("search"), _npy(a), "application/x-npy", query,
                accept="application/octet-stream")
        nq, kk = (int(x) for x in headers["x-trawl-shape"].split(","))
        ids = np.frombuffer(data, dtype="<u8", count=nq * kk).reshape(nq, kk)
        dists = np.frombuffer(data, dtype="<f4", offset=nq * kk * 8, count=nq * kk).reshape(nq, kk)
        return ids.astype(np.uint64), dists.astype(np.float32)

    def search(self, query: Any, k: int = 10, params: Any = None, *, filter: Any = None,
               filter_plan: str = "auto") -> Tuple[np.ndarray, np.ndarray]:
        """The k nearest neighbours of one 1-D query: (uint64 ids, float32 distances)."""
        a = self._queries(query, False)
        ids, dists = self._search(a[None, :], k, params, filter, filter_plan)
        return ids[0], dists[0]

    def batch_search(self, queries: Any, k: int = 10, params: Any = None, threads: int = 0, *,
                     filter: Any = None, filter_plan: str = "auto") -> Tuple[np.ndarray, np.ndarray]:
        """Every row of a 2-D array: (nq, k) uint64 ids and float32 distances. ``threads`` is
        the server's (``--search-threads``) and is not sent; ``filter``: one for all, or a
        list of one per query."""
        a = self._queries(queries, True)
        if isinstance(filter, (list, tuple)) and len(filter) != len(a):
            raise errors.InvalidInputError(
                f"{len(filter)} filters for {len(a)} queries (one per query)")
        return self._search(a, k, params, filter, filter_plan)

    # ---- writes ----

    def _write(self, what: str, vectors: Any, ids: Any, labels: Any, attrs: Any) -> np.ndarray:
        a = np.asarray(vectors)
        if a.ndim == 1:
            a = a[None, :]
        a = self._queries(a, True)
        id_list = None if ids is None else [int(i) for i in np.asarray(ids).reshape(-1)]
        if labels is None and attrs is None:
            query = {} if id_list is None else {"ids": ",".join(map(str, id_list))}
            data, _ = self._request("POST", self._path(what), _npy(a), "application/x-npy", query)
        else:
            payload: Dict[str, Any] = {"vectors": a.tolist()}
            if id_list is not None:
                payload["ids"] = id_list
            if labels is not None:
                payload["labels"] = [list(map(str, l)) if not isinstance(l, str) else [l]
                                     for l in labels]
            if attrs is not None:
                payload["attrs"] = {name: _column(col) for name, col in attrs.items()}
            data, _ = self._request("POST", self._path(what), json.dumps(payload).encode())
        return np.asarray(json.loads(data)["ids"], dtype=np.uint64)

    def insert(self, vectors: Any, ids: Any = None, *, labels: Any = None,
               attrs: Optional[Dict[str, Any]] = None) -> np.ndarray:
        """Inserts vectors (2-D, or one 1-D vector) under ``ids`` (None: assigned); returns the
        ids once the server's log holds them."""
        return self._write("insert", vectors, ids, labels, attrs)

    def upsert(self, ids: Any, vectors: Any, *, labels: Any = None,
               attrs: Optional[Dict[str, Any]] = None) -> None:
        """Inserts or replaces the vectors of ``ids`` (one operation)."""
        self._write("upsert", vectors, ids, labels, attrs)

    def delete(self, ids: Any) -> int:
        """Deletes ``ids`` (each present and given once, else nothing); returns how many."""
        id_list = [int(i) for i in np.asarray(ids).reshape(-1)]
        return int(self._json("POST", self._path("delete"), {"ids": id_list})["deleted"])

    def contains(self, ids: Any) -> np.ndarray:
        """Whether a search can return each id now."""
        id_list = [int(i) for i in np.asarray(ids).reshape(-1)]
        return np.asarray(self._json("POST", self._path("contains"), {"ids": id_list})["present"],
                          dtype=bool)

    def flush(self) -> None:
        """Syncs the server's write-ahead log (a no-op with its default durability)."""
        self._json("POST", self._path("flush"), {})

    def merge(self, threads: int = 0, progress: bool = False, *, wait: bool = True,
              poll: float = 0.1) -> Dict[str, Any]:
        """Starts a merge on the server (searches and writes go on) and, with ``wait``,
        returns its report once done (``progress`` is not used: see :meth:`merge_status`)."""
        status = self._json("POST", self._path("merge"), {"threads": int(threads)})["merge"]
        if not wait:
            return status
        while True:
            s = self.merge_status()
            if s.get("state") == "done" and s.get("id") == status.get("id"):
                return s["report"]
            if s.get("state") == "failed":
                raise errors.Error(f"the merge failed: {s.get('error')}")
            time.sleep(poll)

    def merge_status(self) -> Dict[str, Any]:
        """The last merge: ``{"state": "idle" | "running" | "done" | "failed", ...}``."""
        return self._json("GET", self._path("merge"))["merge"]

    def verify(self) -> Dict[str, Any]:
        """Has the server read every file of the index whole and check it."""
        return self._json("POST", self._path("verify"), {})

    def __repr__(self) -> str:
        return f"Client({self.url!r}, index={self.name!r})"


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


__all__ = ["Client", "AuthError", "ServerBusyError", "ServerUnreachableError", "MISSING_ID"]
