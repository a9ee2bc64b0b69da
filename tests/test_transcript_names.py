"""Errors about a transcript name the user's file, not the store's copy, whichever way it was
registered (`notarius run` or the inbox), and a second file whose name derives an id another
file already has is told apart from it (engine/transcripts.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from notarius_dagster.engine.errors import InputError, SessionIdError
from notarius_dagster.engine.resolution import resolve_profile_file
from notarius_dagster.engine.session_steps import RunPipeline, load_source_document
from notarius_dagster.engine.transcripts import (
    check_same_source,
    original_name,
    register_transcript,
    remove_transcript,
)
from notarius_dagster.inbox import InboxTranscript, register_content
from notarius_dagster.modules import registry

REPO = Path(__file__).resolve().parent.parent
BAD = b'{"speaker": "DM", "text": "fine"}\n{"speaker": "DM", "text": 7}\n'


def plan() -> RunPipeline:
    return RunPipeline(
        resolve_profile_file(
            REPO / "configs" / "offline.yaml", llm_profile="test-double", registry=registry()
        ),
        registry(),
    )


def test_a_parse_error_names_the_file_the_user_registered(tmp_path: Path) -> None:
    source = tmp_path / "Session 12 (final).jsonl"
    source.write_bytes(BAD)
    register_transcript(tmp_path / "store", "session-12-final", source)
    with pytest.raises(InputError, match=r"Session 12 \(final\)\.jsonl line 2") as caught:
        load_source_document(plan(), transcripts=tmp_path / "store", session_id="session-12-final")
    assert "session-12-final.jsonl" not in str(caught.value)


def test_the_inbox_records_the_dropped_files_name(tmp_path: Path) -> None:
    store = tmp_path / "store"
    register_content(
        store,
        InboxTranscript(
            name="Night Two.jsonl",
            session_id="night-two",
            content=BAD,
            sha256=hashlib.sha256(BAD).hexdigest(),
        ),
    )
    assert original_name(store, "night-two") == "Night Two.jsonl"
    with pytest.raises(InputError, match=r"Night Two\.jsonl line 2"):
        load_source_document(plan(), transcripts=store, session_id="night-two")


def test_another_file_for_a_taken_derived_id_is_refused_and_the_same_one_is_not(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    first = tmp_path / "a.jsonl"
    first.write_bytes(BAD)
    register_transcript(store, "x", first)
    check_same_source(store, "x", "a.jsonl")
    with pytest.raises(SessionIdError, match=r"'a\.jsonl' and 'A\.jsonl' both give .*--session-id"):
        check_same_source(store, "x", "A.jsonl")
    remove_transcript(store, "x")
    assert list(store.iterdir()) == []
    check_same_source(store, "x", "A.jsonl")
