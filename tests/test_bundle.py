"""The JSON bundle encoder's refusals and the atomic publish: a refused or failed bundle
writes nothing and leaves the previous bundle intact."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from notarius_dagster.engine.bundle import (
    JSON_MEDIA_TYPE,
    LogicalFile,
    encode_bundle,
    lane_files,
    publish_bundle,
)
from notarius_dagster.engine.errors import OutputError


def good_files(marker: str) -> list[LogicalFile]:
    return [
        LogicalFile("index.json", JSON_MEDIA_TYPE, {"run": marker}),
        LogicalFile("lanes/npcs.json", JSON_MEDIA_TYPE, {"npcs": [marker]}),
    ]


def read(root: Path, rel: str) -> dict:
    return json.loads((root / "s1" / rel).read_text())


@pytest.fixture
def published(tmp_path: Path) -> Path:
    publish_bundle(tmp_path, "s1", encode_bundle(good_files("first")))
    return tmp_path


def test_publish_writes_pretty_json_readable_under_session_folder(published: Path) -> None:
    assert read(published, "index.json") == {"run": "first"}
    assert "\n  " in (published / "s1" / "lanes" / "npcs.json").read_text()


def test_republish_replaces_the_whole_bundle(published: Path) -> None:
    publish_bundle(
        published,
        "s1",
        encode_bundle([LogicalFile("index.json", JSON_MEDIA_TYPE, {"run": "second"})]),
    )
    assert read(published, "index.json") == {"run": "second"}
    assert not (published / "s1" / "lanes").exists()  # never a mix of two runs


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (LogicalFile("lanes/npcs.csv", "text/csv", "a,b"), "unsupported media type"),
        (LogicalFile("lanes/x.json", JSON_MEDIA_TYPE, {"v": float("nan")}), "not valid JSON"),
        (LogicalFile("lanes/x.json", JSON_MEDIA_TYPE, {"v": b"bytes"}), "not valid JSON"),
        (LogicalFile("../escape.json", JSON_MEDIA_TYPE, {}), "unsafe logical path"),
        (LogicalFile("/abs.json", JSON_MEDIA_TYPE, {}), "unsafe logical path"),
        (LogicalFile("lanes\\x.json", JSON_MEDIA_TYPE, {}), "unsafe logical path"),
    ],
)
def test_encoder_refusal_writes_nothing_and_keeps_previous(
    published: Path, bad: LogicalFile, message: str
) -> None:
    before = sorted(p.relative_to(published) for p in published.rglob("*"))
    with pytest.raises(OutputError, match=message):
        publish_bundle(published, "s1", encode_bundle([*good_files("second"), bad]))
    assert sorted(p.relative_to(published) for p in published.rglob("*")) == before
    assert read(published, "index.json") == {"run": "first"}
    assert not (published / "escape.json").exists()


def test_duplicate_sanitized_lane_file_names_are_refused(published: Path) -> None:
    with pytest.raises(OutputError, match="share the output file name"):
        lane_files([("npcs", {}), ("NPCs", {})])
    assert read(published, "index.json") == {"run": "first"}


def test_failure_during_publish_leaves_previous_bundle(published: Path) -> None:
    real_replace = __import__("os").replace

    def failing_replace(src: object, dst: object) -> None:
        if str(dst).endswith("/s1"):
            raise OSError("disk gone")
        real_replace(src, dst)

    with (
        mock.patch("notarius_dagster.engine.bundle.os.replace", failing_replace),
        pytest.raises(OSError),
    ):
        publish_bundle(published, "s1", encode_bundle(good_files("second")))
    assert read(published, "index.json") == {"run": "first"}
    assert read(published, "lanes/npcs.json") == {"npcs": ["first"]}


def test_a_real_folder_in_the_way_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / "mine.txt").write_text("keep")
    with pytest.raises(OutputError, match="not managed"):
        publish_bundle(tmp_path, "s1", encode_bundle(good_files("x")))
    assert (tmp_path / "s1" / "mine.txt").read_text() == "keep"
