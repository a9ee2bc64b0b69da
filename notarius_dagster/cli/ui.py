"""`notarius ui`: the Dagster UI (`dg dev`) and, beside it, the store's bundles and reports
served read-only on loopback, so the `url` and `report_url` links of the asset metadata open
the published files from the UI (`make ui` runs this; docs/operations.md, "The UI").

The file server is the standard library's (`http.server`): GET and HEAD only (anything else
is answered 501 by the library itself), bound to 127.0.0.1 (never another interface), rooted
at the bundles folder (the library refuses paths outside it), with `nosniff` so a browser never
runs a bundle file as something it is not. The report page carries its own
Content-Security-Policy (docs/report.md). `dg dev` gets NOTARIUS_REPORT_BASE_URL and
NOTARIUS_BUNDLE_BASE_URL pointing at it unless they are already set (a deployment that serves
the bundles elsewhere keeps its own), and the file server stops when `dg dev` does."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

from notarius_dagster.cli.common import EXIT_USAGE, CommandError, add_command, add_store_options
from notarius_dagster.settings import (
    BUNDLE_BASE_URL_ENV,
    REPORT_BASE_URL_ENV,
    Settings,
    load_settings,
    store_paths,
)

if TYPE_CHECKING:
    from notarius_dagster.cli.common import Subcommands

LOOPBACK = "127.0.0.1"
UI_PORT = 3000
FILES_PORT = 3001


class ReadOnlyFiles(SimpleHTTPRequestHandler):
    """GET and HEAD of files under the served folder, marked `nosniff`; quiet (the UI's own
    log is the one a person reads)."""

    def end_headers(self) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")  # a re-published bundle shows at once
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


def serve_files(root: Path, port: int) -> ThreadingHTTPServer:
    """Serve `root` read-only on loopback at `port` (0: any free port) in a daemon thread; the
    caller stops it with `shutdown()`."""
    handler = partial(ReadOnlyFiles, directory=str(root))
    server = ThreadingHTTPServer((LOOPBACK, port), handler)
    threading.Thread(target=server.serve_forever, name="notarius-files", daemon=True).start()
    return server


def link_bases(settings: Settings, files_url: str) -> dict[str, str]:
    """What `dg dev` is given so the links of the asset metadata point at the file server:
    only what the settings do not already say (a deployment serving the bundles elsewhere
    keeps its own)."""
    # Imported here: the report package costs every `notarius` command ~0.5 s to import.
    from notarius_dagster.report.publish import REPORTS_DIR

    bases: dict[str, str] = {}
    if settings.bundle_base_url is None:
        bases[BUNDLE_BASE_URL_ENV] = files_url
    if settings.report_base_url is None:
        bases[REPORT_BASE_URL_ENV] = f"{files_url}/{REPORTS_DIR}"
    return bases


def cmd_ui(args: argparse.Namespace) -> int:
    """Start the Dagster UI (`dg dev` on 127.0.0.1) and serve the store's bundles and reports
    read-only on 127.0.0.1 beside it, so the bundle and report links in the asset metadata
    open from the UI. Stops both on Ctrl-C."""
    dg = shutil.which("dg", path=str(Path(sys.executable).parent)) or shutil.which("dg")
    if dg is None:
        raise CommandError("`dg` (dagster-dg-cli) is not installed in this environment", EXIT_USAGE)
    bundles = store_paths(data=args.data, bundles=args.bundles).bundles
    bundles.mkdir(parents=True, exist_ok=True)
    try:
        files = serve_files(bundles, args.files_port)
    except OSError as exc:
        raise CommandError(
            f"cannot serve the bundles on {LOOPBACK}:{args.files_port} ({exc.strerror}); "
            "choose another port with --files-port",
            EXIT_USAGE,
        ) from None
    files_url = f"http://{LOOPBACK}:{files.server_address[1]}"
    print(f"bundles and reports served read-only at {files_url}/", file=sys.stderr)
    command = [dg, "dev", "--host", LOOPBACK, "--port", str(args.port)]
    os.environ.update(link_bases(load_settings(), files_url))  # handed to dg dev, inherited
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0
    finally:
        files.shutdown()


def add_ui_parser(sub: Subcommands) -> None:
    parser = add_command(sub, "ui", cmd_ui, help="the Dagster UI, with the reports served")
    parser.add_argument("--port", type=int, default=UI_PORT, help="the UI's port (3000)")
    parser.add_argument(
        "--files-port", type=int, default=FILES_PORT, help="the bundles' port (3001)"
    )
    add_store_options(parser)
