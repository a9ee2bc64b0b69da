"""The oracle ceiling and the error-injection suite (`bench_quality.py --oracle`): the oracle
(`benchmarks/oracle.py`) served on loopback as an OpenAI-compatible provider, named by a
profile's `llm_profiles` entry, run through `notarius_dagster.run.runner.run_session` (what
`notarius run` calls: the real client, the Dagster asset job, every validator, merge and
normalizer) on each gold session, and the published bundles scored against `data/gold/`.

- **Ceiling**: the clean oracle, with the session's campaign profile (the party roster bound)
  and with `configs/dnd-complete.yaml` (no roster). Per lane and session: P/R/F1 by name and
  grounded (scorer v2, with v1 beside it), and per gold record what the pipeline did with the
  oracle's answer: kept, split into several records, merged into another, or lost (every
  piece rejected, and by which validator; or never asked, as for combat turns in a chunk whose
  scene is not combat).
- **Injection**: for each class of `benchmarks/oracle_injection.py`, one run of the campaign
  profile with that class injected at `rate` (seeded), the publish policy's
  `min_accepted_chunk_share` set to 0 so that every run publishes and each mistake's fate can be
  read in the bundle. Per class: injected, caught (with what stopped it) and reached the bundle."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dagster import DagsterInstance

from benchmarks.oracle import Answered, OracleSession, Responder, clean_responder, serve
from benchmarks.oracle_injection import (
    CAUGHT_MEANS,
    CLASSES,
    Injection,
    Injector,
    Member,
    Published,
    Table,
    fate,
    measurable,
    piece_fate,
)
from notarius_dagster.dnd.roster import Roster
from notarius_dagster.engine.evaluation import (
    EvaluationReport,
    MatchFields,
    cited_units,
    evaluate,
    normalize_name,
)
from notarius_dagster.engine.gold import GoldFile, load_gold
from notarius_dagster.engine.inputs import parse_transcript
from notarius_dagster.engine.transcripts import register_transcript
from notarius_dagster.modules import registry
from notarius_dagster.run.runner import run_session

ROOT = Path(__file__).resolve().parent.parent
GOLD = ROOT / "data" / "gold"
KEY_ENV = "NOTARIUS_ORACLE_KEY"
LLM_PROFILE = "oracle"


@dataclass(frozen=True)
class OracleSessionSpec:
    """A gold session: its transcript, the campaign profile binding its party roster, and the
    DM's speaker labels (a roster cannot declare them yet; the rosters' comments name them)."""

    session_id: str
    transcript: Path
    campaign: Path
    dm_labels: tuple[str, ...]


SESSIONS = (
    OracleSessionSpec(
        "crd3-c2e001-slice",
        ROOT / "samples" / "crd3-c2e001-slice.jsonl",
        ROOT / "configs" / "campaign-mighty-nein.yaml",
        ("MATT",),
    ),
    OracleSessionSpec(
        "fireball-sea-hag",
        ROOT / "data" / "sessions" / "fireball-sea-hag.jsonl",
        ROOT / "configs" / "campaign-fireball-sea-hag.yaml",
        ("Player 0",),
    ),
    OracleSessionSpec(
        "crd3-c2e003-u1944-2143",
        ROOT / "data" / "slices" / "crd3-c2e003-u1944-2143.jsonl",
        ROOT / "configs" / "campaign-mighty-nein.yaml",
        ("MATT",),
    ),
)
PROFILES = {
    "campaign": None,  # the session's campaign profile (roster bound)
    "no-roster": ROOT / "configs" / "dnd-complete.yaml",
}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- one run -----------------------------------------------------------------------------------


def write_profile(
    base: Path, folder: Path, api_base: str, *, publish: Mapping[str, Any] | None = None
) -> Path:
    """A copy of `base` whose LLM profile is the oracle at `api_base` (reference paths made
    absolute, since the copy lives elsewhere)."""
    config = yaml.safe_load(base.read_text())
    pipeline = config["pipeline"]
    for binding in (pipeline.get("references") or {}).values():
        if isinstance(binding, dict) and "path" in binding:
            binding["path"] = str((base.parent / binding["path"]).resolve())
    pipeline["llm_profile"] = LLM_PROFILE
    if publish is not None:
        pipeline["publish"] = dict(publish)
    config["llm_profiles"] = {
        LLM_PROFILE: {
            "model": "openai/oracle",
            "api_base": api_base,
            "api_key_env": KEY_ENV,
            "timeout_s": 60,
            "retries": 0,
            "max_concurrency": 4,
        }
    }
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / base.name
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


@dataclass(frozen=True)
class RunResult:
    success: bool
    error: str | None
    wall_time_s: float
    bundle: Path | None
    calls: dict[str, int]


def run_once(
    spec: OracleSessionSpec,
    base_profile: Path,
    respond: Responder,
    store: Path,
    *,
    publish: Mapping[str, Any] | None = None,
) -> RunResult:
    """One pipeline run of `spec` with `respond` as the model, in a fresh store."""
    os.environ.setdefault(KEY_ENV, "oracle-key")
    server = serve(respond)
    try:
        profile = write_profile(base_profile, store / "profile", server.api_base, publish=publish)
        data = store / "data"
        register_transcript(data / "transcripts", spec.session_id, spec.transcript)
        started = time.perf_counter()
        with DagsterInstance.ephemeral() as instance:
            outcome = run_session(
                session_id=spec.session_id,
                profile=profile,
                data_root=data,
                llm_profile=LLM_PROFILE,
                instance=instance,
                quiet=True,
            )
        wall = round(time.perf_counter() - started, 2)
    finally:
        server.stop()
    bundle = data / "bundles" / spec.session_id
    return RunResult(
        outcome.success,
        outcome.error,
        wall,
        bundle if (bundle / "manifest.json").is_file() else None,
        dict(sorted(server.calls.by_lane.items())),
    )


# --- reading a bundle ------------------------------------------------------------------------


def read_published(bundle: Path, match_fields: Mapping[str, MatchFields]) -> Published:
    from notarius_dagster.engine.evaluation import load_bundle

    view = load_bundle(bundle, match_fields)
    chunk_map = json.loads((bundle.resolve() / "chunk-map.json").read_text())
    return Published(
        records={lane_id: lane.records for lane_id, lane in view.lanes.items()},
        order=view.order,
        chunk_ids={tuple(c["unit_ids"]): c["chunk_id"] for c in chunk_map["chunks"]},
        rejected=json.loads((bundle / "rejected.json").read_text()),
        warnings=json.loads((bundle / "warnings.json").read_text()),
    )


def scores(report: EvaluationReport) -> dict[str, Any]:
    """Per lane and total: P/R/F1 by name and grounded, citation precision, records."""

    def one(row: Any) -> dict[str, Any]:
        return {
            "predicted": row.predicted,
            "gold": row.gold,
            "precision": row.by_name.precision,
            "recall": row.by_name.recall,
            "f1": row.by_name.f1,
            "grounded_precision": row.grounded.precision,
            "grounded_recall": row.grounded.recall,
            "grounded_f1": row.grounded.f1,
            "citation_precision": row.citation.precision,
        }

    lanes = {row.lane_id: {"status": row.status, **one(row)} for row in report.lanes}
    return {"lanes": lanes, "totals": one(report.totals)}


# --- what the pipeline did with the oracle's answers --------------------------------------------


def losses(
    gold: GoldFile,
    published: Published,
    answered: Answered,
    match_fields: Mapping[str, MatchFields],
    kinds: Mapping[str, str],
) -> dict[str, Any]:
    """Per lane: the oracle's pieces (one per gold record and chunk it answered) and what the
    validators did with them, and per gold record its outcome in the bundle."""
    out: dict[str, Any] = {}
    for lane, records in gold.lanes.items():
        fields = match_fields.get(kinds.get(lane, ""))
        if fields is None:
            continue
        pieces: dict[int, list[tuple[tuple[int, ...], int]]] = {}
        for (answered_lane, chunk), indexes in answered.items():
            if answered_lane == lane:
                for position, index in enumerate(indexes):
                    pieces.setdefault(index, []).append((chunk, position))
        piece_fates: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        details: list[dict[str, Any]] = []
        for index, record in enumerate(records):
            asked = pieces.get(index, [])
            fates = [piece_fate(published, lane, chunk, pos) for chunk, pos in asked]
            piece_fates.update(fates)
            result = _outcome(record, fates, published, lane, fields)
            outcomes[result] += 1
            if result != "kept":
                details.append(
                    {
                        "gold": _names(record, fields)[:1],
                        "unit_ids": [min(record.unit_ids), max(record.unit_ids)],
                        "outcome": result,
                        "pieces": [
                            {"chunk": [chunk[0], chunk[-1]], "fate": f}
                            for (chunk, _), f in zip(asked, fates, strict=True)
                        ],
                    }
                )
        out[lane] = {
            "pieces": dict(sorted(piece_fates.items())),
            "gold_records": dict(sorted(outcomes.items())),
            "not_kept": details,
        }
    return out


def _outcome(
    record: Any, fates: Sequence[str], published: Published, lane: str, fields: MatchFields
) -> str:
    if not fates:
        return "never asked (no request for a chunk holding it)"
    names = {normalize_name(n) for n in _names(record, fields)}
    units = set(record.unit_ids)
    positions = {u: p for p, u in enumerate(published.order)}
    mine = [
        r
        for r in published.records.get(lane, ())
        if _own_names(r, fields) & names
        and set(cited_units(_refs(r, fields), positions, published.order)) & units
    ]
    if not any(f == "accepted" for f in fates):
        rejected = sorted({f for f in fates})
        return "lost: every piece " + " / ".join(rejected)
    if not mine:
        merged = any(
            names & {normalize_name(a) for a in (r.get(fields.aliases or "") or [])}
            for r in published.records.get(lane, ())
        )
        return "lost: merged into another record" if merged else "lost after extraction"
    if len(mine) > 1 and not fields.many_to_one:
        return f"split into {len(mine)} records"
    partly = any(f != "accepted" for f in fates)
    return "kept (some pieces rejected)" if partly else "kept"


def _names(record: Any, fields: MatchFields) -> list[str]:
    value = record.value(fields.name)
    values = value if isinstance(value, list) else [value]
    return [str(v) for v in values if v is not None] + list(record.aliases)


def _own_names(record: Mapping[str, Any], fields: MatchFields) -> set[str]:
    value = record.get(fields.name)
    return {normalize_name(str(value))} if value is not None else set()


def _refs(record: Mapping[str, Any], fields: MatchFields) -> list[Mapping[str, Any]]:
    refs = record.get(fields.refs)
    return [refs] if isinstance(refs, dict) else list(refs or [])


# --- the benchmark -----------------------------------------------------------------------------


def party_of(spec: OracleSessionSpec) -> list[Member]:
    """The party members the campaign's roster says play in this session (what the product's
    party rules can know)."""
    config = yaml.safe_load(spec.campaign.read_text())
    roster_path = spec.campaign.parent / config["pipeline"]["references"]["roster"]["path"]
    roster = Roster.model_validate(yaml.safe_load(roster_path.read_text()))
    number = roster.session_number(spec.session_id)
    return [
        Member(m.character, (m.character, *m.aliases), tuple(m.labels()))
        for m in roster.party
        if m.plays_in(number)
    ]


def bench_session(
    spec: OracleSessionSpec,
    store: Path,
    *,
    classes: Sequence[str],
    rate: float,
    seed: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    match_fields = registry().match_fields()
    gold_path = GOLD / f"{spec.session_id}.json"
    gold = load_gold(gold_path)
    session = OracleSession(gold)
    out: dict[str, Any] = {
        "session_id": spec.session_id,
        "transcript": _rel(spec.transcript),
        "gold": _rel(gold_path),
        "campaign_profile": _rel(spec.campaign),
        "ceiling": {},
        "injection": {},
    }
    clean_bundles: dict[str, Published] = {}
    for name, base in PROFILES.items():
        profile = base or spec.campaign
        answered: Answered = {}
        result = run_once(
            spec, profile, clean_responder(session, answered), store / f"clean-{name}"
        )
        entry: dict[str, Any] = {
            "profile": _rel(profile),
            "success": result.success,
            "error": result.error,
            "wall_time_s": result.wall_time_s,
            "calls": result.calls,
        }
        if result.bundle is not None:
            report = evaluate(result.bundle, gold_path, match_fields)
            report_v1 = evaluate(result.bundle, gold_path, match_fields, scorer="v1")
            published = read_published(result.bundle, match_fields)
            clean_bundles[name] = published
            kinds = {row.lane_id: row.kind or "" for row in report.lanes}
            entry["scores"] = scores(report)
            entry["scores_v1"] = scores(report_v1)
            entry["losses"] = losses(gold, published, answered, match_fields, kinds)
        out["ceiling"][name] = entry
        totals = (entry.get("scores") or {}).get("totals") or {}
        log(
            f"{spec.session_id} ceiling ({name}): success={result.success} "
            f"wall={result.wall_time_s}s F1={totals.get('f1')} "
            f"grounded F1={totals.get('grounded_f1')}"
        )
    document = parse_transcript(
        spec.transcript.read_bytes(), file_name=spec.transcript.name, source_id=spec.session_id
    )
    table = Table.of(document, party_of(spec), spec.dm_labels)
    clean = clean_bundles.get("campaign")
    for cls in classes:
        injector = Injector(cls, rate, seed, session, table)
        result = run_once(
            spec,
            spec.campaign,
            injector.responder(),
            store / f"inject-{cls}",
            publish={"min_accepted_chunk_share": 0},
        )
        entry = {
            "success": result.success,
            "error": result.error,
            "wall_time_s": result.wall_time_s,
        }
        if result.bundle is not None and clean is not None:
            published = read_published(result.bundle, match_fields)
            entry.update(tally(list(injector.log.values()), published, clean))
            report = evaluate(result.bundle, gold_path, match_fields)
            entry["totals"] = scores(report)["totals"]
        out["injection"][cls] = entry
        log(
            f"{spec.session_id} {cls}: injected={entry.get('injected')} "
            f"caught={entry.get('caught')} reached={entry.get('reached')} "
            f"wall={result.wall_time_s}s"
        )
    return out


def tally(
    injections: Sequence[Injection], published: Published, clean: Published
) -> dict[str, Any]:
    """Injected, caught and reached, in total and per lane, and what caught them; mistakes
    made on a record the clean run already lost are left out (counted in `left_out`)."""
    by_lane: dict[str, Counter[str]] = {}
    stopped: Counter[str] = Counter()
    unmeasured = 0
    through: list[dict[str, Any]] = []
    for injection in injections:
        if not measurable(injection, clean):
            unmeasured += 1
            continue
        got_through, why = fate(injection, published, clean)
        counts = by_lane.setdefault(injection.lane, Counter())
        counts["injected"] += 1
        counts["reached" if got_through else "caught"] += 1
        if not got_through:
            stopped[why] += 1
        else:  # which mistakes a user would publish, for reading them in the bundle
            through.append(
                {
                    "lane": injection.lane,
                    "name": injection.name or injection.value,
                    "chunk": [injection.chunk[0], injection.chunk[-1]],
                }
            )
    total = sum((c for c in by_lane.values()), Counter())
    return {
        "injected": total["injected"],
        "caught": total["caught"],
        "reached": total["reached"],
        "by_lane": {
            lane: {k: c[k] for k in ("injected", "caught", "reached")}
            for lane, c in sorted(by_lane.items())
        },
        "caught_by": dict(sorted(stopped.items())),
        "left_out": unmeasured,
        "reached_records": through,
    }


def summarize(sessions: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> dict[str, Any]:
    """Per class over all sessions: injected, caught, reached, the caught share, per lane and
    what caught them; and per lane the lowest ceiling over sessions."""
    per_class: dict[str, Any] = {}
    for cls in classes:
        counts: Counter[str] = Counter()
        lanes: dict[str, Counter[str]] = {}
        stopped: Counter[str] = Counter()
        for session in sessions:
            entry = session["injection"].get(cls) or {}
            for key in ("injected", "caught", "reached", "left_out"):
                counts[key] += int(entry.get(key) or 0)
            for lane, c in (entry.get("by_lane") or {}).items():
                lanes.setdefault(lane, Counter()).update(c)
            stopped.update(entry.get("caught_by") or {})
        per_class[cls] = {
            "injected": counts["injected"],
            "caught": counts["caught"],
            "reached": counts["reached"],
            "caught_share": round(counts["caught"] / counts["injected"], 4)
            if counts["injected"]
            else None,
            "by_lane": {lane: dict(c) for lane, c in sorted(lanes.items())},
            "caught_by": dict(sorted(stopped.items())),
            "left_out": counts["left_out"],
        }
    ceiling: dict[str, Any] = {}
    for name in PROFILES:
        lanes_min: dict[str, dict[str, float | None]] = {}
        for session in sessions:
            lanes = ((session["ceiling"].get(name) or {}).get("scores") or {}).get("lanes") or {}
            for lane, row in lanes.items():
                slot = lanes_min.setdefault(lane, {"f1": None, "grounded_f1": None})
                for key in ("f1", "grounded_f1"):
                    value, lowest = row.get(key), slot[key]
                    if value is not None and (lowest is None or value < lowest):
                        slot[key] = value
        ceiling[name] = dict(sorted(lanes_min.items()))
    return {
        "classes": per_class,
        "caught_means": {cls: CAUGHT_MEANS[cls] for cls in classes if cls in CAUGHT_MEANS},
        "lowest_ceiling_per_lane": ceiling,
    }


__all__ = ["CLASSES", "SESSIONS", "bench_session", "summarize"]
