"""Provider conformance (issue 18): the complete D&D profile, run through the product's real
path (`run_session`: the Dagster job, the LLM resource, litellm, HTTP), against loopback
servers that speak each provider's wire format as litellm 1.110.2 calls it and check what
arrives against the provider's documented structured-output rules (tests/provider_servers.py,
a test double: its answers are computed from the request, not by a model).

For every model string a user would write (OpenAI, Azure OpenAI, Anthropic, Gemini, Ollama,
vLLM, LM Studio, llama.cpp's server), the suite shows:
- a six-lane run publishes, with the schema sent in the form the provider enforces, passing
  that provider's rules, every citation `enum` exactly the request's own chunk;
- a double tempted to cite a unit outside its chunk cannot, on the enforced rung;
- a schema refusal (the provider's real 400) steps the lane down one rung, and the manifest
  and warnings say so with the provider's reason;
- a 429's `Retry-After` (Gemini: `RetryInfo.retryDelay`) is waited out, not guessed;
- a permanent error (401, unknown model, missing key) fails at once, with no retry, naming the
  profile and the model and never the key;
- a call litellm cannot price is published as unpriced (cost null), not $0; a profile's own
  prices price it.

The documentation each rule comes from is cited in tests/provider_servers.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterInstance

import assets.factory as factory
from notarius_dagster.engine.errors import NotariusError
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.run.runner import RunOutcome, run_session
from tests.provider_servers import (
    AnthropicServer,
    Fault,
    GeminiServer,
    OllamaServer,
    OpenAIServer,
    ProviderServer,
    citation_enum,
    citations_in,
    estimate_tokens,
)

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "crd3-c2e001-slice.jsonl"
COMPLETE = REPO / "configs" / "dnd-complete.yaml"
LANES = {"npcs", "scene-descriptions", "combat-turns", "spells", "item-events", "npc-interactions"}
KEY_ENV = "NOTARIUS_CONFORMANCE_KEY"
KEY = "sk-conformance-7Qx2Lm9Vb4Tz8Rw1"
SESSION = "conformance"
RETRY_AFTER_S = 3
"""Longer than any backoff a client could guess on its own for a first retry (today's: 1-2 s)."""


@dataclass(frozen=True)
class Provider:
    """One model string as a user writes it, the server that plays its provider, whether
    litellm prices it, and the words of the provider's schema refusal a user should see."""

    id: str
    model: str
    server: Callable[..., ProviderServer]
    priced: bool
    refusal_words: str

    @property
    def profile_name(self) -> str:
        return f"conformance-{self.id}"


PROVIDERS = (
    Provider(
        "openai",
        "openai/gpt-4o-mini",
        lambda **kw: OpenAIServer("openai", **kw),
        True,
        "'response_format' of type 'json_schema' is not supported",
    ),
    Provider(
        "azure",
        "azure/gpt-4o-mini",
        lambda **kw: OpenAIServer("azure", **kw),
        True,
        "'response_format' of type 'json_schema' is not supported",
    ),
    Provider(
        "anthropic",
        "anthropic/claude-haiku-4-5",
        AnthropicServer,
        True,
        "compiled grammar is too large",
    ),
    Provider(
        "gemini",
        "gemini/gemini-2.5-flash",
        GeminiServer,
        True,
        "too many states for serving",
    ),
    Provider(
        "ollama",
        "ollama_chat/llama3.1",
        OllamaServer,
        False,
        "invalid JSON schema in format",
    ),
    Provider(
        "vllm",
        "hosted_vllm/Qwen2.5-7B-Instruct",
        lambda **kw: OpenAIServer("vllm", **kw),
        False,
        "not supported by xgrammar",
    ),
    Provider(
        "lmstudio",
        "openai/qwen2.5-7b-instruct",
        lambda **kw: OpenAIServer("lmstudio", **kw),
        False,
        "",  # LM Studio has no structured rung below json_schema (it refuses json_object)
    ),
    Provider(
        "llamacpp",
        "openai/smollm2-1.7b-instruct",
        lambda **kw: OpenAIServer("llamacpp", **kw),
        False,
        "",
    ),
)
BY_ID = {p.id: p for p in PROVIDERS}
STEPPING = [p for p in PROVIDERS if p.refusal_words]


# ---- running the product


def transcript(folder: Path, units: int) -> Path:
    """The first `units` lines of the bundled 200-unit sample."""
    path = folder / f"sample-{units}.jsonl"
    path.write_text("\n".join(SAMPLE.read_text().splitlines()[:units]) + "\n")
    return path


def provider_profile(
    folder: Path,
    provider: Provider,
    api_base: str,
    chunk: dict[str, Any] | None = None,
    **llm: Any,
) -> Path:
    """configs/dnd-complete.yaml with one LLM profile: the provider's model string at the
    server, the key from KEY_ENV (`llm` adds or overrides profile fields; a value None drops
    the field; `chunk` overrides chunker options)."""
    config = yaml.safe_load(COMPLETE.read_text())
    config["pipeline"]["chunk"]["options"].update(chunk or {})
    config["pipeline"]["llm_profile"] = provider.profile_name
    fields: dict[str, Any] = {
        "model": provider.model,
        "api_base": api_base,
        "api_key_env": KEY_ENV,
        "timeout_s": 20,
        "max_concurrency": 2,
        **llm,
    }
    config["llm_profiles"] = {
        provider.profile_name: {k: v for k, v in fields.items() if v is not None}
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{provider.id}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class Run:
    provider: Provider
    outcome: RunOutcome
    server: ProviderServer
    bundle: Path
    ended_at: float

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads((self.bundle / "manifest.json").read_text())

    @property
    def warnings(self) -> list[dict[str, Any]]:
        return json.loads((self.bundle / "warnings.json").read_text())

    def lane(self, lane_id: str) -> dict[str, Any]:
        return next(x for x in self.manifest["artifact_lanes"] if x["lane_id"] == lane_id)


def run_against(
    folder: Path,
    instance: DagsterInstance,
    provider: Provider,
    *,
    units: int,
    lanes: list[str] | None = None,
    prepare: Callable[[ProviderServer], object] = lambda server: None,
    server_options: dict[str, Any] | None = None,
    chunk: dict[str, Any] | None = None,
    **llm: Any,
) -> Run:
    """Run the complete profile (or `lanes` of it) on the first `units` sample lines against a
    fresh server for `provider`; `prepare` scripts the server before the run."""
    data = folder / "data"
    register_transcript(data / "transcripts", SESSION, transcript(folder, units))
    with provider.server(**(server_options or {})) as server:
        prepare(server)
        profile = provider_profile(folder / "profile", provider, server.api_base, chunk, **llm)
        try:
            outcome = run_session(
                session_id=SESSION,
                profile=profile,
                data_root=data,
                lanes=lanes,
                instance=instance,
                quiet=True,
            )
        except NotariusError as exc:  # refused before anything ran: no run, no partition
            outcome = RunOutcome(run_id=None, success=False, error=str(exc))
        ended_at = time.monotonic()
    return Run(provider, outcome, server, data / "bundles" / SESSION, ended_at)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setattr(factory, "STEP_RETRY_WAIT_S", 0)


@pytest.fixture(scope="module", params=[p.id for p in PROVIDERS])
def six_lane_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    """One complete-profile run per provider on 90 sample lines, shared by the tests below
    that read a finished run. The double is tempted to cite a unit outside its chunk (the
    provider's enforcement must stop it) and calls every scene a combat scene (so that the
    combat lane, with the deepest answer schema, is called on every chunk)."""
    provider = BY_ID[request.param]
    with pytest.MonkeyPatch.context() as patch, DagsterInstance.ephemeral() as instance:
        patch.setenv(KEY_ENV, KEY)
        patch.setattr(factory, "STEP_RETRY_WAIT_S", 0)
        folder = tmp_path_factory.mktemp(f"six-{provider.id}")
        yield run_against(
            folder,
            instance,
            provider,
            units=90,
            server_options={"tempt": True, "prefer": ("combat",)},
        )


FAMILIES = [p.id for p in PROVIDERS if p.id != "llamacpp"]
"""Where errors are concerned llama.cpp's server takes LM Studio's path (litellm's OpenAI route
at a local server); its own rules are covered by the six-lane run."""


# ---- a six-lane run, enforced --------------------------------------------------------------------


def test_a_six_lane_run_publishes(six_lane_run: Run) -> None:
    run = six_lane_run
    assert run.outcome.success, run.outcome.error
    index = json.loads((run.bundle / "index.json").read_text())
    assert {lane["lane_id"] for lane in index["lanes"]} == LANES
    empty = [lane["lane_id"] for lane in index["lanes"] if lane["records"] == 0]
    assert empty == [], "lanes published without a record"
    assert all(status == 200 for status in (r.status for r in run.server.requests)), [
        (r.status, r.problems or r.fault) for r in run.server.requests if r.status != 200
    ]


def test_the_schema_reaches_the_provider_in_its_enforced_form_within_its_rules(
    six_lane_run: Run,
) -> None:
    """Every request carries the answer schema where the provider enforces it (OpenAI and
    Azure: `json_schema` with `strict: true`; Anthropic: `output_format`; Gemini:
    `response_json_schema`; Ollama: `format` with the schema; vLLM, LM Studio: `json_schema`;
    llama.cpp: a schema it turns into a grammar), breaks none of the provider's documented
    rules, and every citation list's `enum` is exactly the unit ids the request showed."""
    run = six_lane_run
    requests = run.server.requests
    assert requests, "no request reached the provider"
    broken = [(r.form, r.problems[:1]) for r in requests if r.problems]
    assert broken == [], broken
    unenforced = sorted({r.form for r in requests if not r.enforced})
    assert unenforced == [], f"requests in a form {run.provider.id} does not enforce: {unenforced}"
    for request in requests:
        assert request.schema is not None
        allowed = citation_enum(request.schema)
        if "unit_ids" in json.dumps(request.schema):
            assert allowed is not None, "a citation list without its enum"
            assert sorted(allowed) == sorted(request.unit_ids), "the enum is not the chunk's"
    rungs = run.manifest["totals"]["structured_output_rungs"]
    assert set(rungs) == {"json_schema"}, rungs


def test_an_out_of_chunk_citation_cannot_be_produced_on_the_enforced_rung(
    six_lane_run: Run,
) -> None:
    """The double wants to cite the unit after its chunk in every answer; only the provider's
    enforcement of the `enum` keeps it out, so no answer may carry it and no re-ask is needed."""
    run = six_lane_run
    answered = run.server.answered
    assert answered
    slips = [
        (r.unit_ids[:1], sorted(set(citations_in(r.answer)) - set(r.unit_ids)))
        for r in answered
        if set(citations_in(r.answer)) - set(r.unit_ids)
    ]
    assert slips == [], f"{len(slips)} of {len(answered)} answers cited outside their chunk"
    assert "reask" not in run.manifest["totals"]["structured_output_rungs"]


def test_calls_are_priced_or_marked_unpriced_and_cached_tokens_recorded(six_lane_run: Run) -> None:
    """A model in litellm's price map costs more than $0; one litellm cannot price is published
    as unpriced (`cost_usd` null, every call counted in `unpriced_calls`), in each lane and in
    the totals. Cached prompt tokens are what the provider reported."""
    run = six_lane_run
    assert run.outcome.success, run.outcome.error
    manifest = run.manifest
    totals = manifest["totals"]
    calls = totals["llm_calls"]
    assert calls == len(run.server.answered)
    if run.provider.priced:
        assert totals["unpriced_calls"] == 0
        assert totals["cost_usd"] is not None and totals["cost_usd"] > 0
    else:
        assert totals["unpriced_calls"] == calls
        assert totals["cost_usd"] is None
    for lane in manifest["artifact_lanes"]:
        usage = lane["llm"]
        assert usage["unpriced_calls"] == (0 if run.provider.priced else usage["calls"])
        assert (usage["cost_usd"] is None) == (usage["unpriced_calls"] > 0)
    assert totals["cached_prompt_tokens"] == sum(r.cached_tokens for r in run.server.answered)


# ---- failures a provider answers with every day


@pytest.mark.parametrize("provider_id", [p.id for p in STEPPING])
def test_a_schema_refusal_steps_the_lane_down_one_rung_and_is_recorded(
    provider_id: str, tmp_path: Path, instance: DagsterInstance
) -> None:
    """The provider refuses every request that carries the schema in its enforcing form (its
    real 400: a model without structured-output support); the lane goes on one rung down,
    publishes, and the manifest and warnings say so with the provider's reason."""
    provider = BY_ID[provider_id]
    run = run_against(
        tmp_path,
        instance,
        provider,
        units=40,
        lanes=["npcs"],
        server_options={"refuse_schema": True},
    )
    assert run.outcome.success, run.outcome.error
    refused = [r for r in run.server.requests if r.fault == "schema_refusal"]
    assert refused, "the schema never reached the provider in its enforcing form"
    later = run.server.requests[run.server.requests.index(refused[-1]) + 1 :]
    assert later and all(r.status == 200 and not r.enforced for r in later)
    usage = run.lane("npcs")["llm"]
    assert usage["structured_output_stepdowns"].get("json_schema", 0) >= 1
    assert "json_schema" not in usage["structured_output_rungs"]
    assert run.manifest["totals"]["structured_output_stepdowns"].get("json_schema", 0) >= 1
    stepdowns = [w for w in run.warnings if w["code"] == "structured_output_stepdown"]
    assert len(stepdowns) == 1 and stepdowns[0]["lane"] == "npcs", run.warnings
    assert provider.refusal_words in stepdowns[0]["message"]


@pytest.mark.parametrize("provider_id", FAMILIES)
def test_a_429_waits_what_retry_after_says(
    provider_id: str, tmp_path: Path, instance: DagsterInstance
) -> None:
    """The first request gets the provider's 429 saying "retry after 3 s" (`Retry-After`;
    Gemini says it only as `RetryInfo.retryDelay: "3s"`); the retry comes after 3 s, not
    sooner (a guessed backoff) and not much later, and the run publishes."""
    run = run_against(
        tmp_path,
        instance,
        BY_ID[provider_id],
        units=12,
        lanes=["npcs"],
        prepare=lambda server: server.script(Fault("rate_limit", retry_after_s=RETRY_AFTER_S)),
        max_concurrency=1,
    )
    assert run.outcome.success, run.outcome.error
    first, second = run.server.requests[:2]
    assert first.fault == "rate_limit" and second.status == 200
    waited = second.received_at - first.received_at
    assert RETRY_AFTER_S <= waited < RETRY_AFTER_S + 3, f"retried after {waited:.2f} s"


@pytest.mark.parametrize(
    ("provider_id", "fault"),
    [("openai", "server_error"), ("anthropic", "overloaded"), ("gemini", "overloaded")],
)
def test_a_transient_error_is_retried_and_the_run_publishes(
    provider_id: str, fault: str, tmp_path: Path, instance: DagsterInstance
) -> None:
    """One 500 (OpenAI), 529 `overloaded_error` (Anthropic) or 503 `UNAVAILABLE` (Gemini) is
    retried by the client; the run publishes with every chunk accepted."""
    run = run_against(
        tmp_path,
        instance,
        BY_ID[provider_id],
        units=12,
        lanes=["npcs"],
        prepare=lambda server: server.script(fault),  # type: ignore[arg-type]
        max_concurrency=1,
    )
    assert run.outcome.success, run.outcome.error
    assert [r.fault for r in run.server.requests[:2]] == [fault, None]
    assert run.lane("npcs")["chunks"]["rejected"] == 0


@pytest.mark.parametrize("provider_id", FAMILIES)
def test_a_bad_key_fails_at_once_with_no_retry(
    provider_id: str, tmp_path: Path, instance: DagsterInstance
) -> None:
    """Every request gets the provider's authentication error (OpenAI, Anthropic, Azure,
    Ollama: 401; Gemini: 400 `API_KEY_INVALID`; vLLM: 401). The run fails after one request:
    no client retry, no lane retry, no step retry, within 2 s of it; the error names the
    profile and the model, not the key."""
    provider = BY_ID[provider_id]
    run = run_against(
        tmp_path,
        instance,
        provider,
        units=40,
        lanes=["npcs"],
        prepare=lambda server: server.always("auth"),
        max_concurrency=1,
    )
    assert_permanent_failure(run, provider)


@pytest.mark.parametrize("provider_id", ["openai", "anthropic", "ollama"])
def test_an_unknown_model_fails_at_once_with_no_retry(
    provider_id: str, tmp_path: Path, instance: DagsterInstance
) -> None:
    provider = BY_ID[provider_id]
    run = run_against(
        tmp_path,
        instance,
        provider,
        units=40,
        lanes=["npcs"],
        server_options={"model_names": ["some-other-model"]},
        max_concurrency=1,
    )
    assert_permanent_failure(run, provider)


def assert_permanent_failure(run: Run, provider: Provider) -> None:
    error = run.outcome.error or ""
    assert not run.outcome.success
    assert len(run.server.requests) == 1, f"{len(run.server.requests)} requests for one error"
    assert run.ended_at - run.server.requests[0].received_at < 2.0
    assert provider.profile_name in error and provider.model in error, error
    assert KEY not in error and KEY[-8:] not in error
    assert not run.bundle.exists()


@pytest.mark.timeout(60)
def test_missing_credentials_fail_before_any_request(
    tmp_path: Path, instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LM Studio needs no key, but litellm's OpenAI route insists on one: a profile without
    `api_key_env` and no OPENAI_API_KEY is refused before anything runs (no run, no
    partition, no request), naming the profile, the model and the variable (today: "Missing
    credentials" retried in 3 step attempts, ~80 s with the default backoff)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = BY_ID["lmstudio"]
    started = time.monotonic()
    run = run_against(tmp_path, instance, provider, units=40, lanes=["npcs"], api_key_env=None)
    assert not run.outcome.success
    assert run.server.requests == []
    error = run.outcome.error or ""
    assert provider.profile_name in error and provider.model in error, error
    assert "OPENAI_API_KEY" in error
    assert time.monotonic() - started < 30  # a run of its own, not ~80 s of retries
    assert instance.get_runs() == []  # checked before the run: no run, no partition
    assert instance.get_dynamic_partitions("sessions") == []


# ---- the profile's tiers and pass-through


def test_a_profile_may_choose_the_json_object_rung(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """`structured_output: json_object` is a tier: OpenAI gets `json_object` (never the
    schema in `json_schema`), and the manifest records that rung."""
    run = run_against(
        tmp_path,
        instance,
        BY_ID["openai"],
        units=40,
        lanes=["npcs"],
        structured_output="json_object",
    )
    assert run.outcome.success, run.outcome.error
    assert {r.form for r in run.server.requests} == {"json_object"}
    assert set(run.lane("npcs")["llm"]["structured_output_rungs"]) <= {"json_object", "reask"}


def test_ollama_params_reach_the_server(tmp_path: Path, instance: DagsterInstance) -> None:
    """`params: {num_ctx: 8192}` goes through litellm to Ollama's `options.num_ctx`."""
    run = run_against(
        tmp_path,
        instance,
        BY_ID["ollama"],
        units=40,
        lanes=["npcs"],
        params={"num_ctx": 8192},
    )
    assert run.outcome.success, run.outcome.error
    assert run.server.requests
    assert {r.body.get("options", {}).get("num_ctx") for r in run.server.requests} == {8192}
    assert not any(r.prompt_truncated for r in run.server.requests)


def test_ollama_gets_a_context_window_that_holds_the_request(
    tmp_path: Path, instance: DagsterInstance
) -> None:
    """Ollama cuts a prompt longer than its context window (4,096 tokens unless the request
    says `num_ctx`) without an error: a 200-unit chunk (about 8,000 tokens) must go with a
    `num_ctx` that holds it, or the model never sees most of the chunk."""
    run = run_against(
        tmp_path,
        instance,
        BY_ID["ollama"],
        units=200,
        lanes=["npcs"],
        chunk={"min_units": 200, "max_units": 200, "max_chars": 100_000},
    )
    assert run.outcome.success, run.outcome.error
    requests = run.server.requests
    assert requests and max(estimate_tokens("".join(r.texts)) for r in requests) > 4096
    cut = [
        (r.body.get("options", {}).get("num_ctx"), estimate_tokens("".join(r.texts)))
        for r in requests
        if r.prompt_truncated
    ]
    assert cut == [], "prompts Ollama cut: (num_ctx sent, prompt tokens)"


@pytest.mark.parametrize("provider_id", ["lmstudio", "ollama"])
def test_a_profile_may_price_a_model_litellm_cannot(
    provider_id: str, tmp_path: Path, instance: DagsterInstance
) -> None:
    """Own prices (`input_cost_per_token`, `output_cost_per_token`) price every call: the
    cost is exactly the provider's reported tokens at those prices, nothing is unpriced;
    a price of 0 (a free local model) is a known $0, not an unknown one."""
    prices = {"lmstudio": (2e-7, 8e-7), "ollama": (0.0, 0.0)}[provider_id]
    run = run_against(
        tmp_path,
        instance,
        BY_ID[provider_id],
        units=40,
        lanes=["npcs"],
        input_cost_per_token=prices[0],
        output_cost_per_token=prices[1],
    )
    assert run.outcome.success, run.outcome.error
    totals = run.manifest["totals"]
    answered = run.server.answered
    expected = (
        sum(r.prompt_tokens for r in answered) * prices[0]
        + sum(r.completion_tokens for r in answered) * prices[1]
    )
    assert totals["unpriced_calls"] == 0
    assert totals["cost_usd"] == pytest.approx(expected, rel=1e-6, abs=1e-12)
