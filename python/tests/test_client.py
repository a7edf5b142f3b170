"""trawl.Client against the real `trawl serve` process: the same answers as trawl.Index, the
writes, filters, errors as trawl's exception classes, API keys, and a TLS round trip."""

import subprocess
from pathlib import Path

import numpy as np
import pytest

import trawl
from conftest import FAST, gaussian, trawl_cli

TLS = Path(__file__).parent / "data" / "tls"
WRITE_KEY = "wwwwwwwwwwwwwwwwwwww"
READ_KEY = "rrrrrrrrrrrrrrrrrrrr"


class Server:
    """`trawl serve ARGS --listen 127.0.0.1:0`, stopped with SIGTERM."""

    def __init__(self, args, log):
        self.log = log
        self.proc = subprocess.Popen(
            [str(trawl_cli()), "serve", *map(str, args), "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=open(log, "w"),
            text=True,
        )
        line = self.proc.stdout.readline()
        if "://" not in line:
            self.proc.kill()
            raise RuntimeError(f"trawl serve did not start: {line!r} {Path(log).read_text()}")
        self.url = line.split()[2]

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=60) == 0, Path(self.log).read_text()


def wait_ready(client):
    import time

    for _ in range(500):
        if client.healthy():
            return
        time.sleep(0.02)
    raise AssertionError("the server never became ready")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    data = gaussian(3000, 32, seed=11)
    labels = [["even"] if i % 2 == 0 else ["odd"] for i in range(len(data))]
    years = np.arange(len(data)) % 50 + 1980
    trawl.build(data, root / "ix", trawl.BuildParams(threads=1, **FAST), labels=labels,
                attrs={"year": years})
    keys = root / "keys"
    keys.write_text(f"read:{READ_KEY}\nwrite:{WRITE_KEY}\n")
    s = Server([f"ix={root / 'ix'}", "--api-keys", keys], root / "log")
    c = trawl.Client(s.url, api_key=WRITE_KEY)
    wait_ready(c)
    yield s, c, root, data
    s.stop()


def test_the_client_answers_as_the_index_does(served):
    s, c, root, data = served
    queries = gaussian(20, 32, seed=12)
    params = trawl.SearchParams(L=48, beam_width=2)
    ids, dists = c.batch_search(queries, k=7, params=params)
    with trawl.Index.open(root / "ix") as ix:
        want_ids, want_dists = ix.batch_search(queries, k=7, params=params)
    assert ids.dtype == np.uint64 and dists.dtype == np.float32
    assert ids.shape == (20, 7)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(dists, want_dists, rtol=1e-6)
    one, d1 = c.search(queries[0], k=7, params=params)
    np.testing.assert_array_equal(one, want_ids[0])
    # A dict of parameters is the same as SearchParams.
    ids2, _ = c.batch_search(queries, k=7, params={"L": 48, "beam_width": 2})
    np.testing.assert_array_equal(ids2, ids)
    assert c.dim == 32 and c.dtype == "f32" and c.metric == "l2" and c.kind == "graph"
    info = c.info()
    assert info["info"]["n"] == len(data)


def test_filters_travel_in_every_form(served):
    s, c, root, data = served
    q = gaussian(4, 32, seed=13)
    ids, _ = c.batch_search(q, k=5, filter='label = "odd" AND year >= 2000')
    assert all(i % 2 == 1 and (i % 50 + 1980) >= 2000 for i in ids.ravel())
    ids, _ = c.batch_search(q, k=5, filter={"label": "even"})
    assert all(i % 2 == 0 for i in ids.ravel())
    ids, _ = c.batch_search(q, k=5, filter=['label = "even"', None, {"label": "odd"}, None])
    assert all(i % 2 == 0 for i in ids[0]) and all(i % 2 == 1 for i in ids[2])
    with pytest.raises(trawl.InvalidInputError, match="filter"):
        c.batch_search(q, k=5, filter="label = ")


def test_writes_merges_and_their_errors(served):
    s, c, root, data = served
    new = gaussian(3, 32, seed=14)
    ids = c.insert(new, labels=[["odd"], ["even"], ["odd"]], attrs={"year": np.array([2030, 2031, 2032])})
    assert ids.dtype == np.uint64 and list(ids) == [3000, 3001, 3002]
    got, d = c.search(new[1], k=1, filter="year = 2031")
    assert got[0] == 3001 and d[0] == 0.0
    more = c.insert(new[:1] + 1, ids=[90_000])
    assert list(more) == [90_000]
    c.upsert([90_000], new[2] + 2)
    got, d = c.search(new[2] + 2, k=1)
    assert got[0] == 90_000 and d[0] == 0.0
    assert c.delete([90_000, 3002]) == 2
    assert list(c.contains([90_000, 3002, 3001, 5])) == [False, False, True, True]
    with pytest.raises(trawl.InvalidInputError, match="already in the index"):
        c.insert(new[:1], ids=[3001])
    with pytest.raises(trawl.InvalidInputError, match="not in the index"):
        c.delete([123456789])
    with pytest.raises(trawl.InvalidInputError, match="dimension"):
        c.insert(np.zeros((1, 5), np.float32))
    report = c.merge(threads=1)
    assert report["inserted"] == 2 and report["deleted"] == 0
    assert c.merge_status()["state"] == "done"
    c.flush()
    assert c.verify()["files"]
    assert len(c) == 3000 + 2


def test_keys_scopes_and_unknown_indexes_raise_their_classes(served):
    s, c, root, data = served
    q = gaussian(1, 32, seed=15)
    with pytest.raises(trawl.AuthError, match="API key is required"):
        trawl.Client(s.url, index="ix").search(q[0])
    reader = trawl.Client(s.url, api_key=READ_KEY)
    reader.search(q[0])
    with pytest.raises(trawl.AuthError, match="needs write") as e:
        reader.insert(q)
    assert e.value.status == 403
    with pytest.raises(trawl.IndexNotFoundError, match="no index named"):
        c.index("nope").search(q[0])


def test_a_tls_round_trip_with_a_test_certificate(tmp_path):
    data = gaussian(500, 16, seed=16)
    trawl.build(data, tmp_path / "ix", trawl.BuildParams(threads=1, **FAST))
    s = Server([tmp_path / "ix", "--tls-cert", TLS / "cert.pem", "--tls-key", TLS / "key.pem"],
               tmp_path / "log")
    try:
        assert s.url.startswith("https://127.0.0.1:")
        c = trawl.Client(s.url, cafile=str(TLS / "ca.pem"))
        wait_ready(c)
        ids, _ = c.search(data[3], k=1)
        assert ids[0] == 3
        # Without the CA the certificate is refused.
        with pytest.raises(trawl.ServerUnreachableError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            trawl.Client(s.url)
        # Plain HTTP to a TLS port is no answer either.
        with pytest.raises(trawl.ServerUnreachableError):
            trawl.Client(s.url.replace("https", "http"), timeout=5)
    finally:
        s.stop()


def test_a_full_queue_is_retried_after_retry_after_then_raised(tmp_path):
    import threading

    data = gaussian(2000, 16, seed=17)
    trawl.build(data, tmp_path / "ix", trawl.BuildParams(threads=1, **FAST))
    # One search thread, one request waiting at most, every read 3 ms: a burst overflows it.
    s = Server([tmp_path / "ix", "--search-threads", "1", "--queue", "1", "--engine", "sim:3000"],
               tmp_path / "log")
    try:
        c = trawl.Client(s.url, retries=0)
        wait_ready(c)
        q = gaussian(8, 16, seed=18)
        errors_seen, answers = [], []

        def one(client):
            try:
                answers.append(client.batch_search(q, k=3))
            except trawl.ServerBusyError as e:
                errors_seen.append(e)

        ts = [threading.Thread(target=one, args=(c,)) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors_seen and answers
        assert all(e.status == 429 and e.retry_after >= 1 for e in errors_seen)
        # With retries, every request is answered in the end.
        patient = trawl.Client(s.url, retries=5)
        answers.clear()
        ts = [threading.Thread(target=one, args=(patient,)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(answers) == 4
    finally:
        s.stop()
