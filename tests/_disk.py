"""Small real filesystems for tests of disks that are full or read-only: a tmpfs mounted under the test's tmp_path.

Mounting needs root (or CAP_SYS_ADMIN); where that is not available the test is skipped, never faked.
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, size_kib: int, *, read_only: bool = False) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kib}k" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def fill(folder: Path) -> None:
    """Write zeros into ``folder`` until its filesystem has no space left."""
    with (folder / "filler").open("wb", buffering=0) as handle:
        chunk = bytes(4096)
        while True:
            try:
                handle.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return
