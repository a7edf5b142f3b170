"""Tiny launcher like measure.py, plus the command's /proc/<pid>/io counters.

    python3 -S bench/measure_io.py RESULT.json CMD [ARGS...]

Same as measure.py (fork + exec from a bare interpreter so ru_maxrss starts at ~10 MiB; wall
time and rusage from os.wait4), but it first waits with WNOWAIT so the exited child is still a
zombie and its /proc/<pid>/io can be read: read_bytes = bytes the whole process (all threads)
fetched from the block layer. O_DIRECT reads count there; reads served by the page cache do not,
so it tells whether a search really went to the device. Exit status: the command's.
"""
import json
import os
import sys
import time


def read_io(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                k, v = line.split(":")
                out[k.strip()] = int(v)
    except (OSError, ValueError):
        return None
    return out


def main() -> int:
    out, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    io = None
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        io = read_io(pid)
    except (OSError, AttributeError):
        pass
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    with open(out, "w") as f:
        json.dump({"returncode": rc, "wall_secs": wall, "peak_rss_bytes": ru.ru_maxrss * 1024,
                   "user_secs": ru.ru_utime, "sys_secs": ru.ru_stime, "proc_io": io}, f)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
