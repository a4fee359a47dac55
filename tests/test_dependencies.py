"""Declared dependencies against what the code imports: everything the installed package needs,
nothing it does not.

pyproject.toml's ``[project.dependencies]`` (the core) and its extras are read as they are
written; every module of ``avalanche_sets/`` is read with :mod:`ast` for its imports, and each
imported name is mapped to the distribution that provides it with
:func:`importlib.metadata.packages_distributions` (an import name no installed distribution
provides is taken as its own distribution name). The rules:

* every third-party import of the package is declared, in the core or an extra;
* an import of an extra's package sits inside the function that needs it, so ``import
  avalanche_sets`` works with the core alone;
* every core dependency is imported by the package, or is in :data:`NEEDED_UNIMPORTED` with
  the reason it is needed: test, documentation and GPU tooling stay in extras;
* what the tests and the documentation's hooks import is declared too (the ``test`` and
  ``docs`` extras, or another extra the suite installs).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

#: Core dependencies the package needs without importing them itself, and why.
NEEDED_UNIMPORTED = {
    "quadprog": "Avalanche's GEMPlugin (semi-gem) solves its QP with qpsolvers.solve_qp("
    "solver='quadprog'); avalanche-lib reaches quadprog only through an extra of qpsolvers",
}

#: Folders of the checkout whose code is not in the wheel, and the extras they may use beyond
#: the core.
CHECKOUT_CODE = {"tests": ("test", "datasets", "ray", "wandb", "docs"), "docs": ("docs",)}


def canonical(name: str) -> str:
    """A distribution name as the package index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The distribution a requirement string names (``"POT>=0.9"`` → ``"pot"``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"cannot read the requirement {requirement!r}"
    return canonical(match.group(1))


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """``(core, {extra: distributions})`` from pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    core = {requirement_name(r) for r in project["dependencies"]}
    extras = {
        extra: {requirement_name(r) for r in reqs}
        for extra, reqs in project.get("optional-dependencies", {}).items()
    }
    return core, extras


def third_party_imports(source: str) -> list[tuple[str, int, bool]]:
    """``(top-level module, line, inside a function)`` of every absolute import of a module
    that is neither the standard library's nor this project's."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module.split(".")[0]]
        for name in names:
            if name not in sys.stdlib_module_names and name not in ("avalanche_sets", "__future__"):
                found.append((name, node.lineno, in_function))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source), False)
    return found


_PROVIDERS = importlib.metadata.packages_distributions()


def distributions_of(module: str) -> set[str]:
    """The distributions providing the import name ``module`` (its own name when none that is
    installed does)."""
    return {canonical(d) for d in _PROVIDERS.get(module, [module])}


def imports_under(folder: str) -> list[tuple[str, set[str], bool]]:
    """``("path:line imports module", distributions, inside a function)`` under ``folder``."""
    out = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for module, line, local in third_party_imports(path.read_text()):
            out.append((f"{where}:{line} imports {module}", distributions_of(module), local))
    return out


def local_modules(folder: str) -> set[str]:
    """Import names of the checkout's own modules under ``folder`` (test helpers and the
    benchmark scripts the tests import as ``benchmarks.<name>``)."""
    names = {p.stem for p in (ROOT / folder).rglob("*.py")}
    return names | {p.name for p in ROOT.iterdir() if p.is_dir()}


def test_every_import_of_the_package_is_declared():
    core, extras = declared()
    every = core.union(*extras.values())
    missing = [what for what, dists, _ in imports_under("avalanche_sets") if not dists & every]
    assert not missing, "declare these in pyproject.toml's dependencies or an extra:\n" + "\n".join(
        missing
    )


def test_an_extras_package_is_imported_only_inside_the_function_that_needs_it():
    core, _ = declared()
    eager = [
        what
        for what, dists, local in imports_under("avalanche_sets")
        if not local and not dists & core
    ]
    assert not eager, (
        "`import avalanche_sets` would need an extra; import these inside the function that "
        "uses them:\n" + "\n".join(eager)
    )


def test_every_core_dependency_is_needed():
    core, _ = declared()
    imported = set().union(*(dists for _, dists, _ in imports_under("avalanche_sets")))
    unused = sorted(core - imported - set(NEEDED_UNIMPORTED))
    assert not unused, (
        f"core dependencies the package never imports: {unused}; move test, documentation or "
        "GPU tooling to an extra, or say in NEEDED_UNIMPORTED why the package needs it"
    )
    assert set(NEEDED_UNIMPORTED) <= core, "NEEDED_UNIMPORTED names a package that is not core"


def test_test_and_docs_tooling_live_in_extras():
    core, extras = declared()
    assert {"pytest", "ruff"} <= extras["test"] and "mkdocs" in extras["docs"]
    tooling = extras["test"] | extras["docs"]
    assert not core & tooling, f"test or documentation tools in the core: {sorted(core & tooling)}"


@pytest.mark.parametrize("folder", sorted(CHECKOUT_CODE))
def test_what_the_tests_and_docs_import_is_declared(folder):
    core, extras = declared()
    allowed = core.union(*(extras[e] for e in CHECKOUT_CODE[folder]))
    own = local_modules(folder)
    missing = [
        what
        for what, dists, _ in imports_under(folder)
        if not dists & allowed and what.rsplit(" ", 1)[1] not in own
    ]
    assert not missing, (
        f"declare these in the extras {CHECKOUT_CODE[folder]} of pyproject.toml:\n"
        + "\n".join(missing)
    )


def test_the_rules_see_what_they_check():
    source = "import os\nimport torch.nn\nfrom . import x\n\ndef f():\n    from ray import tune\n"
    assert third_party_imports(source) == [("torch", 2, False), ("ray", 6, True)]
    assert requirement_name("POT>=0.9") == "pot"
    assert requirement_name("tomli>=2; python_version < '3.11'") == "tomli"
    assert distributions_of("PIL") == {"pillow"}
