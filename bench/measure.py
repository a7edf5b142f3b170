"""Tiny launcher: run a command and write its wall time and rusage as JSON.

    python3 -S bench/measure.py RESULT.json CMD [ARGS...]

Why a separate process: on Linux a child's ru_maxrss starts from the RSS high-water mark of the
process that spawned it (the mm copied by fork, or the parent's own mm under vfork, is folded in at
execve). Spawned straight from a benchmark driver holding hundreds of MiB, a small child would
report the driver's peak. This launcher is a bare interpreter (~10 MiB, started with -S) that
fork()s and exec()s the command, so the floor is ~10 MiB and anything above it is the command's.
Exit status: the command's.
"""
import json
import os
import sys
import time


def main() -> int:
    out, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    with open(out, "w") as f:
        json.dump({"returncode": rc, "wall_secs": wall, "peak_rss_bytes": ru.ru_maxrss * 1024,
                   "user_secs": ru.ru_utime, "sys_secs": ru.ru_stime}, f)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
