"""`notarius ui` serves the store's bundles and reports read-only on loopback, and the links
the asset metadata records open them (issue 21: "a link that opens the report from the UI").
Real sockets, real HTTP: the standard library's client against the server the command starts."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest

from notarius_dagster.cli.ui import LOOPBACK, link_bases, serve_files
from notarius_dagster.report import report_path, report_url, write_report
from notarius_dagster.settings import BUNDLE_BASE_URL_ENV, REPORT_BASE_URL_ENV, load_settings

PAGE = "<!DOCTYPE html>\n<html><head><title>r</title></head><body>report</body></html>\n"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    bundles = tmp_path / "store" / "bundles"
    (bundles / "s1").mkdir(parents=True)
    (bundles / "s1" / "index.json").write_text('{"session_id": "s1"}')
    write_report(bundles, "s1", PAGE)
    (tmp_path / "store" / "secret.txt").write_text("not for the browser")
    server = serve_files(bundles, 0)
    try:
        yield bundles, f"http://{LOOPBACK}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def request(
    url: str, path: str, method: str = "GET", body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request(method, path, body=body)
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def test_the_report_link_the_asset_records_opens_the_report(served: tuple[Path, str]) -> None:
    bundles, files_url = served
    bases = link_bases(load_settings({}), files_url)
    link = report_url(bases[REPORT_BASE_URL_ENV], "s1")  # what session_report's metadata holds
    assert link == f"{files_url}/.reports/s1.html"
    status, headers, body = request(files_url, link.removeprefix(files_url))
    assert status == 200 and body == report_path(bundles, "s1").read_bytes()
    assert headers["Content-type"] == "text/html"
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, _, body = request(files_url, "/s1/index.json")  # the bundle link's folder
    assert status == 200 and b'"session_id"' in body
    assert bases[BUNDLE_BASE_URL_ENV] == files_url


def test_the_file_server_is_read_only_on_loopback_and_stays_in_the_bundles(
    served: tuple[Path, str],
) -> None:
    bundles, files_url = served
    assert files_url.startswith("http://127.0.0.1:")
    for method in ("PUT", "POST", "DELETE"):
        status, _, _ = request(files_url, "/.reports/s1.html", method, b"overwritten")
        assert status == 501, method
    assert report_path(bundles, "s1").read_text() == PAGE
    for escape in ("/../secret.txt", "/%2e%2e/secret.txt", "/.reports/../../secret.txt"):
        status, _, body = request(files_url, escape)
        assert status == 404 and b"not for the browser" not in body, escape


def test_links_the_deployment_already_sets_are_kept() -> None:
    settings = load_settings({REPORT_BASE_URL_ENV: "https://reports.example/r"})
    assert link_bases(settings, "http://127.0.0.1:3001") == {
        BUNDLE_BASE_URL_ENV: "http://127.0.0.1:3001"
    }
