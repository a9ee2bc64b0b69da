"""CPU and memory of a command's whole process tree, measured from outside, until the last
process it started has exited.

Why: `notarius run` does its work in other processes (the forkserver, one process per step,
helper interpreters), and some may outlive the command. `os.wait4` on the command alone sees
only the descendants that were reaped before it exited, and its memory is one process's.

How: the benchmark makes itself a child subreaper (Linux `prctl(PR_SET_CHILD_SUBREAPER)`), so
every orphaned descendant is re-parented to it instead of to init. It then
- samples the tree (psutil: every descendant that is not excluded) every `interval` seconds and
  sums each process's proportional set size (`Pss` of `/proc/<pid>/smaps_rollup`: shared pages
  divided among the processes that share them, so forks of one forkserver are not counted many
  times over); the peak of that sum is the tree's memory;
- reaps the command and every orphan with `os.wait4`, whose resource usage includes every
  descendant its process reaped: the sum is the CPU (user + system) of the whole tree, exact;
- records how many descendants were still alive when the command exited and how long the last
  of them lived on.

Linux only (smaps_rollup, prctl); psutil is the `bench` extra of pyproject.toml."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

PR_SET_CHILD_SUBREAPER = 36
LINGER_LIMIT_S = 120.0
"""Descendants still alive this long after the command exited are killed (they were started by
the benchmark's own command) and the figure says so."""


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


@dataclass(frozen=True)
class TreeMeasure:
    returncode: int | None
    exit_s: float | None  # seconds from the start of measuring to the command's exit
    cpu_s: float
    peak_pss_bytes: int
    processes: int
    peak_processes: int
    left_behind: int
    outlived_s: float
    killed: int


def pss_bytes(pid: int) -> int:
    """The process's proportional set size, 0 when it is gone or not readable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def _descendants(exclude: set[int]) -> list[psutil.Process]:
    """Every live descendant of this process, leaving out `exclude` and their descendants."""
    out: list[psutil.Process] = []
    try:
        children = psutil.Process().children(recursive=False)
    except psutil.Error:
        return out
    todo = [c for c in children if c.pid not in exclude]
    while todo:
        proc = todo.pop()
        out.append(proc)
        try:
            todo.extend(c for c in proc.children(recursive=False) if c.pid not in exclude)
        except psutil.Error:
            continue
    return out


def _reap(pid: int) -> tuple[bool, int | None, float]:
    """(exited, exit code, CPU seconds of it and what it reaped) without blocking."""
    try:
        got, status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return True, None, 0.0
    if got == 0:
        return False, None, 0.0
    return True, os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def measure_tree(
    root: int,
    *,
    exclude: Callable[[], Iterable[int]] = lambda: (),
    interval: float = 0.2,
) -> TreeMeasure:
    """Measure the tree under `root` (a child of this process) until it has wholly exited.
    `exclude` names this process's other children (servers the benchmark runs) to leave out."""
    t0 = time.perf_counter()
    cpu = 0.0
    peak_pss = peak_n = left_behind = killed = 0
    seen: set[tuple[int, float]] = set()
    returncode: int | None = None
    exit_s: float | None = None
    while True:
        skip = set(exclude())
        procs = _descendants(skip)
        total = 0
        for proc in procs:
            try:
                seen.add((proc.pid, proc.create_time()))
            except psutil.Error:
                continue
            total += pss_bytes(proc.pid)
        peak_pss = max(peak_pss, total)
        peak_n = max(peak_n, len(procs))
        if exit_s is None:
            done, code, used = _reap(root)
            if done:
                exit_s, returncode, cpu = time.perf_counter() - t0, code, cpu + used
                left_behind = sum(1 for p in _descendants(skip | {root}) if _alive(p))
        # Orphans re-parented to this process (the subreaper): reap those that have exited.
        for child in psutil.Process().children(recursive=False):
            if child.pid in skip or child.pid == root:
                continue
            done, _, used = _reap(child.pid)
            cpu += used
        if exit_s is not None:
            rest = [p for p in _descendants(skip | {root}) if _alive(p)]
            if not rest:
                break
            if time.perf_counter() - t0 - exit_s > LINGER_LIMIT_S:
                for proc in rest:
                    proc.kill()
                killed = len(rest)
        time.sleep(interval)
    outlived = max(0.0, time.perf_counter() - t0 - exit_s) if left_behind else 0.0
    return TreeMeasure(
        returncode=returncode,
        exit_s=exit_s,
        cpu_s=cpu,
        peak_pss_bytes=peak_pss,
        processes=len(seen),
        peak_processes=peak_n,
        left_behind=left_behind,
        outlived_s=outlived,
        killed=killed,
    )


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


if os.name != "posix":  # pragma: no cover - the benchmark's platform is Linux
    raise ImportError("process_tree.py measures Linux process trees")
