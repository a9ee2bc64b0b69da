"""The engine is pure Python: no module under `notarius_dagster/engine/` imports Dagster, the
D&D lanes, the LLM layer, the Dagster assets and resources, a provider SDK, or any other part
of `notarius_dagster` outside the engine, at any depth. What the engine needs from those layers
is injected (the module catalog, the LLM profile catalog, a `StructuredClient`).

Two checks: every import statement of every engine module, read with `ast` (also the ones
inside functions, `importlib.import_module("...")` and `__import__("...")` with a literal
name), and a fresh interpreter that imports every engine module and then looks at
`sys.modules`."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ENGINE = REPO / "notarius_dagster" / "engine"
ENGINE_PACKAGE = "notarius_dagster.engine"

FORBIDDEN_TOP_LEVEL = ("dagster", "litellm", "openai", "assets", "resources")
"""Top-level packages the engine never imports (also `dagster_*` integrations)."""


@dataclass(frozen=True)
class Import:
    """One imported module name, where it was written."""

    file: str
    line: int
    module: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} imports {self.module}"


def is_forbidden(module: str) -> bool:
    """True for a module the engine must not load: a forbidden top-level package, or any
    `notarius_dagster` module outside `notarius_dagster.engine` (the bare package itself is
    the engine's parent and loads nothing)."""
    parts = module.split(".")
    top = parts[0]
    if top in FORBIDDEN_TOP_LEVEL or top.startswith("dagster_"):
        return True
    if top == "notarius_dagster":
        return len(parts) > 1 and parts[1] != "engine"
    return False


def module_name(path: Path, root: Path) -> str:
    relative = path.relative_to(root).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name of `from <level dots><module> import ...` written in `current`."""
    base = current.split(".") if is_package else current.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _dynamic_import(node: ast.Call) -> str | None:
    """The literal module name of `importlib.import_module("x")`, `import_module("x")` or
    `__import__("x")`; None for any other call."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    return _literal(node.args[0])


def imports_of(path: Path, root: Path) -> list[Import]:
    """Every module `path` imports, relative imports resolved. For `from X import a`, both
    `X` and `X.a` are listed (`a` may be a submodule)."""
    current = module_name(path, root)
    is_package = path.name == "__init__.py"
    shown = str(path.relative_to(root))
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=shown)):
        if isinstance(node, ast.Import):
            found.extend(Import(shown, node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve_relative(current, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            found.append(Import(shown, node.lineno, base))
            found.extend(
                Import(shown, node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if alias.name != "*"
            )
        elif isinstance(node, ast.Call):
            target = _dynamic_import(node)
            if target is not None:
                found.append(Import(shown, node.lineno, target))
    return found


def offenders(root: Path, package_dir: Path) -> list[Import]:
    """The forbidden imports under `package_dir`, one per statement and module (`from X
    import a` is reported as `X` when `X` itself is forbidden)."""
    found: list[Import] = []
    for path in sorted(package_dir.rglob("*.py")):
        for imp in imports_of(path, root):
            covered = any(
                o.file == imp.file and o.line == imp.line and imp.module.startswith(o.module + ".")
                for o in found
            )
            if is_forbidden(imp.module) and not covered:
                found.append(imp)
    return found


def engine_modules() -> list[str]:
    return sorted(module_name(path, REPO) for path in ENGINE.rglob("*.py"))


# ---- the checks


def test_no_engine_module_imports_a_forbidden_module_at_any_depth() -> None:
    found = offenders(REPO, ENGINE)
    assert not found, "the engine imports outside itself:\n" + "\n".join(map(str, found))


def loaded_by_importing(root: Path, modules: list[str]) -> list[str]:
    """The forbidden modules in `sys.modules` of a fresh interpreter (with `root` first on
    its path) after it imported `modules`."""
    script = textwrap.dedent(
        """
        import importlib, json, sys
        for name in json.loads(sys.argv[1]):
            importlib.import_module(name)
        print(json.dumps(sorted(sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(modules)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [name for name in json.loads(done.stdout) if is_forbidden(name)]


def test_importing_every_engine_module_loads_no_forbidden_module() -> None:
    loaded = loaded_by_importing(REPO, engine_modules())
    assert not loaded, f"importing the engine loaded {loaded}"


def test_the_check_covers_every_engine_module() -> None:
    modules = engine_modules()
    assert {"notarius_dagster.engine", "notarius_dagster.engine.lane_runner"} <= set(modules)
    assert any(name.startswith("notarius_dagster.engine.inputs.") for name in modules)


# ---- the walker finds what it must (a check that cannot fail is no check)


PLANTED = {
    "notarius_dagster/__init__.py": "",
    "notarius_dagster/engine/__init__.py": "",
    "notarius_dagster/engine/sub/__init__.py": "from .. import llm_contract\n",
    "notarius_dagster/engine/sub/leaky.py": textwrap.dedent(
        """
        import importlib
        from notarius_dagster.engine.models import Frozen
        from notarius_dagster.engine import errors
        from . import sibling


        def later():
            from notarius_dagster.llm.profiles import LLMProfile
            import dagster
            return LLMProfile, dagster


        class Lazy:
            def load(self):
                importlib.import_module("litellm")
                return __import__("openai")


        from ... import settings
        from ...dnd import npcs
        from notarius_dagster import cli
        import assets.factory, resources.llm
        import dagster_postgres
        """
    ),
}


PLANTED_LEAKY = "notarius_dagster/engine/sub/leaky.py"


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    for relative, text in PLANTED.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_walker_names_file_line_and_module_of_every_kind_of_forbidden_import(
    planted: Path,
) -> None:
    found = {(imp.line, imp.module) for imp in offenders(planted, planted / "notarius_dagster")}
    leaky = PLANTED_LEAKY
    assert {str(imp).split(":", 1)[0] for imp in offenders(planted, planted)} == {leaky}
    assert found == {
        (9, "notarius_dagster.llm.profiles"),  # inside a function
        (10, "dagster"),
        (16, "litellm"),  # importlib.import_module("...")
        (17, "openai"),  # __import__("...")
        (20, "notarius_dagster.settings"),  # relative, beyond the engine
        (21, "notarius_dagster.dnd"),
        (22, "notarius_dagster.cli"),  # from the bare package
        (23, "assets.factory"),
        (23, "resources.llm"),
        (24, "dagster_postgres"),
    }
    assert str(next(imp for imp in offenders(planted, planted) if imp.line == 9)) == (
        f"{leaky}:9 imports notarius_dagster.llm.profiles"
    )


def test_the_walker_allows_the_engine_itself(planted: Path) -> None:
    allowed = {
        imp.module
        for imp in imports_of(planted / PLANTED_LEAKY, planted)
        if not is_forbidden(imp.module)
    }
    assert {
        "notarius_dagster.engine.models.Frozen",
        "notarius_dagster.engine.errors",
        "notarius_dagster.engine.sub.sibling",
        "notarius_dagster",
        "importlib",
    } <= allowed
    package = imports_of(planted / "notarius_dagster/engine/sub/__init__.py", planted)
    assert [imp.module for imp in package] == [
        "notarius_dagster.engine",
        "notarius_dagster.engine.llm_contract",
    ]


def test_the_import_check_sees_a_module_loaded_through_another(tmp_path: Path) -> None:
    for relative, text in {
        "notarius_dagster/__init__.py": "",
        "notarius_dagster/cli/main.py": "",
        "notarius_dagster/engine/__init__.py": "",
        "notarius_dagster/engine/innocent.py": "from notarius_dagster.engine import helper\n",
        "notarius_dagster/engine/helper.py": "import notarius_dagster.cli\n",
    }.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    assert loaded_by_importing(tmp_path, ["notarius_dagster.engine.innocent"]) == [
        "notarius_dagster.cli"
    ]
