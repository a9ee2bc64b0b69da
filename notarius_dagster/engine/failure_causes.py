"""What went wrong, said without content: the cause of an unexpected failure (disk full, out of
memory, a lost file) as a short phrase a person can act on.

Why: an exception the code did not raise on purpose reaches the user through Dagster as
`Error occurred while executing op ...:` with nothing after it, and an `OSError`'s own text
carries a filesystem path. This names the cause (the errno's meaning and symbol, MemoryError)
and at most the base name of the file involved, never its path nor any content."""

from __future__ import annotations

import errno
import os
from pathlib import PurePath


def cause_of(exc: BaseException) -> str:
    """`no space left on device (ENOSPC)`, `out of memory (MemoryError)`, or the class name."""
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError)"
    if isinstance(exc, OSError) and exc.errno:
        symbol = errno.errorcode.get(exc.errno, f"errno {exc.errno}")
        text = f"{os.strerror(exc.errno).lower()} ({symbol})"
        if exc.filename:
            text = f"{text} at {PurePath(os.fsdecode(exc.filename)).name!r}"
        return text
    return type(exc).__name__
