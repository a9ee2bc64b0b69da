"""The arithmetic of `benchmarks/bench_tokens.py` (issue 18's token goals are judged on it):
the share of prompt tokens inside a prefix of at least 1,024 tokens shared with an earlier call
of the same session, what OpenAI's cache would serve of it (1,024 tokens, then 128-token steps:
https://developers.openai.com/api/docs/guides/prompt-caching), the floor, and which prompt text
counts as a list of allowed unit ids. Small hand-made token sequences; no product run, no
tokenizer file."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_tokens import (
    Tokenizer,
    cached_tokens,
    char_kinds,
    common_prefix_length,
    counted_shared,
    floor_tokens,
    llm_lanes,
    shared_prefix_lengths,
    transcript_tokens,
)

P = list(range(1000, 3000))  # a 2,000-token prefix


def test_a_sessions_first_call_shares_nothing() -> None:
    assert shared_prefix_lengths([("s", P)]) == [0]


def test_any_earlier_call_counts_not_only_the_previous_one() -> None:
    calls = [("s", [*P, 1]), ("s", [7, 8, 9]), ("s", [*P, 2])]
    assert shared_prefix_lengths(calls) == [0, 0, 2000]


def test_only_earlier_calls_count() -> None:
    """The later, longer call shares the first one's whole prefix; the first shares nothing
    (a call cannot be served from a cache a later call fills)."""
    calls = [("s", P[:1500]), ("s", P)]
    assert shared_prefix_lengths(calls) == [0, 1500]


def test_the_longest_earlier_prefix_wins() -> None:
    calls = [("s", [*P[:1100], 5]), ("s", [*P[:1900], 6]), ("s", [*P, 7])]
    assert shared_prefix_lengths(calls) == [0, 1100, 1900]


def test_other_sessions_never_count() -> None:
    calls = [("a", P), ("b", P), ("a", P)]
    assert shared_prefix_lengths(calls) == [0, 0, 2000]


def test_a_shared_middle_is_no_shared_prefix() -> None:
    """Identical text after a different first token is no prefix: nothing can be cached."""
    calls = [("s", [1, *P]), ("s", [2, *P])]
    assert shared_prefix_lengths(calls) == [0, 0]


def test_identical_calls_share_everything() -> None:
    assert shared_prefix_lengths([("s", P), ("s", P)]) == [0, 2000]


def test_token_ids_compare_whole_and_signed() -> None:
    """o200k ids reach 200,000 (past 16 bits) and the chat framing uses negative stand-ins:
    70,000 and 4,464 agree in their low 16 bits, -1 and 4,294,967,295 in 32."""
    assert common_prefix_length([70_000, 1], [4_464, 1]) == 0
    assert common_prefix_length([-1, 5, 6], [-1, 5, 7]) == 2
    assert shared_prefix_lengths([("s", [199_999] * 1100), ("s", [199_999] * 1100)])[1] == 1100


def test_a_prefix_under_1024_tokens_counts_nothing() -> None:
    assert counted_shared(0) == 0
    assert counted_shared(1023) == 0
    assert counted_shared(1024) == 1024
    assert counted_shared(1500) == 1500


def test_openais_cache_serves_1024_then_128_token_steps() -> None:
    assert cached_tokens(1023) == 0
    assert cached_tokens(1024) == 1024
    assert cached_tokens(1151) == 1024
    assert cached_tokens(1152) == 1152
    assert cached_tokens(5000) == 4992


def test_share_of_a_session_many_short_shared_prefixes_count_nothing() -> None:
    """Six lanes that share 1,000 tokens (instructions, schema) and then differ: a naive share of
    "tokens shared with an earlier call" would be 5/6 of 5,000 tokens of prefix; under the
    1,024-token rule it is nothing. With 1,200 shared it is all of those."""
    common = P[:1000]
    calls = [("s", [*common, lane, *P[:500]]) for lane in range(6)]
    shared = shared_prefix_lengths(calls)
    assert shared == [0, 1000, 1000, 1000, 1000, 1000]
    assert sum(counted_shared(s) for s in shared) == 0
    common = P[:1200]
    shared = shared_prefix_lengths([("s", [*common, lane]) for lane in range(6)])
    assert sum(counted_shared(s) for s in shared) == 5 * 1200
    assert sum(cached_tokens(s) for s in shared) == 5 * 1152


def test_lanes_of_the_floor_are_distinct_lanes_not_calls() -> None:
    """A re-ask is a second call of the same lane on the same chunk, not a seventh lane."""
    calls = ["npcs", "spells", "npcs", "npcs", "scene-descriptions", "spells"]
    assert llm_lanes(calls) == ["npcs", "scene-descriptions", "spells"]
    assert floor_tokens(1000, len(llm_lanes(calls))) == 3000


class _CharEncoding:
    """A stand-in tokenizer: one token per character (the floor's arithmetic, not BPE)."""

    def encode(self, text: str, disallowed_special: tuple[()] = ()) -> list[int]:
        return [ord(c) for c in text]


def test_the_floor_counts_the_units_as_the_prompts_render_them(tmp_path: Path) -> None:
    """`[id] Speaker: text` lines joined by newlines, as the product renders a chunk: not the
    raw JSONL, not the text alone."""
    session = tmp_path / "tiny.jsonl"
    units = [
        {"unit_id": 0, "speaker": "MATT", "text": "Hello."},
        {"unit_id": 1, "speaker": "LAURA", "text": "Hi!"},
    ]
    session.write_text("\n".join(json.dumps(u) for u in units) + "\n")
    tokenizer = Tokenizer("chars", "test", _CharEncoding())
    rendered = "[0] MATT: Hello.\n[1] LAURA: Hi!"
    assert transcript_tokens(session, tokenizer) == (2, len(rendered))


def test_unit_id_lists_are_told_from_schema_text_and_transcript() -> None:
    """An `enum` of the chunk's labels counts as a unit-id list, not as schema; numbers in a
    unit line stay transcript; a list of numbers the chunk does not show stays text."""
    schema = json.dumps(
        {"properties": {"unit_ids": {"items": {"type": "integer", "enum": [41, 42]}}}}
    )
    text = f"Pick from 7, 8, 9.\n{schema}\n[41] MATT: Roll 12, 14, 41.\n[42] SAM: Yes."
    kinds = char_kinds(text, {41, 42})

    def kind_of(fragment: str) -> set[str]:
        start = text.index(fragment)
        return set(kinds[start : start + len(fragment)])

    assert kind_of("[41, 42]") == {"unit_ids"}
    assert kind_of('"type": "integer"') == {"schema"}
    assert kind_of("Roll 12, 14, 41.") == {"transcript"}
    assert kind_of("7, 8, 9") == {"text"}
    assert kind_of("Pick from") == {"text"}
