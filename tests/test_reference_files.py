"""Reference files are regular files read at most to their byte limit: a device, a FIFO or a
link to one is refused before anything is read, so `--reference x=/dev/zero` cannot exhaust
memory and a FIFO cannot hang the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from notarius_dagster.engine.errors import InvalidReferenceError
from notarius_dagster.engine.references import prepare_file
from notarius_dagster.engine.resolution import ResolvedBinding


def binding(path: Path | str, max_bytes: int = 200) -> ResolvedBinding:
    return ResolvedBinding(
        slot="glossary",
        target="npcs.extract",
        origin="file",
        source="runtime",
        path=str(path),
        display=Path(path).name,
        max_bytes=max_bytes,
    )


@pytest.mark.timeout(20)
def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(InvalidReferenceError, match="'zero' is not a regular file"):
        prepare_file(binding("/dev/zero", max_bytes=10**9))


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "glossary.txt"
    os.mkfifo(fifo)
    with pytest.raises(InvalidReferenceError, match="'glossary.txt' is not a regular file"):
        prepare_file(binding(fifo))


@pytest.mark.timeout(20)
def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "glossary.txt"
    link.symlink_to("/dev/zero")
    with pytest.raises(InvalidReferenceError, match="'glossary.txt' is not a regular file"):
        prepare_file(binding(link, max_bytes=10**9))


def test_a_link_to_a_regular_file_is_read(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("Vex\n", encoding="utf-8")
    link = tmp_path / "glossary.txt"
    link.symlink_to(target)
    ref, _ = prepare_file(binding(link))
    assert ref.text == "Vex\n"


def test_one_byte_over_the_limit_is_refused_and_the_limit_itself_accepted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "g.txt"
    path.write_bytes(b"x" * 200)
    ref, _ = prepare_file(binding(path))
    assert ref.provenance["bytes"] == 200
    path.write_bytes(b"x" * 201)
    with pytest.raises(InvalidReferenceError, match="'g.txt' is 201 bytes; the slot allows 200"):
        prepare_file(binding(path))


def test_a_file_that_grows_past_the_limit_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size is checked on what was read (at most limit+1 bytes), not only on fstat."""
    path = tmp_path / "g.txt"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    class Small:
        def __init__(self, st: os.stat_result) -> None:
            self._st = st

        def __getattr__(self, name: str) -> object:
            return 10 if name == "st_size" else getattr(self._st, name)

    path.write_bytes(b"x" * 5000)
    monkeypatch.setattr(os, "fstat", lambda fd: Small(real_fstat(fd)))
    with pytest.raises(InvalidReferenceError, match="'g.txt' is over 200 bytes"):
        prepare_file(binding(path))
