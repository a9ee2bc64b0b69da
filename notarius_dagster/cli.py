"""`notarius`: the command line. Every command runs the same Dagster code location as the UI
and the sensor, on the instance under DAGSTER_HOME (the embedded SQLite one by default)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from notarius_dagster.settings import REPO_ROOT

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def ensure_dagster_home() -> Path:
    """Use DAGSTER_HOME, or ./var/dagster-home with the repository's dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or REPO_ROOT / "var" / "dagster-home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists() and (REPO_ROOT / "dagster.yaml").exists():
        shutil.copyfile(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _print_summary(bundle_dir: Path, wall: float) -> None:
    from rich.console import Console
    from rich.table import Table

    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    console = Console(stderr=False, width=120)
    console.print(f"[bold]bundle[/bold] {bundle_dir}")
    table = Table("lane", "status", "records", "chunks", "model calls", "reused", "rejections",
                  "warnings", "rungs")
    for lane in manifest["artifact_lanes"]:
        table.add_row(lane["lane_id"], lane["status"], str(lane["records"]),
                      str(lane["chunks"]["total"]), str(lane["llm"]["calls"]),
                      str(lane["chunks"]["reused"]), str(lane["rejections"]),
                      str(lane["warnings"]),
                      ", ".join(f"{k}:{v}" for k, v in lane["llm"]["structured_output_rungs"].items()))
    console.print(table)
    t = manifest["totals"]
    console.print(
        f"validation: {manifest['validation_status']} · rejections: {len(manifest['rejected'])} · "
        f"warnings: {manifest['warnings']} · LLM calls: {t['llm_calls']} · tokens: "
        f"{t['prompt_tokens']}+{t['completion_tokens']} · cost: ${t['cost_usd']:.4f} · "
        f"wall time: {wall:.1f}s")


def cmd_run(args: argparse.Namespace) -> int:
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.resolution import RuntimeBinding
    from notarius_dagster.engine.session_ids import session_id_from_filename, validate_session_id
    from notarius_dagster.engine.transcripts import register_transcript
    from notarius_dagster.runner import run_session

    path = Path(args.path)
    if not path.is_file():
        print(f"error: transcript {path.name!r} not found", file=sys.stderr)
        return EXIT_USAGE
    try:
        session_id = (validate_session_id(args.session_id) if args.session_id
                      else session_id_from_filename(path.name))
        ensure_dagster_home()
        data_root = Path(args.data or os.environ.get("NOTARIUS_DATA") or REPO_ROOT / "var/data")
        register_transcript(data_root.resolve() / "transcripts", session_id, path)
        refs = [RuntimeBinding(selector=s, path=p) for s, _, p in
                (r.partition("=") for r in args.reference)]
        print(f"session {session_id}: materializing with {Path(args.config).name}",
              file=sys.stderr)
        started = time.monotonic()
        outcome = run_session(
            session_id=session_id, profile=Path(args.config), data_root=data_root.resolve(),
            bundles_root=Path(args.out).resolve(), llm_profile=args.llm_profile,
            runtime_references=refs, runtime_unbinds=args.unbind,
            lanes=args.lanes.split(",") if args.lanes else None)
    except NotariusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not outcome.success:
        print(f"error: run {outcome.run_id} failed: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    _print_summary(Path(args.out).resolve() / session_id, time.monotonic() - started)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from notarius_dagster.engine.errors import NotariusError
    from notarius_dagster.engine.resolution import resolve_profile_file
    from notarius_dagster.modules import load_modules

    load_modules()
    try:
        resolved = resolve_profile_file(Path(args.config), llm_profile=args.llm_profile)
    except NotariusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    summary: dict[str, Any] = {
        "pipeline": resolved.pipeline_id, "digest": resolved.digest,
        "llm_profile": resolved.llm_profile_name, "chunker": resolved.chunk.module,
        "lanes": {lane.id: {"kind": lane.kind, "depends_on": list(lane.depends_on),
                            "modules": [s.module for s in lane.stages()]}
                  for lane in resolved.lanes}}
    print(json.dumps(summary, indent=2))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="notarius", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="materialize one transcript through the session asset job")
    run.add_argument("path", help="transcript (.jsonl, .vtt, .srt, .txt)")
    run.add_argument("--config", required=True, help="pipeline profile (configs/*.yaml)")
    run.add_argument("--out", required=True, help="bundle root: the bundle goes to OUT/<session>")
    run.add_argument("--session-id", help="default: derived from the file name")
    run.add_argument("--llm-profile", help="override the profile's LLM profile (e.g. test-double)")
    run.add_argument("--data", help="store root (transcripts, asset values, checkpoints); "
                                    "default NOTARIUS_DATA or ./var/data")
    run.add_argument("--reference", action="append", default=[], metavar="SLOT=PATH",
                     help="bind a reference slot to a file (relative to the working folder)")
    run.add_argument("--unbind", action="append", default=[], metavar="SLOT",
                     help="remove an optional reference binding")
    run.add_argument("--lanes", help="comma-separated subset of the profile's lanes")
    run.set_defaults(func=cmd_run)

    validate = sub.add_parser("validate", help="resolve a profile without running anything")
    validate.add_argument("config")
    validate.add_argument("--llm-profile")
    validate.set_defaults(func=cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
