"""A method's declaration: what a method is, written once, next to the class that implements it.

Every built-in method — ORDER, each of its ablations, each baseline — is a module-level
``NAME = MethodSpec(...)`` in the module of its strategy class; the registry
(:mod:`avalanche_sets.methods`) finds them, and the command line, ``benchmarks/`` (the paper's
tables, the tuning grid), the documentation's methods page and the tests read them; none keeps a
list of its own. A method of one's own is declared the same way (see
``docs/development.md``, "Adding a method").

What a declaration does *not* hold: its options' types and defaults. Those have one home, the
annotated signature that takes them (:func:`avalanche_sets.methods.options.signature_options`);
a declaration only names the values it changes (:attr:`MethodSpec.fixed`,
:attr:`Tuned.options`).

The built-ins' declarations are read from their modules' source without importing them
(:func:`declarations_in`), so the command line lists the methods without loading torch: a
declaration holds literals only (strings, numbers, tuples, dicts, ``None``, and the classes of
this module).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "FAMILIES",
    "Family",
    "MethodSpec",
    "PaperRow",
    "Tuned",
    "declarations_in",
    "package_declarations",
]

#: A method's family: how :func:`~avalanche_sets.methods.build_strategy` builds its learner and
#: which stream it trains on.
#:
#: * ``"order"``: ORDER's strategy on a prototypical learner refined by soft k-means;
#: * ``"meta"``: a meta-learner that builds its own head on the preset's backbone;
#: * ``"continual"``: the MSKM learner plus a mechanism against forgetting (paper §5.3);
#: * ``"joint"``: the MSKM learner trained on the stationary mixture of the domains
#:   (:func:`~avalanche_sets.baselines.joint_benchmark`), the upper bound.
Family = Literal["order", "meta", "continual", "joint"]
FAMILIES: tuple[str, ...] = ("order", "meta", "continual", "joint")


@dataclass(frozen=True)
class PaperRow:
    """A row of one of the paper's tables that a method's runs fill.

    Attributes:
        table: the artefact of ``benchmarks/reproduce.py`` (``"table2"``, ``"table3"``,
            ``"order2"``, ``"ablation_mi"`` ...).
        position: the row's place in that table (1 is the first row).
        paper: the paper's numbers in the table's columns, each ``(mean %, 95% CI)``; empty for
            a row the paper does not have (one of ours).
        reference: whether this row is the one every other row of the table is compared with
            (paired Δ on the same test episodes).
    """

    table: str
    position: int
    paper: tuple[tuple[float, float], ...] = ()
    reference: bool = False


@dataclass(frozen=True)
class Tuned:
    """Options tuned on the validation stream, and the record that chose them.

    Attributes:
        options: the chosen strategy options; every run of the method uses them unless told
            otherwise (an option given on the command line or as a keyword wins), and the
            strategy class's defaults are them, so a strategy built by hand is the same.
        grid: the points that were compared (the first is the method's paper's values).
        preset: the preset whose validation stream chose them.
        record: the repository file that records the choice (every point's accuracy, its
            paired Δ to the first point).
        why: what the choice changed, in one line.
    """

    options: Mapping[str, Any]
    grid: tuple[Mapping[str, Any], ...]
    preset: str
    record: str
    why: str = ""


@dataclass(frozen=True)
class MethodSpec:
    """One method: its name and what it is.

    Attributes:
        name: the name ``--method`` and :func:`~avalanche_sets.methods.build_strategy` take.
        summary: what it is, in one line (the methods page's and the help's).
        family: see :data:`Family`.
        strategy: the strategy class, by its name in the declaring module.
        fixed: options the method fixes on its strategy (an ORDER ablation's switches); an
            option given that contradicts one is refused.
        tuned: its tuned options (``None``: the class's defaults, its paper's values).
        rows: the rows of the paper's tables it fills.
        own_lr: why it trains with a learning rate of its own rather than the preset's
            ``lr`` (``None``: it takes the preset's); setting the preset's ``lr`` for it is then
            refused with this reason.
        compute_matched: whether it trains on ``B + R`` tasks per iteration, ORDER's work per
            step: its stream then holds ``(B + R) / B`` times the training tasks per domain.
        module: the module that declares it (set by the registry).
    """

    name: str
    summary: str
    family: Family
    strategy: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    tuned: Tuned | None = None
    rows: tuple[PaperRow, ...] = ()
    own_lr: str | None = None
    compute_matched: bool = False
    module: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(
                f"method {self.name!r}: family {self.family!r} is none of {list(FAMILIES)}"
            )

    @property
    def tuned_options(self) -> dict[str, Any]:
        """The options every run of the method gets unless told otherwise (``{}``: none)."""
        return dict(self.tuned.options) if self.tuned is not None else {}

    def row(self, table: str) -> PaperRow | None:
        """Its row in artefact ``table``, if it fills one."""
        return next((r for r in self.rows if r.table == table), None)


#: The names a declaration may use besides literals.
_NAMESPACE = {"MethodSpec": MethodSpec, "PaperRow": PaperRow, "Tuned": Tuned}


def _declarations(tree: ast.Module) -> Iterator[ast.expr]:
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "MethodSpec"
        ):
            yield value


def declarations_in(path: Path, module: str) -> list[MethodSpec]:
    """The methods a module's source declares (module-level ``X = MethodSpec(...)``), read
    without importing it, each with :attr:`MethodSpec.module` set to ``module``.

    Raises:
        ValueError: a declaration that uses a name other than the classes of this module (it
            must hold literals only, so it can be read without importing its module).
    """
    text = path.read_text(encoding="utf-8")
    if "MethodSpec(" not in text:
        return []
    specs = []
    for call in _declarations(ast.parse(text, filename=str(path))):
        names = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)} - set(_NAMESPACE)
        if names:
            raise ValueError(
                f"{path}:{call.lineno}: a method declaration uses {sorted(names)}; fix: write "
                "their values (a declaration holds literals only, so the command line reads it "
                "without importing the module)"
            )
        code = compile(ast.Expression(call), str(path), "eval")
        spec = eval(code, {"__builtins__": {}, **_NAMESPACE})  # noqa: S307 - literals only
        specs.append(replace(spec, module=module))
    return specs


def package_declarations(root: Path, package: str) -> list[MethodSpec]:
    """Every declaration in the modules of package folder ``root`` (imported as ``package``)."""
    specs = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        specs += declarations_in(path, ".".join((package, *parts)))
    return specs
