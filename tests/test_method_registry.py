"""A method is one class: the built-ins' table names every method class of the package, each by
its own name, in the order the command line lists them; a method class's declaration is
consistent with its options; an installed entry point is a method like the built-ins."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import textwrap
from pathlib import Path

import pytest

import avalanche_sets
from avalanche_sets.cli import build_parser
from avalanche_sets.method import Method
from avalanche_sets.methods import (
    build_strategy,
    builtin_methods,
    check_method,
    method_class,
    method_names,
    method_options,
    parse_options,
)
from avalanche_sets.methods.builtins import BUILTIN_METHODS
from avalanche_sets.presets import resolve_preset

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = builtin_methods()


def _run_help() -> str:
    """The ``run`` command's help, a name hyphenated across a line break joined again."""
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = sub.choices["run"].format_help()
    return re.sub(r"-\n\s*", "-", text)


def test_the_command_line_lists_every_built_in_method_without_torch():
    listed = set(re.split(r"[\s,;:()]+", _run_help()))
    missing = [m for m in BUILTIN if m not in listed]
    assert not missing, f"`avalanche-sets run --help` does not list {missing}"
    assert method_names()[: len(BUILTIN)] == list(BUILTIN)
    assert BUILTIN[:2] == ("order", "order-mi-only") and BUILTIN[-1] == "joint-matched"


def _package_method_classes() -> dict[str, type]:
    """Every class of the package (each module imported) that names itself a method."""
    for info in pkgutil.walk_packages(avalanche_sets.__path__, "avalanche_sets."):
        if info.name.split(".")[-1] not in ("__main__",):
            importlib.import_module(info.name)
    found: dict[str, type] = {}
    todo = [Method]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("avalanche_sets.") and "name" in vars(cls):
            found[f"{cls.__module__}:{cls.__qualname__}"] = cls
    return found


def test_the_table_names_every_method_class_of_the_package_by_its_own_name():
    for name, target in BUILTIN_METHODS.items():
        cls = method_class(name)
        assert f"{cls.__module__}:{cls.__qualname__}" == target
        assert cls.name == name, f"{target} is named {cls.name!r}, the table says {name!r}"
        assert cls.summary and "name" in vars(cls)
    in_package = {target: cls.name for target, cls in _package_method_classes().items()}
    missing = {t: n for t, n in in_package.items() if n not in BUILTIN_METHODS}
    assert not missing, f"method classes missing from methods/builtins.py: {missing}"
    assert sorted(in_package.values()) == sorted(BUILTIN_METHODS)


def test_the_methods_page_lists_every_built_in_method():
    page = (ROOT / "docs" / "guide" / "methods.md").read_text(encoding="utf-8")
    block = page.split("<!-- methods-table:start -->")[1].split("<!-- methods-table:end -->")[0]
    rows = re.findall(r"^\| `([^`]+)` \|", block, flags=re.M)
    assert rows == list(BUILTIN), "docs/guide/methods.md: run `make readme`"


@pytest.mark.parametrize("name", BUILTIN)
def test_a_method_class_fixes_and_tunes_options_it_takes(name):
    cls = method_class(name)
    options, _ = method_options(name)
    assert set(cls.fixed) <= set(options) and set(cls.tuned) <= set(options)
    check_method(name, resolve_preset("quick"), dict(cls.fixed))  # its own fixed values pass


def test_an_option_contradicting_a_fixed_one_is_refused_naming_the_method_that_has_it():
    quick = resolve_preset("quick")
    with pytest.raises(ValueError, match=r"'order-no-ot' is ORDER with use_ot=False; .* "
                       r"contradicts it; fix: use method 'order'"):  # fmt: skip
        check_method("order-no-ot", quick, {"use_ot": True})
    with pytest.raises(ValueError, match=r"mi_terms=\('id',\).*fix: use method 'order'"):
        check_method("order-mi-id-only", quick, {"mi_terms": ("id", "ood")})
    with pytest.raises(ValueError, match=r"fix: use method 'order-mi-ood-only'"):
        check_method("order-mi-id-only", quick, {"mi_terms": ["ood"]})


# ------------------------------------------------ a method of one's own, by an entry point


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """``examples/my_method.py`` in a package installed on the path: a dist-info whose entry
    point in ``avalanche_sets.methods`` names its class."""
    site = tmp_path / "site"
    (site / "my_methods").mkdir(parents=True)
    (site / "my_methods" / "__init__.py").write_text("")
    module = site / "my_methods" / "semi_l2.py"
    module.write_text((ROOT / "examples" / "my_method.py").read_text(encoding="utf-8"))
    info = site / "my_methods-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-methods\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [avalanche_sets.methods]
        semi-l2 = my_methods.semi_l2:SemiL2
        """)
    )
    monkeypatch.syspath_prepend(str(site))
    yield module
    for name in ("my_methods.semi_l2", "my_methods"):
        sys.modules.pop(name, None)


def test_an_installed_method_class_is_one_method_like_the_built_ins(installed):
    assert "semi-l2" in method_names() and "semi-l2" not in BUILTIN
    cls = method_class("semi-l2")
    assert cls.__module__ == "my_methods.semi_l2" and cls.name == "semi-l2"
    options, open_ = method_options("semi-l2")
    assert not open_ and options["anchor_weight"].type is float
    assert options["anchor_weight"].default == 0.01
    assert parse_options("semi-l2", {"anchor_weight": "0.5"}) == {"anchor_weight": 0.5}
    with pytest.raises(TypeError, match=r"did you mean 'anchor_weight'"):
        check_method("semi-l2", resolve_preset("quick"), {"anchor_weigth": 1.0})
    strategy = build_strategy("semi-l2", resolve_preset("quick", width=4), anchor_weight=0.5)
    assert type(strategy).__name__ == "SemiL2" and strategy.cl_plugin.anchor_weight == 0.5
