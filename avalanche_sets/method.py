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

This module loads no torch: the command line lists and checks methods without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .data.benchmark import SETSBenchmark
    from .presets import RunConfig

__all__ = ["Method"]


class Method:
    """What makes a strategy class a method (a mixin: the class also inherits an Avalanche
    strategy). Subclass a built-in method's class and set :attr:`name` and :attr:`summary` to
    make one of your own (``docs/guide/custom-method.md``)."""

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
