"""The LLM-backed extractor shared by D&D lanes: renders the lane's prompt file over the
chunk, asks the structured client for the lane's answer schema (derived from its record model,
`LaneSpec.answer_model`), and converts the answer into records that cite units of the chunk.
Prompt and schema hashes feed checkpoint fingerprints.

Citations cannot be invented: the schema sent with each request constrains every cited unit
to the chunk's own units (`enum`, built per chunk by the lane's `CitationScheme`), so a model
whose decoding honours the schema (llama.cpp's grammar, a provider's JSON-schema mode) cannot
cite a unit outside its chunk, and the client's validation refuses one from any other model.
Which scheme is kept, and why, is in docs/lanes.md ("Citations")."""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from notarius_dagster.dnd.records import refs_from_unit_ids
from notarius_dagster.dnd.reference_fingerprints import consumed_fingerprint
from notarius_dagster.dnd.roster import party_context
from notarius_dagster.engine.chunking import render_unit
from notarius_dagster.engine.contracts import (
    Extractor,
    ExtractRequest,
    ModuleOutput,
    PreparedReference,
)
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import LaneError
from notarius_dagster.engine.failure_causes import validation_problems
from notarius_dagster.engine.lane_models import CITATION_FIELD, allows_none
from notarius_dagster.engine.lanes import LaneSpec, ModuleFactory
from notarius_dagster.engine.llm_contract import StructuredRequest, StructuredResponse
from notarius_dagster.engine.models import Chunk, RunWarning, SourceDocument

PREAMBLE = Path(__file__).with_name("preamble.md")
"""What every D&D lane sends first, alike: the system message, then the chunk. Calls of several
lanes on one chunk thus share their prompt's prefix, which providers' prompt caches reuse; each
lane's own instructions come after the chunk."""
CHUNK_HEADING = "Transcript excerpt:"
OLD_SEPARATOR = "---- user ----"

PayloadWithWarnings = tuple[dict[str, Any], list[RunWarning]]
"""What converting an answer gives: the lane's payload and the warnings of the conversion."""
ToPayload = Callable[[LaneSpec, dict[str, Any], ExtractRequest], PayloadWithWarnings]
"""Turns a validated answer into the lane's payload and warnings."""
Converters = Mapping[str, Callable[[Any], Any]]
"""Per record field, how an answer value becomes the record's (where the generic tidying
of `answer_records` does not fit)."""
PromptContext = Callable[[ExtractRequest], str]


class LanePrompt:
    """A lane's prompt file: the lane's instructions, sent after the shared preamble and the
    chunk, with an optional `{context}` placeholder (what a reference gives the lane, such as
    the known NPCs). `sha256` covers the preamble too: editing either re-runs the lane."""

    def __init__(self, path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        if OLD_SEPARATOR in text or "{chunk}" in text:
            raise ValueError(
                f"prompt file {path.name} uses the old layout ('{OLD_SEPARATOR}' and "
                "'{chunk}'): a prompt file now holds only the lane's instructions (the chunk "
                "is placed before them); see docs/lanes.md"
            )
        self.preamble = PREAMBLE.read_text(encoding="utf-8").strip()
        self.instructions = text.strip()
        self.sha256 = "sha256:" + hashlib.sha256(f"{self.preamble}\n\n{text}".encode()).hexdigest()

    def render(self, chunk: str, context: str = "") -> tuple[str, str, str]:
        """(system, user, instructions): the preamble, the chunk under its heading, and the
        lane's instructions with `{context}` filled in."""
        return (
            self.preamble,
            f"{CHUNK_HEADING}\n{chunk}",
            self.instructions.replace("{context}", context),
        )


class CitationScheme:
    """How a chunk's units are labelled in the prompt and cited in the answer: the prompt's
    chunk text, the per-request schema (every citation an `enum` of the labels shown) and the
    deterministic mapping of cited labels back to unit ids (the code's job, never the model's).

    This base cites unit ids: the chunk's own `[id]` markers (`unit-ids`)."""

    name = "unit-ids"

    def chunk_text(self, chunk: Chunk, document: SourceDocument) -> str:
        return chunk.content

    def labels(self, chunk: Chunk) -> list[int]:
        return list(chunk.unit_ids)

    def unit_ids(self, cited: Sequence[int], chunk: Chunk) -> list[int]:
        return list(cited)


class LineNumberCitations(CitationScheme):
    """Lines numbered 1..N in the prompt (`[1] Speaker: text`); a cited line n is the chunk's
    n-th unit. The prompt is rendered from the document's units (the chunk's own content keeps
    the unit ids, which feed its digest)."""

    name = "line-numbers"

    def chunk_text(self, chunk: Chunk, document: SourceDocument) -> str:
        by_id = {u.unit_id: u for u in document.units}
        return "\n".join(
            render_unit(by_id[u], marker=n) for n, u in enumerate(chunk.unit_ids, start=1)
        )

    def labels(self, chunk: Chunk) -> list[int]:
        return list(range(1, len(chunk.unit_ids) + 1))

    def unit_ids(self, cited: Sequence[int], chunk: Chunk) -> list[int]:
        return [chunk.unit_ids[n - 1] for n in cited if 1 <= n <= len(chunk.unit_ids)]


CITATION_SCHEMES: dict[str, CitationScheme] = {
    scheme.name: scheme for scheme in (CitationScheme(), LineNumberCitations())
}
DEFAULT_CITATIONS = "unit-ids"
"""The scheme every LLM lane uses (measured against line numbers: docs/lanes.md)."""


def constrain_citations(schema: dict[str, Any], labels: Sequence[int]) -> dict[str, Any]:
    """A copy of an answer schema in which every citation list (`unit_ids` of any object)
    only admits `labels`. A schema without citations (a per-chunk answer) is returned as is."""
    constrained = copy.deepcopy(schema)
    allowed = {"type": "integer", "enum": list(labels)}
    found = False
    for node in [constrained, *constrained.get("$defs", {}).values()]:
        prop = node.get("properties", {}).get(CITATION_FIELD)
        if isinstance(prop, dict) and prop.get("type") == "array":
            prop["items"] = dict(allowed)
            found = True
    return constrained if found else schema


class _SchemaCache:
    """Per-request schemas by their labels: chunks of one size share one (line numbers), and
    a re-run of the same chunk is free (unit ids). Bounded; no locking needed beyond the GIL
    for this dict-of-immutable-values use (a miss only costs a rebuild)."""

    def __init__(self, base: dict[str, Any], size: int = 256) -> None:
        self.base = base
        self.size = size
        self._cache: OrderedDict[tuple[int, ...], dict[str, Any]] = OrderedDict()

    def get(self, labels: Sequence[int]) -> dict[str, Any]:
        key = tuple(labels)
        schema = self._cache.get(key)
        if schema is None:
            schema = constrain_citations(self.base, key)
            self._cache[key] = schema
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return schema


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
) -> PayloadWithWarnings:
    """The plain conversion: the answer's records in the lane's envelope, no warnings."""
    return lane.envelope(request.chunk.source_id, answer_records(lane, answer, request)), []


class LLMListExtractor:
    """Extract one lane's records from one chunk with one structured LLM call."""

    def __init__(
        self,
        lane: LaneSpec,
        options: Mapping[str, object],
        *,
        to_payload: ToPayload = list_payload,
        context: PromptContext | None = None,
        citations: str = DEFAULT_CITATIONS,
    ) -> None:
        if options:  # these extractors take no options; a typo must not pass silently
            raise ValueError(f"unknown option(s): {sorted(options)}")
        self.lane = lane
        self.prompt = LanePrompt(lane.prompt)
        self.answer_model = lane.answer_model
        self.answer_schema = self.answer_model.model_json_schema()
        self.to_payload = to_payload
        self.context = context
        self.citations = CITATION_SCHEMES[citations]
        self._schemas = _SchemaCache(self.answer_schema)

    def fingerprint_material(self) -> dict[str, str]:
        return {
            "prompt": self.prompt.sha256,
            "answer_schema": digest_of(self.answer_schema),
            "citations": self.citations.name,
        }

    def reference_fingerprint(self, slot: str, reference: PreparedReference, chunk: Chunk) -> str:
        """What of `reference` this extraction consumes (dnd/reference_fingerprints.py): for
        the `npcs` artifact its ids, names and aliases only."""
        return consumed_fingerprint(slot, reference, chunk)

    def manifest_metadata(self) -> dict[str, str]:
        return {
            "prompt_sha256": self.prompt.sha256,
            "answer_schema_sha256": digest_of(self.answer_schema),
            "citations": self.citations.name,
        }

    def request_schema(self, chunk: Chunk) -> dict[str, Any]:
        """The schema sent for `chunk`: the answer schema with citations limited to the
        labels the prompt shows for this chunk."""
        return self._schemas.get(self.citations.labels(chunk))

    def payload(self, answer: dict[str, Any], request: ExtractRequest) -> PayloadWithWarnings:
        """The payload and warnings of a validated answer (what `extract` does after the call)."""
        return self.to_payload(self.lane, answer, request)

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        client = request.context.client
        if client is None:
            raise LaneError("no LLM client is configured for an LLM-backed extractor")
        context = self.context(request) if self.context else ""
        chunk = request.chunk
        system, user, instructions = self.prompt.render(
            self.citations.chunk_text(chunk, request.document), context
        )
        party = party_context(request.context.references, request.context.session_id)
        if party:  # a bound roster names the party (names only); unbound: the prompt as before
            instructions = f"{instructions}\n\n{party}"
        response = client.complete_structured(
            StructuredRequest(
                system=system,
                user=user,
                instructions=instructions,
                schema=self.request_schema(chunk),
                schema_name=self.answer_model.__name__,
                session_id=request.context.session_id,
                lane=request.context.lane_id,
                chunk_id=request.chunk.chunk_id,
            )
        )
        usage = response.usage
        stepdown = stepdown_warning(response, request)
        if not response.valid or response.data is None:
            return ModuleOutput(
                payload=None,
                usage=usage,
                warnings=stepdown,
                schema_errors=response.errors or ("answer did not validate",),
            )
        try:  # the record rules the JSON Schema cannot say (one-line names) refuse it here
            answer = self.answer_model.model_validate(response.data).model_dump(mode="json")
        except ValidationError as exc:
            return ModuleOutput(
                payload=None, usage=usage, schema_errors=(validation_problems(exc),)
            )
        if not self.lane.answer.per_chunk:
            for item in answer[self.lane.items_field]:
                item[CITATION_FIELD] = self.citations.unit_ids(item[CITATION_FIELD], chunk)
        payload, warnings = self.payload(answer, request)
        return ModuleOutput(payload=payload, usage=usage, warnings=(*stepdown, *warnings))


def stepdown_warning(
    response: StructuredResponse, request: ExtractRequest
) -> tuple[RunWarning, ...]:
    """The warning of a request the provider made step down the structured-output ladder. It
    is given once per lane: after a refusal the client starts that lane's requests on the
    lower rung, so later requests are not refused again."""
    if response.stepped_down_from is None:
        return ()
    return (
        RunWarning(
            stage="extract",
            code="structured_output_stepdown",
            message=(
                f"the provider refused the {response.stepped_down_from} rung "
                f"({response.stepdown_reason or 'no reason given'}); this lane continues one "
                "rung lower, where the schema is checked by the client, not enforced"
            ),
            lane=request.context.lane_id,
            chunk_id=request.chunk.chunk_id,
        ),
    )


def llm_extractor(
    to_payload: ToPayload = list_payload,
    *,
    context: PromptContext | None = None,
    wrap: Callable[[LLMListExtractor], Extractor] | None = None,
) -> ModuleFactory:
    """The extract factory of an LLM lane: `to_payload` converts the answer, `context` fills
    the prompt's `{context}`, `wrap` puts the extractor behind a gate (combat turns)."""

    def build(lane: LaneSpec, options: Mapping[str, object]) -> Extractor:
        extractor = LLMListExtractor(lane, options, to_payload=to_payload, context=context)
        return wrap(extractor) if wrap is not None else extractor

    return build


def canonical_name(name: str) -> str:
    """Name key for matching: case-folded, punctuation dropped, whitespace collapsed."""
    cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in name.casefold())
    return " ".join(cleaned.split())
