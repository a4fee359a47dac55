"""The package's shape: few root modules, none too long, imports at the top, one home per name.

These hold the layout a reader relies on: a module of the package reads top to bottom in one
sitting, its dependencies are named where it starts, and the benchmark scripts import the
package as a user does.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "avalanche_sets"

#: Heavy or optional dependencies a function may import when it needs them (importing them at
#: the top would make every ``import avalanche_sets`` pay for them).
HEAVY = {"matplotlib", "scipy", "cvxpy", "cvxpylayers", "ot", "wandb", "ray", "h5py",
         "torchvision"}  # fmt: skip
#: Modules on the command line's start, which parses its arguments before torch is loaded, and
#: on the path of ``table``, which needs no torch at all: they import torch, Avalanche and the
#: package's torch modules inside the command that uses them.
TORCH_FREE = {
    "cli.py",
    "presets.py",
    "methods/__init__.py",
    "methods/build.py",
    "methods/check.py",
    "runs/folder.py",
    "runs/code.py",
    "runs/lock.py",
    "runs/record.py",
    "runs/report.py",
    "runs/row_plots.py",
    "runs/table_layout.py",
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _local_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level module)`` of every import inside a function of ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found += [(inner.lineno, a.name.split(".")[0]) for a in inner.names]
                elif isinstance(inner, ast.ImportFrom):
                    name = "." if inner.level else (inner.module or "").split(".")[0]
                    found.append((inner.lineno, name))
    return found


def test_at_most_six_root_modules_besides_the_package_and_its_entry():
    """The root holds the command line, the presets, and the ground floor every layer stands on
    (shared settings, the file writer, the one "did you mean", a method's declaration):
    everything else is in a room."""
    root = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(root) <= 6, root


def test_one_did_you_mean():
    """Every message that refuses a name suggests through :mod:`avalanche_sets.suggest` alone."""
    users = [str(p.relative_to(PACKAGE)) for p in _modules() if "difflib" in p.read_text()]
    assert users == ["suggest.py"], users


def test_no_module_is_longer_than_700_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > 700}  # fmt: skip
    assert not long


def _long_functions(path: Path, limit: int = 100) -> list[str]:
    tree = ast.parse(path.read_text())
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return [
        f"{where}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_100_lines():
    assert [f for path in _modules() for f in _long_functions(path)] == []


def test_the_length_rule_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(100))
    (tmp_path / "m.py").write_text(f"def f():\n{body}\n")
    assert len(_long_functions(tmp_path / "m.py")) == 1


def test_the_package_evaluates_no_text_as_code():
    calls = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("eval", "exec", "compile")
    ]
    assert calls == []


def test_function_local_imports_are_heavy_dependencies_or_keep_the_command_line_torch_free():
    bad = []
    for path in _modules():
        where = path.relative_to(PACKAGE).as_posix()
        for line, module in _local_imports(path):
            if where not in TORCH_FREE and module not in HEAVY:
                bad.append(f"{where}:{line} imports {module} inside a function")
    assert not bad, "\n".join(bad)


def test_the_rule_sees_a_local_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    import json\n    from . import x\n")
    assert _local_imports(module) == [(4, "json"), (5, ".")]


def test_benchmark_scripts_do_not_edit_the_import_path():
    edits = [p.name for p in (ROOT / "benchmarks").glob("*.py") if "sys.path" in p.read_text()]
    assert not edits


def _benchmark_imports(folder: Path) -> dict[str, set[str]]:
    """Script -> the scripts of ``folder`` it imports (``benchmarks.<name>``), at the top of the
    file or inside a function alike: a deferred import closes a loop all the same."""
    scripts = {p.stem for p in folder.glob("*.py")}
    graph = {}
    for path in sorted(folder.glob("*.py")):
        named = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                named.add(node.module)
                named |= {f"{node.module}.{a.name}" for a in node.names}
        graph[path.stem] = {n.split(".")[1] for n in named
                            if n.startswith("benchmarks.") and n.split(".")[1] in scripts}  # fmt: skip
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import loop of ``graph`` (``[a, b, a]``), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    return next((c for c in map(lambda n: visit(n, []), sorted(graph)) if c), None)


def test_the_benchmark_scripts_import_each_other_without_a_loop():
    assert _cycle(_benchmark_imports(ROOT / "benchmarks")) is None


def test_the_loop_rule_sees_a_deferred_import_that_closes_a_loop(tmp_path):
    (tmp_path / "tables.py").write_text("from benchmarks._common import RESULTS\n")
    (tmp_path / "_common.py").write_text("RESULTS = 1\n")
    (tmp_path / "pages.py").write_text("from benchmarks.tables import rows\n")
    assert _cycle(_benchmark_imports(tmp_path)) is None
    (tmp_path / "tables.py").write_text("def main():\n    from benchmarks import pages\n")
    assert _cycle(_benchmark_imports(tmp_path)) == ["pages", "tables", "pages"]
