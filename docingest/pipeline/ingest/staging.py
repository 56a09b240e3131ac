"""The staging directory's quota: what it holds, and whether an upload still fits.

Uploads stream to `staging/<job_id>` (`docingest/api/upload.py`) and stay there until their job
completes, or, for a failed or cancelled job, for `staging_failed_ttl_hours` (the sweep,
`docingest.pipeline.ingest.sweep`). Two bounds keep the disk from filling: the directory's own quota
(`staging_quota_bytes`) and a floor of free space on its disk (`staging_min_free_bytes`).
Both are checked by reading the directory, so API replicas sharing one staging volume see
each other's uploads, partial ones included at their current size; an upload checks again
every `CHECK_EVERY_BYTES` it writes, so concurrent uploads overshoot the quota by at most
that much each.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from docingest.pipeline.errors import StagingFull
from docingest.pipeline.settings import Settings

CHECK_EVERY_BYTES = 8 * 2**20
"""How often (in bytes written) a streaming upload checks the quota again."""


@dataclass(frozen=True, slots=True)
class StagingUsage:
    """What the staging directory holds now."""

    files: int
    bytes: int


def staging_usage(staging: Path) -> StagingUsage:
    """Count the staging directory's files and their bytes (0 and 0 if it does not exist)."""
    files = size = 0
    try:
        entries = list(os.scandir(staging))
    except FileNotFoundError:
        return StagingUsage(0, 0)
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                files += 1
                size += entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:  # deleted meanwhile
            continue
    return StagingUsage(files, size)


def _existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (the disk it will be on)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_room(settings: Settings, *, more_bytes: int = 0) -> None:
    """Raise `StagingFull` unless the staging directory can take `more_bytes` beyond what it
    holds (the bytes of an upload not yet written, when known), within its quota and its
    disk's free-space floor."""
    staging = settings.staging_dir
    used = staging_usage(staging).bytes
    quota = settings.staging_quota_bytes
    if used + more_bytes > quota:
        raise StagingFull(
            f"The staging area is full ({used:,} of its {quota:,} bytes hold uploads waiting "
            "for or kept after their jobs); retry once jobs have finished."
        )
    disk = shutil.disk_usage(_existing(staging))
    if disk.free - more_bytes < settings.staging_min_free_bytes:
        raise StagingFull(
            f"The disk of the staging area has {disk.free:,} bytes free, less than the "
            f"{settings.staging_min_free_bytes:,} it must keep; retry later."
        )
