"""The episodic strategy template: Avalanche's SGD training loop over meta-batches of episodes.

Built on :class:`avalanche.training.templates.SupervisedTemplate` (not
``SupervisedMetaLearningTemplate``, which never fires ``after_backward``, so gradient plugins such
as A-GEM, GEM or GPM would silently do nothing there). A mini-batch is a *meta-batch* of
episodes: ``train_mb_size`` counts episodes (paper: 2). Every Avalanche callback fires as usual,
and one extra event, ``after_encode``, fires between embedding a meta-batch and classifying its
queries, so plugins (ORDER's OOD split) can act on the embeddings.

What the template guarantees:

* Learners only ever see ``mb_x.without_oracle()``: the OOD ground truth that travels with an
  episode never reaches the model (``mb_x`` still carries it for metrics).
* ``mb_output`` are the query logits ``[B*N*Q, N]`` and ``mb_y`` the query labels, so
  Avalanche's accuracy, loss, forgetting, BWT, timing, CPU and RAM metrics work unchanged.
* Plugins hand each other values through one typed object per forward pass,
  :class:`~avalanche_sets.training.iteration.Iteration` (``strategy.iteration``): a memory
  plugin appends tasks there and the template puts them in the meta-batch; the model's
  :class:`~avalanche_sets.models.EpisodeState` (``strategy.iteration.state``, its one holder)
  and an OOD split of the unlabeled images are kept there.
* A loss term reaches the loss by one path: the strategy's :meth:`~EpisodicTemplate.criterion`.
  A plugin with a term defines ``loss_term(strategy)`` (and ``TERM``, the term's name); in
  training the criterion returns the query loss plus every plugin's term, in plugin order
  (:meth:`EpisodicTemplate.plus_terms_of`). A strategy that writes its own objective names its
  plugins' terms in it (ORDER's Eq. 10) and adds the other plugins' terms after them; a plugin
  whose term no criterion added stops the step. ``strategy.loss_terms`` holds this iteration's
  values by name, ``"meta"`` being the query loss
  (:class:`~avalanche_sets.training.loss_terms.LossTerms` logs their means).
  A non-finite term or gradient refuses the step with a :class:`NonFiniteLossError` naming the
  term and the iteration, before the weights change, so the last checkpoint stays the last
  good state. The loss and every gradient are checked together, with one host read per
  iteration, just before the optimiser step: what ran before it in a refused iteration
  (batch-norm statistics, a plugin's own networks fitted in ``after_forward``, plugins'
  ``after_backward``) may already have seen the non-finite values.
* Building a strategy changes nothing outside it: process-wide settings (the kept freed memory,
  cuDNN's autotuner) are made by the run (:func:`~avalanche_sets.training.runner.set_up_process`,
  called by :func:`~avalanche_sets.training.run_sets`).
* The train loader keeps the episode collate function (Avalanche's default loader drops it for
  experiences without task labels) and does not shuffle: episodes are already random, and a
  fixed order makes runs reproducible and resumable at any iteration (``start_iteration``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

import torch
from avalanche.core import SupervisedPlugin
from avalanche.evaluation.metrics import accuracy_metrics, loss_metrics
from avalanche.training.plugins import EvaluationPlugin
from avalanche.training.templates import SupervisedTemplate
from avalanche.training.utils import trigger_plugins
from torch.nn import CrossEntropyLoss
from torch.utils.data import DataLoader, Subset

from ..data.episodes import EpisodeBatch, collate_episodes
from ..functional.fused_adam import adam_step
from ..models.heads import support_n_way
from .iteration import Iteration, check_partners

__all__ = [
    "EpisodicTemplate",
    "EpisodicPlugin",
    "NonFiniteLossError",
    "quiet_evaluator",
    "silent_evaluator",
]


def silent_evaluator(*metrics) -> EvaluationPlugin:
    """An ``EvaluationPlugin`` of ``metrics`` without loggers, without Avalanche's warning.

    Avalanche warns "No loggers specified, metrics will not be logged" for every evaluator
    without loggers. Here that is the intent: the caller reads the values from the evaluator
    (or from :func:`~avalanche_sets.training.run_sets`), and a run that wants them logged passes
    its own evaluator (the command line always logs to the run folder's ``log.txt``). Only that
    one warning is silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message="No loggers specified, metrics will not be logged",
            category=UserWarning,
        )
        return EvaluationPlugin(*metrics, loggers=[])


def quiet_evaluator() -> EvaluationPlugin:
    """Avalanche's default metrics, printed nowhere: the default of every strategy here.

    The metrics of Avalanche's ``default_evaluator()`` (accuracy and loss per training epoch,
    per evaluated experience and per stream: ``Top1_Acc_Stream/eval_phase/test_stream``,
    ``Loss_Exp/eval_phase/test_stream/Exp000``, ...), so ``strategy.eval(stream)`` returns them
    as every Avalanche strategy's does, and no logger (:func:`silent_evaluator`), so training
    and evaluating print nothing. Accuracy is over the episodes' query predictions
    (``mb_output`` against ``mb_y``); the loss is ``strategy.loss``: the query loss in
    evaluation, the loss the step minimises (the plugins' terms included) in training.
    """
    return silent_evaluator(
        accuracy_metrics(epoch=True, experience=True, stream=True),
        loss_metrics(epoch=True, experience=True, stream=True),
    )


class NonFiniteLossError(FloatingPointError):
    """A loss term or gradient became NaN/inf; the optimiser step was refused.

    Attributes:
        term: the offending loss term (``"meta"``, ``"mi"``, ``"ot"``, ...), ``"total"`` when
            no single named term is non-finite, or ``"gradient of <parameter>"``.
        experience: index of the training experience (domain) in the stream, from 0 (Avalanche's
            ``current_experience``; the message counts domains from 1).
        iteration: meta-batch index inside that experience.
    """

    def __init__(self, term: str, *, experience: int, iteration: int, detail: str = "") -> None:
        self.term, self.experience, self.iteration = term, experience, iteration
        super().__init__(
            f"non-finite {term} at training domain {experience + 1}, iteration {iteration}"
            f"{f' ({detail})' if detail else ''}: the optimiser step was refused and the "
            "weights were not updated, so the last checkpoint is the last good state. Lower the "
            "learning rate or the term's weight, or check the input data"
        )


class EpisodicPlugin(SupervisedPlugin):
    """A :class:`SupervisedPlugin` with the template's extra event.

    ``after_encode(strategy)`` fires after a meta-batch is embedded and before its queries are
    classified; ``strategy.iteration.state`` then holds the embeddings and prototypes.
    """

    def after_encode(self, strategy, *args, **kwargs):
        pass


class EpisodicTemplate(SupervisedTemplate):
    """Avalanche SGD template whose mini-batches are meta-batches of semi-supervised episodes.

    Args:
        model: an episodic model. If it has ``encode(batch)`` and ``classify(state)`` (as
            :class:`~avalanche_sets.models.PrototypicalModel`), the template calls them with
            an ``after_encode`` plugin event in between and keeps the
            :class:`~avalanche_sets.models.EpisodeState` in ``strategy.iteration.state``;
            otherwise it calls ``model(batch)``. Either way the model returns query logits.
        optimizer: the model's optimiser (paper: Adam, lr 1e-3).
        criterion: loss on the query logits (default cross-entropy, the meta loss); the
            plugins' loss terms are added to it in training (:meth:`criterion`).
        train_mb_size: episodes per meta-batch (paper: 2).
        train_epochs: passes over each experience's episodes (SETS: 1).
        eval_mb_size: episodes per evaluation batch.
        device: torch device.
        plugins: Avalanche plugins.
        evaluator: an :class:`EvaluationPlugin`; default: Avalanche's default metrics without
            loggers (:func:`quiet_evaluator`), so ``eval`` returns accuracy and loss per
            experience and stream while training and evaluating print nothing, as
            :func:`~avalanche_sets.methods.build_strategy` and the command line (which prints
            one table). Avalanche's metric printout is
            ``avalanche.training.plugins.evaluation.default_evaluator()``.
        eval_every: as in Avalanche (-1: no periodic evaluation).
    """

    PLUGIN_CLASS = EpisodicPlugin

    def __init__(
        self,
        *,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        criterion=None,
        train_mb_size: int = 2,
        train_epochs: int = 1,
        eval_mb_size: int = 8,
        device: str | torch.device = "cpu",
        plugins: Sequence | None = None,
        evaluator: EvaluationPlugin | None = None,
        eval_every: int = -1,
        **kwargs,
    ) -> None:
        for name, value in (
            ("train_mb_size", train_mb_size),
            ("train_epochs", train_epochs),
            ("eval_mb_size", eval_mb_size),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"{name} must be a positive integer (episodes per meta-batch), got {value!r}"
                )
        plugins = list(plugins or [])
        # A plugin that reads what another writes names it (PARTNERS): a missing partner fails
        # here, not in the middle of the run; so does a plugin it cannot be combined with.
        for plugin in plugins:
            check_partners(plugin, plugins)
        super().__init__(
            model=model,
            optimizer=optimizer,
            criterion=CrossEntropyLoss() if criterion is None else criterion,
            train_mb_size=train_mb_size,
            train_epochs=train_epochs,
            eval_mb_size=eval_mb_size,
            device=device,
            plugins=plugins,
            evaluator=evaluator if evaluator is not None else quiet_evaluator(),
            eval_every=eval_every,
            **kwargs,
        )
        # Avalanche's first make_optimizer() call resets the optimiser's state (to record which
        # parameters it optimises). Doing it now, while the state is empty, keeps a state
        # restored from a checkpoint alive when train() calls make_optimizer() again.
        self.make_optimizer()
        self.iteration: Iteration | None = None
        """This forward pass's :class:`Iteration` (the last one's between passes)."""
        self.start_iteration = 0
        self.exp_iteration = 0
        """Index of the current meta-batch inside the current training experience."""
        self.loss_terms: dict[str, torch.Tensor] = {}
        """This iteration's loss terms by name (detached), e.g. ``{"meta": ..., "mi": ...}``."""
        self._terms_added_of: list = []  # plugins whose terms this iteration's loss holds
        self._eval_batches: dict[int, tuple] = {}
        self._eval_cached_bytes = 0
        self._compiled_step = None  # compile_training_step's

    # ------------------------------------------------------------------ data
    def train(self, experiences, eval_streams=None, *, start_iteration: int = 0, **kwargs):
        """Avalanche's ``train``; ``start_iteration`` skips the first meta-batches (resume)."""
        if start_iteration < 0:
            raise ValueError(f"start_iteration must be >= 0, got {start_iteration}")
        self.start_iteration = int(start_iteration)
        try:
            return super().train(experiences, eval_streams, **kwargs)
        finally:
            self.start_iteration = 0

    def make_train_dataloader(self, num_workers=0, shuffle=False, pin_memory=None, **kwargs):
        data = self.adapted_dataset
        first = self.start_iteration * self.train_mb_size
        if first:
            if first >= len(data):
                raise ValueError(
                    f"cannot resume at iteration {self.start_iteration}: the experience has "
                    f"only {len(data)} episodes ({len(data) // self.train_mb_size} iterations)"
                )
            data = Subset(data, range(first, len(data)))
        self.exp_iteration = self.start_iteration
        self.dataloader = DataLoader(
            data,
            batch_size=self.train_mb_size,
            shuffle=False,
            num_workers=num_workers,
            collate_fn=collate_episodes,
        )

    #: Bytes of collated evaluation batches kept for the next evaluation of the same episodes.
    eval_cache_bytes: int = 256 * 2**20

    def make_eval_dataloader(self, num_workers=0, shuffle=False, pin_memory=None, **kwargs):
        """The evaluation batches; those of an experience evaluated before come from memory.

        The accuracy matrix evaluates the same test episodes after every training domain; an
        episode is a pure function of its index, so sampling, decoding and collating it again
        would only repeat work. Up to :attr:`eval_cache_bytes` of collated batches are kept
        (per strategy; an experience that does not fit is streamed as before).
        """
        source = self.experience.dataset
        hit = self._eval_batches.get(id(source))
        if hit is not None and hit[0] is source and hit[1] == self.eval_mb_size:
            self.dataloader = [list(b) for b in hit[2]]  # Avalanche moves items in place
            return
        loader = DataLoader(
            self.adapted_dataset,
            batch_size=self.eval_mb_size,
            shuffle=False,
            num_workers=num_workers,
            collate_fn=collate_episodes,
        )

        def keep(batches: list, size: int) -> None:
            self._eval_batches[id(source)] = (source, self.eval_mb_size, batches)
            self._eval_cached_bytes += size

        self.dataloader = _CachingLoader(
            loader, budget=self.eval_cache_bytes - self._eval_cached_bytes, keep=keep
        )

    # ------------------------------------------------------------------ model
    @property
    def learner_batch(self) -> EpisodeBatch:
        """The meta-batch as learners see it: inputs and labels, never the OOD ground truth."""
        return self.mb_x.without_oracle()

    def forward(self):
        batch = self.learner_batch
        if self.iteration is None:  # a forward pass outside Avalanche's loops
            self.iteration = Iteration(training=self.is_training, n_current=len(batch))
        if hasattr(self.model, "encode") and hasattr(self.model, "classify"):
            self.iteration.state = self.model.encode(batch)
            trigger_plugins(self, "after_encode")
            return self.model.classify(self.iteration.state)
        self.iteration.state = None
        return self.model(batch)

    def criterion(self):
        """The loss: in training, the query loss (recorded as ``"meta"``) plus the loss terms of
        the plugins, in plugin order; in evaluation, the query loss.

        A subclass with its own objective overrides this and ends, in training, with
        :meth:`plus_terms_of` for the plugins it does not name.
        """
        loss = super().criterion()
        if not self.is_training:
            return loss
        return self.plus_terms_of(self.meta_term(loss), *self.plugins)

    def meta_term(self, loss: torch.Tensor) -> torch.Tensor:
        """Record the query loss as this iteration's ``"meta"`` term (checked for NaN/inf with
        the others before the optimiser step)."""
        self.loss_terms["meta"] = loss.detach()
        return loss

    def plus_terms_of(self, loss: torch.Tensor, *plugins) -> torch.Tensor:
        """``loss`` plus the loss terms of ``plugins``, added one at a time in their order and
        recorded by name in :attr:`loss_terms` (checked for NaN/inf before the optimiser step).

        A plugin's ``loss_term(self)`` returns its term (named by the plugin's ``TERM``), a
        mapping of several terms by name (added in the mapping's order), or ``None`` (no term
        this iteration). Plugins without a ``loss_term`` add nothing.
        """
        for plugin in plugins:
            if not hasattr(plugin, "loss_term"):
                continue
            self._terms_added_of.append(plugin)
            terms = plugin.loss_term(self)
            if terms is None:
                continue
            if isinstance(terms, torch.Tensor):
                if not isinstance(getattr(plugin, "TERM", None), str):
                    raise TypeError(
                        f"{type(plugin).__name__}.loss_term returned a tensor, but the plugin "
                        "has no TERM, the name its term is recorded and logged under; fix: set "
                        f"TERM = '<name>' on {type(plugin).__name__}, or return {{name: term}}"
                    )
                terms = {plugin.TERM: terms}
            for name, value in terms.items():
                loss = loss + value
                self._record_term(name, value)
        return loss

    def _record_term(self, name: str, value: torch.Tensor) -> None:
        key, k = name, 1
        while key in self.loss_terms:  # several plugins of one kind: mi, mi#2, ...
            k += 1
            key = f"{name}#{k}"
        self.loss_terms[key] = value.detach()

    def _before_training_iteration(self, **kwargs):
        if self._skips_on_device():  # where the step the device counts next belongs
            d = self._deferred_state()
            d["where"].append((self.experience.current_experience, self.exp_iteration))
        self.loss_terms = {}
        self._terms_added_of = []
        self.iteration = Iteration(training=True, n_current=len(self.mb_x))
        super()._before_training_iteration(**kwargs)
        replayed = self.iteration.replayed
        if replayed is not None:  # the memory's tasks go after the stream's, as learners see them
            merged = self.learner_batch.cat(replayed.batch)
            self.replace_batch(merged, merged.query_y.reshape(-1))

    def _before_eval_iteration(self, **kwargs):
        self.iteration = Iteration(training=False, n_current=len(self.mb_x))
        super()._before_eval_iteration(**kwargs)

    def _refuse(self, term: str, detail: str = "") -> None:
        raise NonFiniteLossError(
            term,
            experience=self.experience.current_experience,
            iteration=self.exp_iteration,
            detail=detail,
        )

    def _before_backward(self, **kwargs):
        self._check_every_term_added()
        super()._before_backward(**kwargs)

    def _check_every_term_added(self) -> None:
        """Stop the step when the criterion left out a plugin's loss term: the term would
        otherwise be missing from the loss without a word."""
        left_out = [
            type(p).__name__
            for p in self.plugins
            if hasattr(p, "loss_term") and not any(p is q for q in self._terms_added_of)
        ]
        if left_out:
            raise RuntimeError(
                f"{type(self).__name__}.criterion did not add the loss terms of {left_out}: "
                "every plugin's loss_term reaches the loss through the criterion; fix: give "
                "the plugins to the strategy's constructor (plugins=[...]), and end a criterion "
                "of one's own with `return self.plus_terms_of(loss, *plugins)` for the plugins "
                "it does not name, as EpisodicTemplate.criterion does"
            )

    # ------------------------------------------------------------------ the step
    def training_step(self) -> None:
        """One training step on the current meta-batch, between Avalanche's
        ``before_training_iteration`` and ``after_training_iteration``: zero the gradients,
        forward (with ``after_encode``), the criterion, backward, the optimiser step, with
        every Avalanche callback in between. It launches work and reads nothing on the host
        when the optimiser skips non-finite steps on the device (:meth:`optimizer_step`)."""
        self._zero_grad()
        self.loss = self._make_empty_loss()
        self._before_forward()
        self.mb_output = self.forward()
        self._after_forward()
        self.loss += self.criterion()
        self._before_backward()
        self.backward()
        self._after_backward()
        self._before_update()
        self.optimizer_step()
        self._after_update()
        self._let_go_of_the_graph()

    def _let_go_of_the_graph(self) -> None:
        """Detach what the step keeps for after it (the loss, the logits, the embeddings):
        the backward pass used their graph up, and a compiled step may return no tensor
        whose graph a backward inside it consumed."""
        self.loss = self.loss.detach()
        self.mb_output = self.mb_output.detach()
        state = self.iteration.state if self.iteration is not None else None
        if state is not None:
            for f in dataclasses.fields(state):
                value = getattr(state, f.name)
                if isinstance(value, torch.Tensor):
                    setattr(state, f.name, value.detach())
                elif isinstance(value, tuple) and all(isinstance(v, torch.Tensor) for v in value):
                    setattr(state, f.name, tuple(v.detach() for v in value))

    def training_epoch(self, **kwargs):
        """Avalanche's SGD epoch with the step in one method (:meth:`training_step`), compiled
        when :meth:`compile_training_step` asked for it."""
        step = self.training_step if self._compiled_step is None else self._run_compiled_step
        for batch in self.dataloader:
            if self._stop_training:
                break
            self.mbatch = batch
            self._unpack_minibatch()
            self._before_training_iteration(**kwargs)
            step()
            self._after_training_iteration(**kwargs)

    def compile_training_step(self, *, mode: str | None = None, backend: str = "inductor") -> None:
        """Run every training step as one compiled graph: ``torch.compile(training_step,
        fullgraph=True, mode=mode, backend=backend)``. On a CUDA device
        ``mode="reduce-overhead"`` replays the step as a CUDA graph (one launch instead of
        hundreds).

        The step must read nothing on the host: the optimiser a fused one (the finite check
        then skips a bad step on the device; ``Adam(fused=True)`` is the CUDA default), and
        every plugin free of host reads (ORDER: ``ot_solver="sinkhorn"``; the exact plan is
        solved on the host). The first step runs as it is (plugins build their networks and
        state then); a step that breaks the graph fails at its first compiled call, naming the
        break. Backward passes inside the step are traced
        (``torch._dynamo.config.trace_autograd_ops``, set while the step runs).
        """
        if not self._skips_on_device():
            raise ValueError(
                "compile_training_step needs a fused optimiser, whose step the finite check "
                f"can skip on the device; got {type(self.optimizer).__name__} without "
                "fused=True; fix: strategy.optimizer = torch.optim.Adam(strategy.model."
                "parameters(), lr=..., fused=True) (the default on a CUDA device)"
            )
        self._compiled_step = torch.compile(
            self.training_step, fullgraph=True, mode=mode, backend=backend
        )
        self._step_warm = False

    def _run_compiled_step(self) -> None:
        if not self._step_warm:  # plugins build their own parts (networks, state) at first use
            self.training_step()
            self._step_warm = True
            return
        # torch.compile imported torch._dynamo when compile_training_step called it
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            self._compiled_step()

    #: Training iterations between two reads of the device-side checks (:meth:`check_deferred`)
    #: when the optimiser skips non-finite steps on the device; also read at every domain end
    #: and before every checkpoint.
    deferred_check_every: int = 50

    def backward(self):
        """The backward pass into the gradients of the model's and the optimiser's parameters:
        ``loss.backward()`` for them (``torch.autograd.grad``, accumulated into ``.grad``), in
        a form a compiled step traces whole."""
        params = {id(p): p for p in self.model.parameters() if p.requires_grad}
        for group in self.optimizer.param_groups:
            params.update({id(p): p for p in group["params"] if p.requires_grad})
        params = list(params.values())
        grads = torch.autograd.grad(
            self.loss, params, retain_graph=self.retain_graph, allow_unused=True
        )
        for p, g in zip(params, grads):
            if g is not None:
                p.grad = g if p.grad is None else p.grad + g

    def _zero_grad(self) -> None:
        """``optimizer.zero_grad()`` (gradients set to ``None``), written out so that a
        compiled step traces it (torch does not trace into ``Optimizer.zero_grad``)."""
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                p.grad = None

    def optimizer_step(self):
        if not self._skips_on_device():
            self._refuse_non_finite()
            return super().optimizer_step()
        self._flag_non_finite()
        opt = self.optimizer
        if type(opt) is torch.optim.Adam and len(opt.param_groups) == 1:
            # the same fused kernel as step(), in a form a compiled step traces
            grads = [p.grad for p in opt.param_groups[0]["params"]]
            return adam_step(opt, grads, found_inf=opt.found_inf)
        return super().optimizer_step()

    def _skips_on_device(self) -> bool:
        """Whether the optimiser can skip a step on the device (a fused torch optimiser honours
        ``found_inf``, as with a gradient scaler): then the finite check never waits for it."""
        opt = self.optimizer
        return isinstance(opt, (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD)) and bool(
            opt.defaults.get("fused")
        )

    def _label_error(self) -> torch.Tensor | None:
        state = self.iteration.state if self.iteration is not None else None
        return None if state is None else state.label_error

    def _flag_non_finite(self) -> None:
        """Check the loss terms, every gradient and the support labels on the device and make
        the optimiser skip this step and every later one once any is bad (a sticky
        ``found_inf``); the first bad iteration and its flags stay on the device until
        :meth:`check_deferred` reads them."""
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        d = self._deferred_state()
        names = (*self.loss_terms, "total", "gradient")
        values = [*self.loss_terms.values(), self.loss.detach()]
        if grads:
            d["grads_bad"].zero_()
            torch._amp_foreach_non_finite_check_and_unscale_(grads, d["grads_bad"], d["one"])
        # one number per term: itself when it is one, else its sum (non-finite iff one is)
        values = [v.reshape(()) if v.numel() == 1 else v.sum() for v in values]
        parts = [~torch.isfinite(torch.stack(values).float()), d["grads_bad"] > 0]
        label_error = self._label_error()
        if label_error is not None:
            names = (*names, "support labels")
            parts.append(label_error.reshape(1))
        flags = torch.cat(parts)
        bad_now = flags.any()
        first = bad_now & (d["at"] < 0)
        held = d["flags"].get(names)
        d["flags"][names] = flags & first if held is None else torch.where(first, flags, held)
        d["at"] = torch.where(first, d["now"], d["at"])
        d["bad"] = torch.maximum(d["bad"], bad_now.float())
        d["now"] = d["now"] + 1
        self.optimizer.found_inf = d["bad"]

    def _deferred_state(self) -> dict:
        """The device-side record of the steps since the last :meth:`check_deferred`, made on
        the model's device at first use."""
        device = next(self.model.parameters()).device
        d = getattr(self, "_deferred", None)
        if d is None or d["bad"].device != device:
            d = self._deferred = {
                "bad": torch.zeros((), device=device),  # sticky: 1 from the first bad step on
                "at": torch.full((1,), -1, dtype=torch.long, device=device),
                "now": torch.zeros(1, dtype=torch.long, device=device),  # steps since a read
                "one": torch.ones(1, device=device),
                "grads_bad": torch.zeros(1, device=device),
                "flags": {},  # names -> their flags at the first bad step
                "where": [],  # host: (experience, iteration) of every step since a read
            }
        return d

    def check_deferred(self) -> None:
        """Read the device-side checks of the steps since the last read (one host read) and
        raise for the first bad one: :class:`NonFiniteLossError` naming the term (or the
        gradient) and the iteration, or ``ValueError`` for support labels that break the
        ``N``-way contract. Every step from it on was skipped on the device, so the weights
        are those before it, as a step refused on the host leaves them."""
        d = getattr(self, "_deferred", None)
        if d is None:
            return
        at = int(d["at"])
        if at < 0:
            d["where"].clear()
            d["now"].zero_()
            return
        experience, iteration = d["where"][at]
        bad = [n for names, f in d["flags"].items() for n, x in zip(names, f.tolist()) if x]
        self._deferred = None
        if "support labels" in bad:
            raise ValueError(
                f"the support labels at training domain {experience + 1}, iteration "
                f"{iteration} break the model's {self.model.n_way}-way contract (a label "
                "outside 0..N-1, or an episode without a support example of some class); the "
                "step and every later one were skipped, so the weights are those before it"
            )
        term = next((n for n in bad if n not in ("total", "gradient")), None)
        term = term or ("total" if "total" in bad else "gradient")
        raise NonFiniteLossError(
            term, experience=experience, iteration=iteration, detail="skipped on the device"
        )

    def _refuse_non_finite(self) -> None:
        """Refuse the step if the loss or a gradient is NaN/inf, or the support labels break
        the model's ``N``-way contract: one reduction and one host read on the hot path; the
        offending term or parameter is named only on failure (the first non-finite term, in
        the order they were added, ``"meta"`` first)."""
        grads = [(n, p.grad) for n, p in self.model.named_parameters() if p.grad is not None]
        finite = [torch.isfinite(self.loss).all(), *(torch.isfinite(g).all() for _, g in grads)]
        label_error = self._label_error()
        if label_error is not None:
            finite.append(~label_error)
        if bool(torch.stack(finite).all()):
            return
        if label_error is not None and bool(label_error):
            support_n_way(self.mb_x.support_y)  # explains labels below 0 or a missing class
            raise ValueError(
                f"the support labels at training domain "
                f"{self.experience.current_experience + 1}, iteration {self.exp_iteration} break "
                f"the model's {self.model.n_way}-way contract (a label outside 0..N-1); the "
                "optimiser step was refused"
            )
        if not bool(torch.isfinite(self.loss).all()):
            bad = [k for k, v in self.loss_terms.items() if not bool(torch.isfinite(v).all())]
            values = ", ".join(
                f"{k}={float(v.float().sum()):.4g}" for k, v in self.loss_terms.items()
            )
            self._refuse(bad[0] if bad else "total", f"loss terms: {values}")
        name = next(n for n, g in grads if not bool(torch.isfinite(g).all()))
        self._refuse(f"gradient of {name}")

    def _after_training_iteration(self, **kwargs):
        if (self.exp_iteration + 1) % self.deferred_check_every == 0:
            self.check_deferred()  # before any plugin logs or saves this iteration
        super()._after_training_iteration(**kwargs)
        self.exp_iteration += 1

    def _after_training_exp(self, **kwargs):
        self.check_deferred()
        super()._after_training_exp(**kwargs)

    # ------------------------------------------------------------------ helpers
    def replace_batch(self, x: EpisodeBatch, y: torch.Tensor) -> None:
        """Replace the current mini-batch (e.g. to append replayed episodes)."""
        self.mbatch[0] = x
        self.mbatch[1] = y
        self.mbatch[-1] = torch.zeros_like(y)


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.nbytes
    if dataclasses.is_dataclass(value):
        return sum(_nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return sum(map(_nbytes, value))
    return 0


class _CachingLoader:
    """Iterates a data loader and hands its batches to ``keep`` once, if they fit ``budget``."""

    def __init__(self, loader: DataLoader, *, budget: int, keep) -> None:
        self.loader, self.budget, self.keep = loader, budget, keep

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        kept: list | None = []
        size = 0
        for batch in self.loader:
            batch = tuple(batch)
            if kept is not None:
                size += _nbytes(batch)
                if size <= self.budget:
                    kept.append(batch)
                else:
                    kept = None
            yield list(batch)
        if kept is not None:
            self.keep(kept, size)
