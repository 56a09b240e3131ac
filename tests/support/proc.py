"""Readings of processes from /proc: memory, CPU time, and the process tree.

Tests bound what a job costs in CPU seconds of the service's process tree (`CpuMeter`), not
in wall-clock seconds: a loaded machine stretches the wall clock of every job, while the CPU
a job burns stays its own. bench/ measures with the same readings.
"""

from __future__ import annotations

import os
from pathlib import Path


def rss_bytes(pid: int) -> int:
    """VmRSS of `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (field 3, `state`, first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of `pid` and of its children it has waited for, in seconds.

    Not the children still running (nor what they reaped): see `tree_cpu_seconds`.
    """
    utime, stime, cutime, cstime = (int(value) for value in _stat(pid)[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def children_by_parent(*, zombies: bool = True) -> dict[int, list[int]]:
    """Parent pid → the pids of its children, from /proc; zombies too unless told not.

    A zombie still holds its own CPU time until its parent reaps it, so CPU readings keep it.
    """
    by_parent: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):
                continue
            if zombies or fields[0] != "Z":
                by_parent.setdefault(int(fields[1]), []).append(int(entry.name))
    return by_parent


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes whose parent is `pid`."""
    found = []
    for child in children_by_parent(zombies=False).get(pid, []):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # the process ended while we looked
        found.append((child, command))
    return found


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, zombies included."""
    by_parent = children_by_parent()
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(by_parent.get(current, []))
    return tree


def tree_rss_bytes(pid: int) -> int:
    """VmRSS of `pid` plus that of all its descendants (pages they share count twice)."""
    total = 0
    for member in _tree(pid):
        try:
            total += rss_bytes(member)
        except (FileNotFoundError, ProcessLookupError, RuntimeError):  # gone, or a zombie
            continue
    return total


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of `pid` and of every live descendant, each with the children it reaped.

    `cpu_seconds(pid)` alone misses the parsing: uploads are parsed in grandchildren forked
    by fork servers (`docingest.pipeline.isolation`) that outlive them, so their time lands in a
    fork server's reaped-children count (cutime, cstime), which reaches serve's only when that
    fork server exits and is reaped. A process that exits between two readings is counted
    once: in its own reading before, in its reaper's after.
    """
    total = 0.0
    for member in _tree(pid):
        try:
            total += cpu_seconds(member)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


class CpuMeter:
    """The CPU seconds a process tree uses while the block runs (`seconds` after it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> CpuMeter:
        self._start = tree_cpu_seconds(self.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = tree_cpu_seconds(self.pid) - self._start
