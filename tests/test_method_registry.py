"""A method is declared once (``MethodSpec`` beside its strategy class): every place that lists
methods lists every built-in, the declarations are consistent, and a method module of one's own
— the development guide's example — runs through every command."""

from __future__ import annotations

import importlib
import re
import textwrap
from pathlib import Path

import pytest

from avalanche_sets.cli import build_parser, main
from avalanche_sets.method_spec import FAMILIES, MethodSpec, declarations_in
from avalanche_sets.methods import (
    _builtin_specs,
    _strategy_class,
    build_strategy,
    builtin_methods,
    check_method,
    method_names,
    method_options,
    method_spec,
    parse_options,
)
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.folder import read_record

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = builtin_methods()


def _run_help() -> str:
    """The ``run`` command's help, a name hyphenated across a line break joined again."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = sub.choices["run"].format_help()
    return re.sub(r"-\n\s*", "-", text)


def _listed(text: str) -> set[str]:
    return set(re.split(r"[\s,;:()]+", text))


def test_the_command_line_lists_every_built_in_method():
    listed = _listed(_run_help())
    missing = [m for m in BUILTIN if m not in listed]
    assert not missing, f"`avalanche-sets run --help` does not list {missing}"
    assert method_names()[: len(BUILTIN)] == list(BUILTIN)


def test_the_benchmark_tables_list_every_built_in_method_in_the_rows_it_declares():
    from benchmarks._paper import PAPER, REFERENCE
    from benchmarks.reproduce import ARTEFACTS

    for name in BUILTIN:
        spec = method_spec(name)
        assert spec.rows, f"{name} fills no row of the paper's tables"
        for row in spec.rows:
            assert name in ARTEFACTS[row.table][0], f"{row.table} does not run {name}"
            if row.paper:
                assert name in PAPER[row.table], f"{row.table} lacks the paper's {name} row"
            if row.reference:
                assert REFERENCE[row.table] == {"method": name}
    listed = {m for methods, *_ in ARTEFACTS.values() for m in methods}
    assert listed == set(BUILTIN)


def test_the_methods_page_lists_every_built_in_method_and_is_fresh():
    from benchmarks.readme import methods_block

    page = (ROOT / "docs" / "guide" / "methods.md").read_text(encoding="utf-8")
    block = page.split("<!-- methods-table:start -->")[1].split("<!-- methods-table:end -->")[0]
    rows = re.findall(r"^\| `([^`]+)` \|", block, flags=re.M)
    assert rows == list(BUILTIN), "docs/guide/methods.md: run `make readme`"
    fresh = [line.split(" | ")[0] for line in methods_block().splitlines()[2:]]
    assert [line.split(" | ")[0] for line in block.strip().splitlines()[2:]] == fresh


def test_each_artefacts_rows_are_numbered_once_with_one_reference():
    by_table: dict[str, list] = {}
    for spec in _builtin_specs().values():
        for row in spec.rows:
            by_table.setdefault(row.table, []).append(row)
    for table, rows in by_table.items():
        assert sorted(r.position for r in rows) == list(range(1, len(rows) + 1)), table
        assert sum(r.reference for r in rows) <= 1, table


@pytest.mark.parametrize("name", BUILTIN)
def test_a_declaration_read_from_source_is_the_imported_one(name):
    """The registry reads declarations without importing their modules; what the module
    defines when it is imported is the same declaration, and its strategy class exists."""
    spec = method_spec(name)
    module = importlib.import_module(spec.module)
    imported = [v for v in vars(module).values() if isinstance(v, MethodSpec) and v.name == name]
    assert len(imported) == 1
    assert imported[0] == MethodSpec(**{**vars(spec), "module": ""})
    cls = _strategy_class(spec)
    assert cls.__module__ == spec.module or getattr(module, spec.strategy) is cls
    assert spec.family in FAMILIES
    options, _ = method_options(name)
    assert set(spec.fixed) <= set(options) and set(spec.tuned_options) <= set(options)
    check_method(name, resolve_preset("quick"), dict(spec.fixed))  # its own fixed values pass


def test_a_declaration_that_is_not_literal_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text('from x import NAME\nM = MethodSpec(name=NAME, summary="s", family="meta",'
                    ' strategy="C")\n')  # fmt: skip
    with pytest.raises(ValueError, match=r"mine.py:2: a method declaration uses \['NAME'\]; fix"):
        declarations_in(path, "mine")


# ------------------------------------------------ a method module of one's own, every command


def guide_example() -> str:
    """The module the development guide's "Adding a method" shows."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("## Adding a method", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2",
    "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2", "--set", "threads=1",
]  # fmt: skip


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Path:
    """The guide's module in a package installed on the path: a dist-info whose entry point
    in ``avalanche_sets.methods`` is the module's declaration."""
    site = tmp_path / "site"
    (site / "my_methods").mkdir(parents=True)
    (site / "my_methods" / "__init__.py").write_text("")
    module = site / "my_methods" / "semi_l2.py"
    module.write_text(guide_example())
    info = site / "my_methods-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-methods\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [avalanche_sets.methods]
        semi-l2 = my_methods.semi_l2:METHOD
        """)
    )
    monkeypatch.syspath_prepend(str(site))
    yield module
    for name in ("my_methods.semi_l2", "my_methods"):
        import sys

        sys.modules.pop(name, None)


def test_the_guides_module_is_read_as_a_built_in_would_be(installed):
    (spec,) = declarations_in(installed, "avalanche_sets.baselines.semi_l2")
    assert spec.name == "semi-l2" and spec.strategy == "SemiL2"


def test_an_installed_declaration_is_one_method_like_the_built_ins(installed):
    assert "semi-l2" in method_names() and "semi-l2" not in BUILTIN
    spec = method_spec("semi-l2")
    assert spec.module == "my_methods.semi_l2" and spec.family == "continual"
    options, open_ = method_options("semi-l2")
    assert not open_ and options["anchor_weight"].type is float
    assert options["anchor_weight"].default == 0.01
    assert parse_options("semi-l2", {"anchor_weight": "0.5"}) == {"anchor_weight": 0.5}
    with pytest.raises(TypeError, match=r"did you mean 'anchor_weight'"):
        check_method("semi-l2", resolve_preset("quick"), {"anchor_weigth": 1.0})
    # the Python API: built by name, the plugin's option reaching the plugin
    strategy = build_strategy("semi-l2", resolve_preset("quick", width=4), anchor_weight=0.5)
    assert type(strategy).__name__ == "SemiL2" and strategy.cl_plugin.anchor_weight == 0.5


def test_every_command_runs_the_guides_method(installed, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["run", "--method", "semi-l2", "--out", str(out), *TINY,
                 "--strategy-set", "anchor_weight=0.5"]) == 0  # fmt: skip
    (record,) = out.rglob("result.json")
    assert record.parent.parent.name == "semi-l2"
    assert read_record(record.parent)["strategy_overrides"] == {"anchor_weight": 0.5}
    # the pull acts from the second domain on: its named loss term is logged
    assert "l2_anchor" in (record.parent / "log.txt").read_text()
    assert main(["sweep", "--methods", "semi-l2", "semi-seq", "--seeds", "0", "--out", str(out),
                 *TINY]) == 0  # fmt: skip
    assert len(list(out.rglob("result.json"))) == 3
    capsys.readouterr()
    assert main(["table", str(out), "--out", str(tmp_path / "t")]) == 0
    text = capsys.readouterr().out
    assert "semi-l2" in text and "semi-seq" in text
