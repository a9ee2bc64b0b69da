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

from pydantic import ValidationError


def cause_of(exc: BaseException, *, name: bool = True) -> str:
    """`no space left on device (ENOSPC)`, `out of memory (MemoryError)`, or the class name;
    with `name`, an OSError's file is named by its base name (`... at 'x.json'`)."""
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError)"
    if isinstance(exc, OSError) and exc.errno:
        symbol = errno.errorcode.get(exc.errno, f"errno {exc.errno}")
        text = f"{os.strerror(exc.errno).lower()} ({symbol})"
        if name and exc.filename:
            text = f"{text} at {PurePath(os.fsdecode(exc.filename)).name!r}"
        return text
    return type(exc).__name__


def validation_problems(exc: ValidationError, limit: int = 5) -> str:
    """A pydantic error as field paths and rules (`npcs.0.name: string_type`), never the input:
    `str(exc)` quotes the offending value (`input_value=...`), which may be transcript text."""
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['type']}"
        for e in exc.errors(include_url=False, include_input=False, include_context=False)
    ]
    shown = "; ".join(problems[:limit])
    return shown + (f"; and {len(problems) - limit} more" if len(problems) > limit else "")
