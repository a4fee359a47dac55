"""A method: one strategy class that says what it is, how it is built and what it trains on.

Every runnable method — ORDER, each of its ablations, each baseline, a method of one's own — is
a strategy class that inherits :class:`Method` (through the strategy it builds on) and sets

* :attr:`~Method.name` and :attr:`~Method.summary`: the name ``--method`` and
  :func:`~avalanche_sets.methods.build_strategy` take, and one line on what it is;
* :attr:`~Method.fixed`: options it fixes (an ORDER ablation's switches; an option given that
  contradicts one is refused);
* :attr:`~Method.tuned`: its tuned option values (a run gets them unless told otherwise);
* :attr:`~Method.own_lr`: why it trains with a learning rate of its own, if it does.

Its options, their types and defaults, are its constructor's keyword parameters (read by
:func:`~avalanche_sets.methods.options.signature_options`). How a run builds it are the hooks
:meth:`~Method.model_arguments` / :meth:`~Method.make_model` (its learner on the preset's
backbone; :func:`~avalanche_sets.methods.build_strategy` hands it the rest); what it trains on is
:meth:`~Method.training_config` and :meth:`~Method.training_benchmark` (the joint methods'
stationary mixture).

A method class built directly is its method: ``OrderNoOT()`` is ORDER without OT, exactly as
``--method order-no-ot`` runs it. Its metaclass (:class:`MethodClass`) hands the constructor the
class's fixed and tuned options before any ``__init__`` runs (:meth:`Method.own_arguments`), and
refuses an argument that contradicts a fixed option, with the fix.

This module loads no torch: the command line lists and checks methods without it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from .data.benchmark import SETSBenchmark
    from .presets import RunConfig

__all__ = ["Method", "MethodClass", "same_value"]


def same_value(a: Any, b: Any) -> bool:
    """Whether two option values are one value (a list and a tuple of equal items are; a bool is
    no number: ``True`` is not ``1``)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except Exception:  # an object whose == raises or is no truth value: not comparable
        return False


def _settings(cls: type, fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The options a strategy of ``cls`` runs with: its constructor's defaults, then ``fixed``
    (sequences as tuples, so two spellings of one setting compare equal)."""
    params = inspect.signature(cls.__init__).parameters
    settings = {k: p.default for k, p in params.items() if p.default is not p.empty}
    return {
        k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in {**settings, **fixed}.items()
    }


def _subclasses(cls: type) -> list[type]:
    """``cls`` and every class that inherits from it, each once, in definition order."""
    out = [cls]
    for sub in cls.__subclasses__():
        out += [k for k in _subclasses(sub) if k not in out]
    return out


def _is_users(cls: type) -> bool:
    """Whether ``cls`` is defined outside this package (built-in methods are named first)."""
    return not cls.__module__.startswith(__name__.rpartition(".")[0] + ".")


class MethodClass(type(Protocol)):
    """The metaclass of method classes (that of Avalanche's templates, plus one step): calling a
    method class hands its constructor the class's own options first
    (:meth:`Method.own_arguments`), so a class built directly is the method its name says."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **cls.own_arguments(kwargs))


class Method(metaclass=MethodClass):
    """What makes a strategy class a method (a mixin: the class also inherits an Avalanche
    strategy). Subclass a built-in method's class and set :attr:`name` and :attr:`summary` to
    make one of your own (``docs/guide/custom-method.md``).

    Built directly, a method class applies its :attr:`fixed` and :attr:`tuned` options itself
    (``OrderNoOT()`` has no OT; ``SemiDER()`` has DER's tuned weights) and refuses an argument
    that contradicts a fixed one (``OrderNoOT(use_ot=True)``): the command line, a sweep and
    Python build the same strategy under one name."""

    #: The name ``--method`` and :func:`~avalanche_sets.methods.build_strategy` take.
    name: ClassVar[str]
    #: What it is, in one line (the methods page's and the help's).
    summary: ClassVar[str]
    #: Options it fixes on its constructor (``{"use_ot": False}``); an option given that
    #: contradicts one is refused.
    fixed: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    #: Its tuned option values: every run gets them unless an option given says otherwise.
    tuned: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    #: Why it trains with a learning rate of its own rather than the preset's ``lr``
    #: (``None``: it takes the preset's); setting the preset's ``lr`` for it is then refused
    #: with this reason.
    own_lr: ClassVar[str | None] = None

    @classmethod
    def own_arguments(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """The constructor's arguments: ``given``, over the class's :attr:`tuned` options, with
        its :attr:`fixed` options (an argument equal to a fixed option is no contradiction).

        Raises:
            ValueError: an argument that contradicts a fixed option, naming the method that
                runs with the value asked (:meth:`check_fixed`).
        """
        cls.check_fixed(given)
        return {**cls.tuned, **given, **cls.fixed}

    @classmethod
    def check_fixed(cls, options: Mapping[str, Any]) -> None:
        """Refuse an option that contradicts one the class fixes, naming the method of the
        class it modifies (the nearest it inherits from that fixes nothing: ORDER for ORDER's
        ablations) that runs with the value asked, if one does (a built-in one first).

        Raises:
            ValueError: ``order-no-ot`` with ``use_ot=True``: "... fix: use method 'order'".
        """
        for key, value in options.items():
            if key not in cls.fixed or same_value(value, cls.fixed[key]):
                continue
            asked = _settings(cls, {**cls.fixed, key: value})
            base = next(k for k in cls.__mro__ if not vars(k).get("fixed"))
            plain = [
                k
                for k in sorted(_subclasses(base), key=lambda k: _is_users(k))
                if "name" in vars(k) and _settings(cls, k.fixed) == asked
            ]
            label = getattr(base, "name", base.__name__).upper()
            fix = (
                f"use method {plain[0].name!r} ({plain[0].__name__})"
                if plain
                else "drop the option or pick another method"
            )
            raise ValueError(
                f"method {getattr(cls, 'name', cls.__name__)!r} is {label} with "
                f"{key}={cls.fixed[key]!r}; the option {key}={value!r} contradicts it; fix: {fix}"
            )

    @classmethod
    def make_model(cls, config: RunConfig, backbone: Any) -> Any:
        """Its learner on the preset's ``backbone``.

        Raises:
            TypeError: the class does not say how (override this, or subclass a method class
                that does).
        """
        raise TypeError(
            f"{cls.__name__} does not say which model it learns; fix: subclass a built-in "
            "method class (avalanche_sets.baselines.MSKM, avalanche_sets.OrderStrategy...) or "
            "define the classmethod make_model(config, backbone)"
        )

    @classmethod
    def model_arguments(
        cls, config: RunConfig, backbone: Any, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The constructor arguments that give it its learner on ``backbone``: ``model``,
        :meth:`make_model`'s (``options``: the options given, which a method whose model they
        shape reads)."""
        return {"model": cls.make_model(config, backbone)}

    @classmethod
    def training_config(cls, config: RunConfig) -> RunConfig:
        """The config its training stream is built from: ``config`` itself (a method that
        needs more training tasks per domain scales it here)."""
        return config

    @classmethod
    def training_benchmark(cls, benchmark: SETSBenchmark, *, seed: int) -> SETSBenchmark:
        """What it trains on, from the benchmark of :meth:`training_config`: the benchmark
        itself (joint training mixes its domains here)."""
        return benchmark
