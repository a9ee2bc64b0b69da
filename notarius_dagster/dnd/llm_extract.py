"""The LLM-backed extractor shared by D&D lanes: renders the lane's prompt file over the
chunk, asks the structured client for the lane's answer schema (derived from its record model,
`LaneSpec.answer_model`), and converts the answer into records that cite units of the chunk.
Prompt and schema hashes feed checkpoint fingerprints."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.dnd.reference_fingerprints import consumed_fingerprint
from notarius_dagster.dnd.roster import party_context
from notarius_dagster.engine.contracts import (
    ExtractRequest,
    LLMUsage,
    ModuleOutput,
    PreparedReference,
)
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import LaneError
from notarius_dagster.engine.lane_models import CITATION_FIELD, allows_none
from notarius_dagster.engine.lanes import LaneSpec, ModuleFactory
from notarius_dagster.engine.llm_contract import StructuredRequest
from notarius_dagster.engine.models import Chunk, RunWarning

PROMPT_SPLIT = "\n---- user ----\n"

ToPayload = Callable[
    [LaneSpec, dict[str, Any], ExtractRequest], tuple[dict[str, Any], list[RunWarning]]
]
"""Turns a validated answer into the lane's payload and warnings."""
Converters = Mapping[str, Callable[[Any], Any]]
"""Per record field, how an answer value becomes the record's (where the generic tidying
of `answer_records` does not fit)."""
PromptContext = Callable[[ExtractRequest], str]


class LanePrompt:
    """A prompt file: system text, then `---- user ----`, then a user template with
    `{chunk}` (and optionally `{context}`) placeholders."""

    def __init__(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        if PROMPT_SPLIT not in text:
            raise ValueError(f"prompt file {path.name} lacks the '---- user ----' separator")
        self.system, self.user_template = text.split(PROMPT_SPLIT, 1)
        self.sha256 = "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    def render(self, chunk: str, context: str = "") -> tuple[str, str]:
        user = self.user_template.replace("{context}", context).replace("{chunk}", chunk)
        return self.system.strip(), user.strip()


def tidy(value: Any, nullable: bool) -> Any:
    """An answer value as a record keeps it: strings trimmed (an empty one is null where the
    field allows null), lists of strings trimmed with empty entries dropped, the rest as is."""
    if isinstance(value, str):
        text = value.strip()
        return None if nullable and not text else text
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return value


def answer_records(
    lane: LaneSpec,
    answer: dict[str, Any],
    request: ExtractRequest,
    convert: Converters | None = None,
) -> list[dict[str, Any]]:
    """The records of a list answer, keyed and ordered as the record model: each answer value
    tidied (or converted by `convert`), null for a field the runner fills afterwards (an NPC id
    found by grounding), no id (normalization assigns it) and, last, the cited unit ids as
    `source_refs` ranges."""
    convert = convert or {}
    fields = [
        (info.alias or name, allows_none(info.annotation))
        for name, info in lane.record_model.model_fields.items()
        if name not in (lane.id_field, lane.refs_field)
    ]
    records = []
    for item in answer[lane.items_field]:
        record: dict[str, Any] = {}
        for key, nullable in fields:
            if key in convert:
                record[key] = convert[key](item[key])
            else:
                record[key] = tidy(item[key], nullable) if key in item else None
        refs = refs_from_unit_ids(item[CITATION_FIELD], request.chunk)
        record[lane.refs_field] = [r.model_dump() for r in refs]
        records.append(record)
    return records


def list_payload(
    lane: LaneSpec, answer: dict[str, Any], request: ExtractRequest
) -> tuple[dict[str, Any], list[RunWarning]]:
    """The plain conversion: the answer's records in the lane's envelope, no warnings."""
    return lane.envelope(request.chunk.source_id, answer_records(lane, answer, request)), []


class LLMListExtractor:
    """Extract one lane's records from one chunk with one structured LLM call."""

    def __init__(
        self,
        lane: LaneSpec,
        options: Mapping[str, Any],
        *,
        to_payload: ToPayload = list_payload,
        context: PromptContext | None = None,
    ) -> None:
        if options:  # these extractors take no options; a typo must not pass silently
            raise ValueError(f"unknown option(s): {sorted(options)}")
        self.lane = lane
        self.prompt = LanePrompt(lane.prompt)
        self.answer_model = lane.answer_model
        self.answer_schema = self.answer_model.model_json_schema()
        self.to_payload = to_payload
        self.context = context

    def fingerprint_material(self) -> dict[str, str]:
        return {"prompt": self.prompt.sha256, "answer_schema": digest_of(self.answer_schema)}

    def reference_fingerprint(
        self, slot: str, reference: PreparedReference, chunk: Chunk
    ) -> str:
        """What of `reference` this extraction consumes (dnd/reference_fingerprints.py): for
        the `npcs` artifact its ids, names and aliases only."""
        return consumed_fingerprint(slot, reference, chunk)

    def manifest_metadata(self) -> dict[str, str]:
        return {
            "prompt_sha256": self.prompt.sha256,
            "answer_schema_sha256": digest_of(self.answer_schema),
        }

    def payload(
        self, answer: dict[str, Any], request: ExtractRequest
    ) -> tuple[dict[str, Any], list[RunWarning]]:
        """The payload and warnings of a validated answer (what `extract` does after the call)."""
        return self.to_payload(self.lane, answer, request)

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        client = request.context.client
        if client is None:
            raise LaneError("no LLM client is configured for an LLM-backed extractor")
        context = self.context(request) if self.context else ""
        system, user = self.prompt.render(request.chunk.content, context)
        party = party_context(request.context.references, request.context.session_id)
        if party:  # a bound roster names the party (names only); unbound: the prompt as before
            user = f"{party}\n{user}"
        response = client.complete_structured(
            StructuredRequest(
                system=system,
                user=user,
                schema=self.answer_schema,
                schema_name=self.answer_model.__name__,
                session_id=request.context.session_id,
                lane=request.context.lane_id,
                chunk_id=request.chunk.chunk_id,
            )
        )
        usage = LLMUsage.of(response)
        if not response.valid or response.data is None:
            return ModuleOutput(
                payload=None,
                usage=usage,
                schema_errors=response.errors or ("answer did not validate",),
            )
        answer = self.answer_model.model_validate(response.data).model_dump(mode="json")
        payload, warnings = self.payload(answer, request)
        return ModuleOutput(payload=payload, usage=usage, warnings=tuple(warnings))


def llm_extractor(
    to_payload: ToPayload = list_payload,
    *,
    context: PromptContext | None = None,
    wrap: Callable[[LLMListExtractor], Any] | None = None,
) -> ModuleFactory:
    """The extract factory of an LLM lane: `to_payload` converts the answer, `context` fills
    the prompt's `{context}`, `wrap` puts the extractor behind a gate (combat turns)."""

    def build(lane: LaneSpec, options: dict[str, Any]) -> Any:
        extractor = LLMListExtractor(lane, options, to_payload=to_payload, context=context)
        return wrap(extractor) if wrap is not None else extractor

    return build


def canonical_name(name: str) -> str:
    """Name key for matching: case-folded, punctuation dropped, whitespace collapsed."""
    cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in name.casefold())
    return " ".join(cleaned.split())
