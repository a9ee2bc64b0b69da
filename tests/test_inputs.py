"""The input adapter tier: each format's grammar, its content-safe errors, and the document
contract (UTF-8, non-empty, semantic digest)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notarius_dagster.engine.errors import InputError, SessionIdError
from notarius_dagster.engine.inputs import (
    INPUT_FORMATS,
    format_for,
    parse_transcript,
)
from notarius_dagster.engine.models import SourceDocument

# Words that must never show up in an error message: they stand for what players said.
SECRET = "the vault code is swordfish"
REAL_SESSION = (
    Path(__file__).resolve().parent.parent / "data" / "sessions" / "fireball-sea-hag.jsonl"
)


def parse_file(
    tmp_path: Path,
    name: str,
    content: str | bytes,
    *,
    input_format: str | None = None,
    source_id: str = "session-1",
) -> SourceDocument:
    """Write `content` to a real file, read its bytes back and parse them (as the pipeline does)."""
    path = tmp_path / name
    if isinstance(content, str):
        path.write_bytes(content.encode("utf-8"))
    else:
        path.write_bytes(content)
    return parse_transcript(
        path.read_bytes(), file_name=str(path), source_id=source_id, input_format=input_format
    )


def input_error(tmp_path: Path, name: str, content: str | bytes, **kwargs: Any) -> str:
    """Parse content that must fail; return the message after checking it is content-safe."""
    with pytest.raises(InputError) as caught:
        parse_file(tmp_path, name, content, **kwargs)
    message = str(caught.value)
    assert name in message
    assert str(tmp_path) not in message, "errors name the base name, never the directory"
    assert "swordfish" not in message and SECRET not in message
    return message


def jsonl(*rows: dict[str, Any]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


# --- JSON Lines ---------------------------------------------------------------------------


def test_jsonl_reads_text_speaker_times_and_ids(tmp_path: Path) -> None:
    doc = parse_file(
        tmp_path,
        "s.jsonl",
        jsonl(
            {"unit_id": 10, "speaker": "DM", "text": "Roll initiative.", "start": 1, "end": 2.5},
            {"unit_id": 11, "speaker": "Mara", "text": "I go first."},
        ),
    )
    assert doc.source_id == "session-1"
    assert doc.media_type == "application/x-ndjson"
    assert [u.unit_id for u in doc.units] == [10, 11]
    assert [u.kind for u in doc.units] == ["utterance", "utterance"]
    assert doc.units[0].text == "Roll initiative."
    assert doc.units[0].metadata == {"speaker": "DM", "start": 1.0, "end": 2.5}
    assert doc.units[1].metadata == {"speaker": "Mara"}


def test_jsonl_keeps_other_keys_in_metadata(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.jsonl", jsonl({"text": "Hi", "channel": "ooc", "tags": ["a", 1]}))
    assert doc.units[0].metadata == {"channel": "ooc", "tags": ["a", 1]}


def test_jsonl_defaults_unit_ids_to_position_among_units(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.jsonl", '{"text": "a"}\n\n{"text": "b"}\n{"text": "c"}\n')
    assert [u.unit_id for u in doc.units] == [0, 1, 2]


def test_jsonl_preserves_non_monotonic_ids_in_file_order(tmp_path: Path) -> None:
    doc = parse_file(
        tmp_path,
        "s.jsonl",
        jsonl(
            {"unit_id": 7, "text": "a"}, {"unit_id": 3, "text": "b"}, {"unit_id": 5, "text": "c"}
        ),
    )
    assert [u.unit_id for u in doc.units] == [7, 3, 5]
    assert [u.text for u in doc.units] == ["a", "b", "c"]
    assert doc.position_index() == {7: 0, 3: 1, 5: 2}


def test_jsonl_invalid_json_names_file_and_physical_line(tmp_path: Path) -> None:
    content = jsonl({"text": "fine"}) + "\n" + '{"text": "' + SECRET + '",}\n'
    message = input_error(tmp_path, "bad.jsonl", content)
    assert "bad.jsonl line 3:" in message
    assert "invalid JSON" in message


def test_jsonl_line_that_is_not_an_object_is_rejected(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.jsonl", jsonl({"text": "ok"}) + json.dumps([SECRET]))
    assert "bad.jsonl line 2:" in message
    assert "expected a JSON object, got array" in message


def test_jsonl_text_is_required(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.jsonl", jsonl({"speaker": "DM", "note": SECRET}))
    assert "bad.jsonl line 1:" in message
    assert "'text' is required" in message


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"text": 5}, "key 'text' must be a string, got number"),
        ({"text": "x", "speaker": [SECRET]}, "key 'speaker' must be a string, got array"),
        ({"text": "x", "unit_id": SECRET}, "key 'unit_id' must be an integer, got string"),
        ({"text": "x", "unit_id": True}, "key 'unit_id' must be an integer, got boolean"),
        ({"text": "x", "unit_id": 1.5}, "key 'unit_id' must be an integer, got number"),
        ({"text": "x", "start": SECRET}, "key 'start' must be a number (seconds), got string"),
        ({"text": "x", "end": False}, "key 'end' must be a number (seconds), got boolean"),
        ({"text": "x", "start": -1}, "key 'start' must be a finite, non-negative number"),
    ],
)
def test_jsonl_wrong_type_names_the_key_and_expected_type(
    tmp_path: Path, row: dict[str, Any], expected: str
) -> None:
    message = input_error(tmp_path, "bad.jsonl", jsonl({"text": "ok"}, {"text": "ok"}, row))
    assert "bad.jsonl line 3:" in message
    assert expected in message


def test_jsonl_rejects_nan_timestamps(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.jsonl", '{"text": "' + SECRET + '", "start": NaN}\n')
    assert "bad.jsonl line 1:" in message


def test_jsonl_rejects_end_before_start(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.jsonl", jsonl({"text": SECRET, "start": 5, "end": 4}))
    assert "bad.jsonl line 1:" in message


def test_jsonl_rejects_a_key_given_twice(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.jsonl", '{"text": "a", "text": "' + SECRET + '"}\n')
    assert "bad.jsonl line 1:" in message
    assert "'text' appears twice" in message


def test_jsonl_mixing_explicit_and_default_ids_names_the_line(tmp_path: Path) -> None:
    content = jsonl({"unit_id": 0, "text": "a"}, {"unit_id": 1, "text": "b"}, {"text": SECRET})
    message = input_error(tmp_path, "mixed.jsonl", content)
    assert "mixed.jsonl line 3:" in message
    assert "unit_id" in message


def test_jsonl_id_appearing_after_default_ids_is_an_error(tmp_path: Path) -> None:
    content = jsonl({"text": "a"}, {"unit_id": 9, "text": SECRET})
    message = input_error(tmp_path, "mixed.jsonl", content)
    assert "mixed.jsonl line 2:" in message


def test_jsonl_duplicate_unit_id_names_both_lines(tmp_path: Path) -> None:
    content = jsonl(
        {"unit_id": 4, "text": "a"}, {"unit_id": 5, "text": "b"}, {"unit_id": 4, "text": SECRET}
    )
    message = input_error(tmp_path, "dup.jsonl", content)
    assert "dup.jsonl line 3:" in message
    assert "line 1" in message


def test_jsonl_accepts_crlf_line_endings(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.jsonl", '{"text": "a"}\r\n{"text": "b"}\r\n')
    assert [u.text for u in doc.units] == ["a", "b"]


def test_jsonl_does_not_split_on_unicode_line_separators(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.jsonl", '{"text": "one\u2028two"}\n')
    assert [u.text for u in doc.units] == ["one\u2028two"]


# --- WebVTT -------------------------------------------------------------------------------

GOOD_VTT = """WEBVTT - session export
Kind: captions

NOTE exported by the meeting tool
spans two lines

STYLE
::cue { color: yellow }

intro-1
00:01.000 --> 00:04.250 align:start position:10%
<v Dungeon Master>Welcome back, <i>heroes</i>.</v>

01:00:02.500 --> 01:00:05.000
<v.loud Mara>I <b>draw</b> my <c.red>blade</c>
<00:00:03.000>and charge!

00:06.000 --> 00:07.000
The wind howls &amp; the door creaks.
"""


def test_webvtt_reads_cues_in_order_with_zero_based_ids(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.vtt", GOOD_VTT)
    assert doc.media_type == "text/vtt"
    assert [u.unit_id for u in doc.units] == [0, 1, 2]
    assert [u.kind for u in doc.units] == ["utterance"] * 3


def test_webvtt_voice_tags_become_speakers_and_leave_the_text(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.vtt", GOOD_VTT)
    assert doc.units[0].metadata["speaker"] == "Dungeon Master"
    assert doc.units[1].metadata["speaker"] == "Mara"
    assert "speaker" not in doc.units[2].metadata
    assert doc.units[0].text == "Welcome back, heroes."


def test_webvtt_strips_formatting_and_timestamp_tags(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.vtt", GOOD_VTT)
    assert doc.units[1].text == "I draw my blade\nand charge!"


def test_webvtt_decodes_character_references(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.vtt", GOOD_VTT)
    assert doc.units[2].text == "The wind howls & the door creaks."


def test_webvtt_times_are_seconds_with_optional_hours(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.vtt", GOOD_VTT)
    assert (doc.units[0].metadata["start"], doc.units[0].metadata["end"]) == (1.0, 4.25)
    assert (doc.units[1].metadata["start"], doc.units[1].metadata["end"]) == (3602.5, 3605.0)


def test_webvtt_keeps_the_cue_identifier(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.vtt", GOOD_VTT)
    assert doc.units[0].metadata["cue_id"] == "intro-1"
    assert "cue_id" not in doc.units[1].metadata


def test_webvtt_cue_with_several_voices_lists_them_all(tmp_path: Path) -> None:
    content = "WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>Hi.</v> <v B>Hello.</v>\n"
    unit = parse_file(tmp_path, "s.vtt", content).units[0]
    assert unit.metadata["speaker"] == "A"
    assert unit.metadata["voices"] == ["A", "B"]
    assert unit.text == "Hi. Hello."


def test_webvtt_requires_the_header(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.vtt", f"00:01.000 --> 00:02.000\n{SECRET}\n")
    assert "bad.vtt line 1:" in message
    assert "WEBVTT" in message


@pytest.mark.parametrize(
    "timing",
    [
        "00:01.000 -> 00:02.000",
        "00:01,000 --> 00:02.000",
        "00:61.000 --> 00:62.000",
        "1:01.000 --> 00:02.000",
        "00:05.000 --> 00:02.000",
    ],
)
def test_webvtt_malformed_timing_names_the_line(tmp_path: Path, timing: str) -> None:
    content = f"WEBVTT\n\n00:00.000 --> 00:00.500\nok\n\ncue-7\n{timing}\n{SECRET}\n"
    message = input_error(tmp_path, "bad.vtt", content)
    assert "bad.vtt line 7:" in message


def test_webvtt_block_without_timing_names_the_line(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.vtt", f"WEBVTT\n\n{SECRET}\nmore words\n")
    assert "bad.vtt line 4:" in message
    assert "timing" in message


def test_webvtt_cue_glued_to_the_header_is_an_error(tmp_path: Path) -> None:
    message = input_error(tmp_path, "bad.vtt", f"WEBVTT\n00:01.000 --> 00:02.000\n{SECRET}\n")
    assert "bad.vtt line 2:" in message


# --- SRT ----------------------------------------------------------------------------------

GOOD_SRT = """1
00:00:01,000 --> 00:00:03,500
DM: The tavern door bursts open.

2
00:00:04,000 --> 00:00:06,000
<i>A cold wind</i> fills the room,
and the candles gutter.

10
01:02:03,004 --> 01:02:04,000 X1:40 X2:600 Y1:20 Y2:50
Mara the Unbreakable: I stand up.
"""


def test_srt_reads_blocks_with_sequence_numbers_as_ids(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.srt", GOOD_SRT)
    assert doc.media_type == "application/x-subrip"
    assert [u.unit_id for u in doc.units] == [1, 2, 10]


def test_srt_speaker_prefix_becomes_speaker_metadata(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.srt", GOOD_SRT)
    assert doc.units[0].metadata["speaker"] == "DM"
    assert doc.units[0].text == "The tavern door bursts open."
    assert doc.units[2].metadata["speaker"] == "Mara the Unbreakable"
    assert doc.units[2].text == "I stand up."


def test_srt_text_without_prefix_has_no_speaker_and_keeps_its_lines(tmp_path: Path) -> None:
    unit = parse_file(tmp_path, "s.srt", GOOD_SRT).units[1]
    assert "speaker" not in unit.metadata
    assert unit.text == "A cold wind fills the room,\nand the candles gutter."


def test_srt_times_are_seconds(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.srt", GOOD_SRT)
    assert (doc.units[0].metadata["start"], doc.units[0].metadata["end"]) == (1.0, 3.5)
    assert doc.units[2].metadata["start"] == 3723.004


def test_srt_long_lead_before_a_colon_is_not_a_speaker(tmp_path: Path) -> None:
    lead = "This sentence is far too long to be anybody's name"
    content = f"1\n00:00:01,000 --> 00:00:02,000\n{lead}: really.\n"
    unit = parse_file(tmp_path, "s.srt", content).units[0]
    assert "speaker" not in unit.metadata
    assert unit.text == f"{lead}: really."


def test_srt_sequence_number_must_be_an_integer(tmp_path: Path) -> None:
    content = (
        f"1\n00:00:01,000 --> 00:00:02,000\nok\n\nA\n00:00:03,000 --> 00:00:04,000\n{SECRET}\n"
    )
    message = input_error(tmp_path, "bad.srt", content)
    assert "bad.srt line 5:" in message
    assert "sequence number" in message


def test_srt_duplicate_sequence_numbers_name_both_lines(tmp_path: Path) -> None:
    content = (
        f"3\n00:00:01,000 --> 00:00:02,000\nok\n\n3\n00:00:03,000 --> 00:00:04,000\n{SECRET}\n"
    )
    message = input_error(tmp_path, "dup.srt", content)
    assert "dup.srt line 5:" in message
    assert "line 1" in message


@pytest.mark.parametrize(
    "timing",
    ["00:00:01.000 --> 00:00:02,000", "00:00:01,000 to 00:00:02,000", "00:00:01,000", SECRET],
)
def test_srt_malformed_timing_names_the_line(tmp_path: Path, timing: str) -> None:
    content = f"1\n00:00:01,000 --> 00:00:02,000\nok\n\n2\n{timing}\n{SECRET}\n"
    message = input_error(tmp_path, "bad.srt", content)
    assert "bad.srt line 6:" in message


# --- plain text ---------------------------------------------------------------------------

GOOD_TEXT = """[00:00:05] DM: You enter the crypt.

[01:30] Mara: I light a torch.
The torch sputters.
[1:02:03.5] Brother Tomas: Stay close.
[laughs] Everyone freezes.
"""


def test_plaintext_reads_one_unit_per_non_blank_line(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.txt", GOOD_TEXT)
    assert doc.media_type == "text/plain"
    assert [u.unit_id for u in doc.units] == [0, 1, 2, 3, 4]


def test_plaintext_speaker_prefix_becomes_speaker_metadata(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.txt", GOOD_TEXT)
    assert doc.units[0].metadata["speaker"] == "DM"
    assert doc.units[0].text == "You enter the crypt."
    assert doc.units[3].metadata["speaker"] == "Brother Tomas"


def test_plaintext_line_without_prefix_has_no_speaker(tmp_path: Path) -> None:
    unit = parse_file(tmp_path, "s.txt", GOOD_TEXT).units[2]
    assert unit.metadata == {}
    assert unit.text == "The torch sputters."


def test_plaintext_leading_timestamp_becomes_start_seconds(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "s.txt", GOOD_TEXT)
    assert [u.metadata.get("start") for u in doc.units] == [5.0, 90.0, None, 3723.5, None]


def test_plaintext_bracketed_words_are_text_not_timestamps(tmp_path: Path) -> None:
    unit = parse_file(tmp_path, "s.txt", GOOD_TEXT).units[4]
    assert unit.text == "[laughs] Everyone freezes."
    assert "start" not in unit.metadata


@pytest.mark.parametrize("stamp", ["[00:75]", "[1:2:3:4]", "[12:3]", "[00:99:00]"])
def test_plaintext_malformed_timestamp_names_the_line(tmp_path: Path, stamp: str) -> None:
    message = input_error(tmp_path, "bad.txt", f"DM: ok\n\n{stamp} DM: {SECRET}\n")
    assert "bad.txt line 3:" in message
    assert "timestamp" in message


# --- the tier -----------------------------------------------------------------------------


def test_every_format_is_registered_with_its_media_type() -> None:
    assert {key: adapter.media_type for key, adapter in INPUT_FORMATS.items()} == {
        "jsonl": "application/x-ndjson",
        "webvtt": "text/vtt",
        "srt": "application/x-subrip",
        "text": "text/plain",
    }


@pytest.mark.parametrize(
    ("file_name", "expected"),
    [
        ("a.jsonl", "jsonl"),
        ("a.vtt", "webvtt"),
        ("a.srt", "srt"),
        ("a.txt", "text"),
        ("/x/B.VTT", "webvtt"),
    ],
)
def test_format_is_chosen_by_extension(file_name: str, expected: str) -> None:
    assert format_for(file_name, None) == expected


def test_explicit_format_wins_over_the_extension(tmp_path: Path) -> None:
    doc = parse_file(tmp_path, "dialogue.log", "DM: Hello.\n", input_format="text")
    assert doc.units[0].metadata == {"speaker": "DM"}
    assert format_for("a.jsonl", "srt") == "srt"


def test_unknown_extension_names_the_file_and_lists_the_formats(tmp_path: Path) -> None:
    message = input_error(tmp_path, "notes.docx", SECRET)
    assert "unknown input format '.docx' for file 'notes.docx'" in message
    assert "formats: jsonl, srt, text, webvtt" in message


def test_unknown_explicit_format_lists_the_formats() -> None:
    with pytest.raises(InputError) as caught:
        format_for("/secret/dir/a.jsonl", "csv")
    assert str(caught.value).startswith(
        "unknown input format 'csv' for file 'a.jsonl'; formats: jsonl, srt, text, webvtt"
    )


def test_non_utf8_bytes_name_the_file_line_and_byte_offset(tmp_path: Path) -> None:
    raw = f"DM: {SECRET}\nMara: caf".encode() + b"\xe9\n"
    message = input_error(tmp_path, "latin.txt", raw)
    assert "latin.txt line 2:" in message
    assert f"byte offset {len(raw) - 2}" in message


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    plain = parse_file(tmp_path, "a.vtt", GOOD_VTT)
    with_bom = parse_file(tmp_path, "b.vtt", b"\xef\xbb\xbf" + GOOD_VTT.encode())
    assert with_bom.units == plain.units
    assert with_bom.digest == plain.digest


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("e.jsonl", ""),
        ("e.jsonl", "\n  \n"),
        ("e.txt", "\n\n"),
        ("e.srt", ""),
        ("e.vtt", "WEBVTT\n"),
    ],
)
def test_a_transcript_without_units_is_an_error(tmp_path: Path, name: str, content: str) -> None:
    message = input_error(tmp_path, name, content)
    assert "no units" in message


def test_invalid_source_id_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SessionIdError):
        parse_file(tmp_path, "s.txt", "DM: Hi.\n", source_id="Session 1")


def test_digest_is_stable_across_jsonl_formatting(tmp_path: Path) -> None:
    compact = '{"unit_id":1,"speaker":"DM","text":"Hi.","start":1}\n{"unit_id":2,"text":"Yo."}\n'
    loose = (
        '\r\n{ "text" : "Hi.",  "start": 1.0, "speaker": "DM", "unit_id": 1 }\r\n\r\n'
        '{"text": "Yo.", "unit_id": 2}'
    )
    first = parse_file(tmp_path, "a.jsonl", compact)
    second = parse_file(tmp_path, "b.jsonl", b"\xef\xbb\xbf" + loose.encode())
    assert first.digest == second.digest
    assert first.digest.startswith("sha256:")


def test_digest_changes_when_a_unit_text_changes(tmp_path: Path) -> None:
    before = parse_file(tmp_path, "a.jsonl", jsonl({"text": "Hi."}, {"text": "Yo."}))
    after = parse_file(tmp_path, "b.jsonl", jsonl({"text": "Hi."}, {"text": "Yo!"}))
    assert before.digest != after.digest


def test_digest_does_not_depend_on_the_source_id(tmp_path: Path) -> None:
    a = parse_file(tmp_path, "a.txt", "DM: Hi.\n", source_id="one")
    b = parse_file(tmp_path, "a.txt", "DM: Hi.\n", source_id="two")
    assert a.digest == b.digest


def test_real_session_parses_into_181_units() -> None:
    doc = parse_transcript(
        REAL_SESSION.read_bytes(), file_name=REAL_SESSION.name, source_id="fireball-sea-hag"
    )
    assert len(doc.units) == 181
    assert doc.media_type == "application/x-ndjson"
    assert all(u.kind == "utterance" and "speaker" in u.metadata for u in doc.units)
    assert len({u.unit_id for u in doc.units}) == 181
