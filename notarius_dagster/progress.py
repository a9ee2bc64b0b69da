"""A Dagster logger that shows a person only what they need on a terminal: lane-by-lane,
chunk-by-chunk progress lines and errors (the `notarius run` command uses it)."""

from __future__ import annotations

import logging
import sys

from dagster import Field, InitLoggerContext, logger

PROGRESS_PREFIX = "progress: "


class _ProgressHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", {}) or {}
        message = str(meta.get("orig_message") or record.getMessage())
        step = meta.get("step_key") or ""
        if message.startswith(PROGRESS_PREFIX):
            print(f"  {message[len(PROGRESS_PREFIX) :]}", file=sys.stderr, flush=True)
        elif record.levelno >= logging.ERROR:
            where = f" [{step}]" if step else ""
            print(f"  error{where}: {message}", file=sys.stderr, flush=True)
        elif meta.get("dagster_event") is not None:
            event = meta["dagster_event"]
            kind = getattr(event, "event_type_value", "")
            if kind == "STEP_START":
                print(f"▸ {step}", file=sys.stderr, flush=True)
            elif kind == "STEP_FAILURE":
                print(f"✗ {step} failed", file=sys.stderr, flush=True)


@logger(
    config_schema={"log_level": Field(str, is_required=False, default_value="INFO")},
    description="Progress lines and errors only, for terminals.",
)
def progress_logger(init_context: InitLoggerContext) -> logging.Logger:
    log = logging.Logger("notarius_progress", level=init_context.logger_config["log_level"])
    log.addHandler(_ProgressHandler())
    return log
