"""Every environment read of the product goes through `notarius_dagster/settings.py`: no other
module of `notarius_dagster`, `assets` or `resources` reads `os.environ` or calls `os.getenv`
(an AST walk, also inside functions). Writes are allowed anywhere: they hand a value to the
processes this one starts (`os.environ[X] = v`, `del os.environ[X]`, `.pop`, `.setdefault`,
`.update`); what is handed down is read back through settings.py like any other variable."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from notarius_dagster.settings import api_key, load_settings, store_paths

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("notarius_dagster", "assets", "resources")
SETTINGS = Path("notarius_dagster/settings.py")
WRITE_METHODS = frozenset({"pop", "setdefault", "update", "__setitem__", "__delitem__", "clear"})


@dataclass(frozen=True)
class Read:
    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} reads the environment: {self.text}"


def _is_os_environ(node: ast.AST, environ_names: set[str]) -> bool:
    if isinstance(node, ast.Attribute):
        return (
            node.attr in ("environ", "environb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        )
    return isinstance(node, ast.Name) and node.id in environ_names


def environment_reads(path: Path, root: Path) -> list[Read]:
    """Every read of the process environment in `path`."""
    shown = str(path.relative_to(root))
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=shown)
    environ_names: set[str] = set()
    getenv_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ("environ", "environb"):
                    environ_names.add(alias.asname or alias.name)
                if alias.name in ("getenv", "getenvb"):
                    getenv_names.add(alias.asname or alias.name)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[Read] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            os_getenv = (
                isinstance(func, ast.Attribute)
                and func.attr in ("getenv", "getenvb")
                and isinstance(func.value, ast.Name)
                and func.value.id == "os"
            )
            if os_getenv or (isinstance(func, ast.Name) and func.id in getenv_names):
                found.append(Read(shown, node.lineno, ast.unparse(node)))
        if not _is_os_environ(node, environ_names):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store | ast.Del):
            continue  # os.environ[X] = v / del os.environ[X]
        if isinstance(parent, ast.Attribute) and parent.attr in WRITE_METHODS:
            continue  # os.environ.pop(X) / .setdefault(X, v) / .update(...)
        if isinstance(parent, ast.ImportFrom | ast.alias):
            continue
        shown_node = parent if parent is not None else node
        found.append(Read(shown, node.lineno, ast.unparse(shown_node)))
    return sorted(found, key=lambda read: read.line)


def reads_outside_settings(root: Path) -> list[Read]:
    found: list[Read] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.relative_to(root) != SETTINGS:
                found.extend(environment_reads(path, root))
    return found


def test_no_module_but_settings_reads_the_environment() -> None:
    found = reads_outside_settings(REPO)
    assert not found, "\n".join(map(str, found))


PLANTED = textwrap.dedent(
    """
    import os
    from os import environ as env, getenv


    def reads():
        a = os.environ.get("NOTARIUS_X")
        b = os.environ["NOTARIUS_Y"]
        c = "NOTARIUS_Z" in os.environ
        d = dict(os.environ)
        e = os.getenv("NOTARIUS_W")
        f = env.get("NOTARIUS_V")
        g = getenv("NOTARIUS_U")
        return a, b, c, d, e, f, g


    def default(environ=os.environ):
        return environ


    def writes():
        os.environ["NOTARIUS_A"] = "1"
        del os.environ["NOTARIUS_A"]
        os.environ.pop("NOTARIUS_B", None)
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        env["NOTARIUS_C"] = "2"
    """
)


def test_the_walk_finds_every_kind_of_read_and_no_write(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "assets" / "leaky.py").write_text(PLANTED, encoding="utf-8")
    (tmp_path / SETTINGS).write_text(PLANTED, encoding="utf-8")  # settings may read
    assert [read.line for read in reads_outside_settings(tmp_path)] == [7, 8, 9, 10, 11, 12, 13, 17]


# ---- Settings reads what it promises


def test_settings_read_each_variable_stripped_and_empty_as_unset(tmp_path: Path) -> None:
    settings = load_settings(
        {
            "NOTARIUS_PROFILE": str(tmp_path / "p.yaml"),
            "NOTARIUS_LLM_PROFILE": "",
            "NOTARIUS_DATA": str(tmp_path / "data"),
            "NOTARIUS_REPORT_BASE_URL": " https://reports.example/ ",
            "NOTARIUS_BUNDLE_BASE_URL": "   ",
            "NOTARIUS_INBOX_MAX_RUNS": "3",
        }
    )
    assert settings.profile == tmp_path / "p.yaml"
    assert settings.llm_profile is None
    assert settings.store == store_paths(data=tmp_path / "data", environ={})
    assert settings.report_base_url == "https://reports.example/"
    assert settings.bundle_base_url is None
    assert settings.inbox_limits == {"NOTARIUS_INBOX_MAX_RUNS": "3"}


def test_the_api_key_is_read_from_the_variable_the_profile_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOTARIUS_TEST_KEY", " sk-test ")
    assert api_key("NOTARIUS_TEST_KEY") == "sk-test"
    assert api_key(None) is None
    monkeypatch.setenv("NOTARIUS_TEST_KEY", "")
    assert api_key("NOTARIUS_TEST_KEY") is None
