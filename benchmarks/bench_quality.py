"""Extraction quality against gold: runs the complete profile (`configs/dnd-complete.yaml`) on
the three sessions that have gold files, through the same Dagster asset job as `notarius run`
(`notarius_dagster.run.runner.run_session`, an ephemeral instance, a throw-away store), scores each
published bundle against its gold (`notarius_dagster.engine.evaluation`) and writes
benchmarks/results/quality.json: per session and lane the scores, records, rejections by
validator, model calls and tokens, the wall time, and the model and profile digest.

    .venv/bin/python benchmarks/bench_quality.py                      # the bundled offline model
    .venv/bin/python benchmarks/bench_quality.py --sessions crd3-c2e001-slice
    .venv/bin/python benchmarks/bench_quality.py --test-double --out /tmp/q.json

`--test-double` runs the in-process test double of the test suite (tests/llm_double.py, not a
model: keyword rules, tests/lane_doubles.py) instead of a model: the pipeline's own cost.

With `--oracle` it measures the pipeline instead of a model (`benchmarks/quality_oracle.py`):
the oracle answers every chunk with exactly its gold records, clean (the ceiling: what the
pipeline itself loses) and with each class of realistic mistakes injected (what the validators
catch and what reaches the bundle), and writes benchmarks/results/quality-oracle.json:

    .venv/bin/python benchmarks/bench_quality.py --oracle [--classes C,...] [--rate 0.5]

Scores are the v2 scorer's, with the v1 scorer's beside them (`scores_v1`) for one release.
On demand only, never part of the test suite. The bundled 135M model proves the path, it does
not measure extraction quality (docs/evaluation.md); never tune prompts to one gold file."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from dagster import DagsterInstance  # noqa: E402

from notarius_dagster.engine.evaluation import evaluate  # noqa: E402
from notarius_dagster.engine.transcripts import register_transcript  # noqa: E402
from notarius_dagster.modules import registry  # noqa: E402
from notarius_dagster.run.runner import run_session  # noqa: E402

PROFILE = ROOT / "configs" / "dnd-complete.yaml"
GOLD = ROOT / "data" / "gold"
RESULT = ROOT / "benchmarks" / "results" / "quality.json"
ORACLE_RESULT = ROOT / "benchmarks" / "results" / "quality-oracle.json"


@dataclass(frozen=True)
class Session:
    session_id: str
    transcript: Path


SESSIONS = (
    Session("crd3-c2e001-slice", ROOT / "samples" / "crd3-c2e001-slice.jsonl"),
    Session("fireball-sea-hag", ROOT / "data" / "sessions" / "fireball-sea-hag.jsonl"),
    Session("crd3-c2e003-u1944-2143", ROOT / "data" / "slices" / "crd3-c2e003-u1944-2143.jsonl"),
)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _score(row: Any) -> dict[str, Any]:
    return {
        "by_name": row.by_name.model_dump(),
        "grounded": row.grounded.model_dump(),
        "citation": row.citation.model_dump(),
        "predicted": row.predicted,
        "gold": row.gold,
    }


def bench_session(session: Session, llm_profile: str, store: Path) -> dict[str, Any]:
    """Run one session and score it; a failed run is recorded, not raised."""
    data = store / session.session_id
    register_transcript(data / "transcripts", session.session_id, session.transcript)
    started = time.perf_counter()
    with DagsterInstance.ephemeral() as instance:
        outcome = run_session(
            session_id=session.session_id,
            profile=PROFILE,
            data_root=data,
            llm_profile=llm_profile,
            instance=instance,
            quiet=True,
        )
    wall = round(time.perf_counter() - started, 2)
    out: dict[str, Any] = {
        "session_id": session.session_id,
        "transcript": _rel(session.transcript),
        "gold": _rel(GOLD / f"{session.session_id}.json"),
        "success": outcome.success,
        "error": outcome.error,
        "wall_time_s": wall,
    }
    bundle = data / "bundles" / session.session_id
    if not (bundle / "manifest.json").is_file():
        return out
    manifest = json.loads((bundle / "manifest.json").read_text())
    rejected = json.loads((bundle / "rejected.json").read_text())
    gold = GOLD / f"{session.session_id}.json"
    report = evaluate(bundle, gold, registry().match_fields())
    report_v1 = evaluate(bundle, gold, registry().match_fields(), scorer="v1")
    scores = {row.lane_id: row for row in report.lanes}
    scores_v1 = {row.lane_id: row for row in report_v1.lanes}
    by_validator: dict[str, Counter[str]] = {}
    for rejection in rejected:
        by_validator.setdefault(str(rejection.get("lane")), Counter())[
            str(rejection.get("validator"))
        ] += 1
    lanes = {}
    for lane in manifest["artifact_lanes"]:
        lane_id = lane["lane_id"]
        row = scores.get(lane_id)
        lanes[lane_id] = {
            "status": lane["status"],
            "records": lane["records"],
            "chunks": lane["chunks"],
            "llm_calls": lane["llm"]["calls"],
            "prompt_tokens": lane["llm"]["prompt_tokens"],
            "completion_tokens": lane["llm"]["completion_tokens"],
            "rungs": lane["llm"]["structured_output_rungs"],
            "rejections_by_validator": dict(sorted(by_validator.get(lane_id, Counter()).items())),
            "scored_as": row.status if row else None,
            "scores": _score(row) if row else None,
            "scores_v1": _score(scores_v1[lane_id]) if lane_id in scores_v1 else None,
        }
    totals = manifest["totals"]
    out.update(
        {
            "model": manifest["llm_profile"]["model"],
            "pipeline_digest": manifest["pipeline"]["digest"],
            "source_digest": manifest["source"]["digest"],
            "units": manifest["source"]["units"],
            "chunks": manifest["chunks"],
            "validation_status": manifest["validation_status"],
            "run_wall_time_s": manifest["timing"]["wall_time_s"],
            "llm": {
                "calls": totals["llm_calls"],
                "prompt_tokens": totals["prompt_tokens"],
                "completion_tokens": totals["completion_tokens"],
            },
            "lanes": lanes,
            "totals": _score(report.totals),
            "totals_v1": _score(report_v1.totals),
        }
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--llm-profile",
        default="offline",
        help="named LLM profile (default: offline, the bundled model)",
    )
    parser.add_argument(
        "--sessions", help="comma-separated subset of: " + ", ".join(s.session_id for s in SESSIONS)
    )
    parser.add_argument("--out", help="where to write the figures (default: results/...)")
    parser.add_argument(
        "--test-double",
        action="store_true",
        help="answer with the test suite's keyword double (tests/llm_double.py), not a model",
    )
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="measure the pipeline with the oracle: ceiling and injected mistakes",
    )
    parser.add_argument(
        "--classes", help="--oracle: comma-separated injection classes (default all)"
    )
    parser.add_argument("--rate", type=float, default=0.5, help="--oracle: injection rate")
    parser.add_argument("--seed", type=int, default=19, help="--oracle: injection seed")
    args = parser.parse_args(argv)
    if args.oracle:
        return oracle_main(args, parser)
    args.out = args.out or str(RESULT)
    chosen = [s for s in SESSIONS if not args.sessions or s.session_id in args.sessions.split(",")]
    if not chosen:
        parser.error("no such session")
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="bench-quality-home-"))
    results = []
    with contextlib.ExitStack() as stack:
        if args.test_double:
            from tests.lane_doubles import complete_responder
            from tests.llm_double import install_profile, scripted_llm

            install_profile()
            args.llm_profile = "test-double"
            stack.enter_context(scripted_llm(complete_responder))
        store = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-quality-"))
        for session in chosen:
            print(
                f"{session.session_id}: running the complete profile with {args.llm_profile!r}",
                file=sys.stderr,
                flush=True,
            )
            result = bench_session(session, args.llm_profile, Path(store))
            totals = result.get("totals") or {}
            print(
                f"{session.session_id}: success={result['success']} wall={result['wall_time_s']}s "
                f"F1={totals.get('by_name', {}).get('f1')} "
                f"grounded F1={totals.get('grounded', {}).get('f1')}",
                file=sys.stderr,
                flush=True,
            )
            results.append(result)
    models = sorted({r["model"] for r in results if "model" in r})
    digests = sorted({r["pipeline_digest"] for r in results if "pipeline_digest" in r})
    document = {
        "benchmark": "quality",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "profile": _rel(PROFILE),
        "llm_profile": args.llm_profile,
        "model": models[0] if len(models) == 1 else models,
        "pipeline_digest": digests[0] if len(digests) == 1 else digests,
        "sessions": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out.name}", file=sys.stderr)
    return 0 if all(r["success"] for r in results) else 1


def oracle_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`--oracle`: the ceiling and the injection suite on the gold sessions."""
    from benchmarks import quality_oracle

    specs = quality_oracle.SESSIONS
    chosen = [s for s in specs if not args.sessions or s.session_id in args.sessions.split(",")]
    classes = args.classes.split(",") if args.classes else list(quality_oracle.CLASSES)
    unknown = sorted(set(classes) - set(quality_oracle.CLASSES))
    if not chosen or unknown or not 0 < args.rate <= 1:
        parser.error(f"no such session or class ({', '.join(unknown)}), or a rate outside (0, 1]")
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="bench-quality-home-"))
    started = time.perf_counter()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-quality-oracle-") as store:
        for spec in chosen:
            results.append(
                quality_oracle.bench_session(
                    spec,
                    Path(store) / spec.session_id,
                    classes=classes,
                    rate=args.rate,
                    seed=args.seed,
                    log=log,
                )
            )
    document = {
        "benchmark": "quality-oracle",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "bench_quality.py " + " ".join(sys.argv[1:]),
        "git_commit": _git_commit(),
        "cores": os.cpu_count(),
        "scorer": "v2 (scores_v1: the v1 scorer, for one release)",
        "rate": args.rate,
        "seed": args.seed,
        "classes": classes,
        "wall_time_s": round(time.perf_counter() - started, 1),
        "summary": quality_oracle.summarize(results, classes),
        "sessions": results,
    }
    out = Path(args.out or ORACLE_RESULT)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out.name} in {document['wall_time_s']} s", file=sys.stderr)
    return 0


def _git_commit() -> str | None:
    import subprocess

    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
