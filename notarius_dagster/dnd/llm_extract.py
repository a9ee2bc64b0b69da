"""The LLM-backed extractor shared by D&D lanes: renders the lane's prompt file over the
chunk, asks the structured client for the lane's answer schema, and converts the answer into
records that cite units of the chunk. Prompt and schema hashes feed checkpoint fingerprints."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from notarius_dagster.engine.contracts import ExtractRequest, LLMUsage, ModuleOutput
from notarius_dagster.engine.digest import digest_of
from notarius_dagster.engine.errors import LaneError
from notarius_dagster.engine.llm_contract import StructuredRequest
from notarius_dagster.engine.models import RunWarning

PROMPT_SPLIT = "\n---- user ----\n"


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


ToPayload = Callable[[dict[str, Any], ExtractRequest], tuple[dict[str, Any], list[RunWarning]]]


class LLMListExtractor:
    """Extract one lane's records from one chunk with one structured LLM call."""

    def __init__(
        self,
        options: Mapping[str, Any],
        *,
        lane_kind: str,
        prompt_path: Path,
        answer_model: type[BaseModel],
        to_payload: ToPayload,
        context: Callable[[ExtractRequest], str] | None = None,
    ) -> None:
        if options:  # these extractors take no options; a typo must not pass silently
            raise ValueError(f"unknown option(s): {sorted(options)}")
        self.lane_kind = lane_kind
        self.prompt = LanePrompt(prompt_path)
        self.answer_model = answer_model
        self.answer_schema = answer_model.model_json_schema()
        self.to_payload = to_payload
        self.context = context

    def fingerprint_material(self) -> dict[str, str]:
        return {"prompt": self.prompt.sha256, "answer_schema": digest_of(self.answer_schema)}

    def manifest_metadata(self) -> dict[str, str]:
        return {
            "prompt_sha256": self.prompt.sha256,
            "answer_schema_sha256": digest_of(self.answer_schema),
        }

    def extract(self, request: ExtractRequest) -> ModuleOutput:
        client = request.context.client
        if client is None:
            raise LaneError("no LLM client is configured for an LLM-backed extractor")
        context = self.context(request) if self.context else ""
        system, user = self.prompt.render(request.chunk.content, context)
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
        payload, warnings = self.to_payload(answer, request)
        return ModuleOutput(payload=payload, usage=usage, warnings=tuple(warnings))


def envelope(
    kind: str, source_id: str, items_field: str, records: list[dict[str, Any]]
) -> dict[str, Any]:
    return {"kind": kind, "schema_version": "v1", "source_id": source_id, items_field: records}


def canonical_name(name: str) -> str:
    """Name key for matching: case-folded, punctuation dropped, whitespace collapsed."""
    cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in name.casefold())
    return " ".join(cleaned.split())


def schema_json(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
