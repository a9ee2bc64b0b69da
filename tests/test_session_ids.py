"""Session ids: the rule, its error messages, and derivation from file names."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notarius_dagster.engine.errors import SessionIdError
from notarius_dagster.engine.session_ids import (
    SESSION_ID_PATTERN,
    session_id_from_filename,
    validate_session_id,
)


@pytest.mark.parametrize("value", ["a", "0", "session-042", "crd3_c2e001", "a" * 64, "9-_x"])
def test_valid_session_ids_are_returned_unchanged(value: str) -> None:
    assert validate_session_id(value) == value


@pytest.mark.parametrize(
    "value",
    ["Session", "session 42", "a" * 65, "-leading-dash", "_leading-underscore", "", "café"],
)
def test_invalid_session_ids_are_rejected(value: str) -> None:
    with pytest.raises(SessionIdError):
        validate_session_id(value)


def test_trailing_newline_does_not_sneak_past_the_rule() -> None:
    with pytest.raises(SessionIdError):
        validate_session_id("session\n")


def test_rejection_states_the_rule_and_shows_the_id() -> None:
    with pytest.raises(SessionIdError) as caught:
        validate_session_id("Bad Id")
    message = str(caught.value)
    assert SESSION_ID_PATTERN in message
    assert "'Bad Id'" in message


def test_rejection_truncates_a_long_id_to_80_characters() -> None:
    value = "x" * 70 + "Y" * 500
    with pytest.raises(SessionIdError) as caught:
        validate_session_id(value)
    message = str(caught.value)
    assert "x" * 70 + "Y" * 10 in message
    assert "Y" * 11 not in message


def test_non_string_id_is_rejected_with_session_id_error() -> None:
    with pytest.raises(SessionIdError):
        validate_session_id(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("file_name", "expected"),
    [
        ("Session 042.jsonl", "session-042"),
        ("crd3-c2e001.jsonl", "crd3-c2e001"),
        ("/some/dir/The  Sea Hag!!.vtt", "the-sea-hag"),
        ("C:\\Users\\dm\\Game Night #3.srt", "game-night-3"),
        ("__draft__.txt", "draft__"),
        ("notes", "notes"),
        ("archive.tar.gz", "archive-tar"),
    ],
)
def test_session_id_is_derived_from_the_file_stem(file_name: str, expected: str) -> None:
    assert session_id_from_filename(file_name) == expected


def test_derived_id_is_truncated_to_64_characters_without_a_trailing_dash() -> None:
    derived = session_id_from_filename("a" * 63 + " b" + "c" * 10 + ".jsonl")
    assert derived == "a" * 63
    assert len(session_id_from_filename("z" * 200 + ".txt")) == 64


@pytest.mark.parametrize("file_name", ["!!!.jsonl", "....jsonl", "---.txt", "日本語.vtt"])
def test_derivation_fails_when_no_letters_or_digits_remain(file_name: str) -> None:
    with pytest.raises(SessionIdError):
        session_id_from_filename(file_name)


@given(st.text(max_size=120))
def test_derivation_is_deterministic_and_always_valid(file_name: str) -> None:
    try:
        first = session_id_from_filename(file_name)
    except SessionIdError:
        with pytest.raises(SessionIdError):
            session_id_from_filename(file_name)
        return
    assert session_id_from_filename(file_name) == first
    assert re.fullmatch(SESSION_ID_PATTERN, first)
