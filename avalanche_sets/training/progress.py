"""A quiet terminal logger: one progress bar per training domain, nothing else.

Avalanche's ``InteractiveLogger`` prints every metric after every evaluated domain (hundreds of
lines per run), opens its bar before it knows the total (a stray ``0it [00:00, ?it/s]`` line)
and both updates and refreshes it on every iteration (each update written twice when the output
is not a terminal). :class:`DomainProgressLogger` draws one bar per training domain with a known
total, updates it once per iteration, and closes it after the evaluation that follows with the
accuracy on the domains trained so far. The metric values themselves go to a log file
(``TextLogger``), see :func:`avalanche_sets.runs.experiment.run_experiment`.
"""

from __future__ import annotations

import re
import sys
from typing import IO

from avalanche.logging import BaseLogger
from tqdm import tqdm

from .run_loggers import format_loss_terms, loss_terms_of

__all__ = ["DomainProgressLogger"]

# EpisodeAcc/eval_phase/test_stream/Exp002 -> 2 (one domain's mean episode accuracy)
_DOMAIN_ACC = re.compile(r"^EpisodeAcc/eval_phase/[^/]+_stream/Exp(\d+)$")


class DomainProgressLogger(BaseLogger):
    """One progress bar per training domain (training iterations), for the terminal.

    Use it as one of an ``EvaluationPlugin``'s loggers. The bar of domain ``i`` is opened when
    training on it starts (resumed runs start the bar at the resumed iteration), advances once
    per training iteration (showing the loss terms' means of the last logged interval, when the
    evaluator has :class:`~avalanche_sets.training.loss_terms.LossTerms`), shows
    ``evaluating`` during the evaluation that follows and closes
    with the mean episode accuracy on domains ``0..i`` when the evaluator has
    :class:`~avalanche_sets.metrics.EpisodeAccuracy`.

    Args:
        file: where to draw the bars (default: ``sys.stderr`` at the time of drawing, so the
            results on ``stdout`` stay clean when redirected).
    """

    def __init__(self, *, file: IO[str] | None = None) -> None:
        super().__init__()
        self.file = file
        self._bar = None
        self._domain: int | None = None
        self._acc: dict[int, float] = {}

    # ------------------------------------------------------------------ training
    def before_training_exp(self, strategy, metric_values, **kwargs) -> None:
        self.close()
        exp = strategy.experience
        self._domain = int(exp.current_experience)
        self._acc = {}
        try:
            n_domains = f"/{len(exp.origin_stream)}"
        except (AttributeError, TypeError):  # a stream without a known length
            n_domains = ""
        name = getattr(exp, "domain_name", None)
        start = int(getattr(strategy, "start_iteration", 0))
        total = start + len(strategy.dataloader) * int(strategy.train_epochs)
        self._bar = tqdm(
            total=total,
            initial=start,
            desc=f"domain {self._domain + 1}{n_domains}" + (f" {name}" if name else ""),
            unit="it",
            file=self.file if self.file is not None else sys.stderr,
            leave=True,
            dynamic_ncols=True,
            mininterval=0.5,
        )

    def after_training_iteration(self, strategy, metric_values, **kwargs) -> None:
        if self._bar is not None:
            terms = loss_terms_of(metric_values)
            if terms:  # the loss terms' means over the last logged interval
                self._bar.set_postfix_str(format_loss_terms(terms[max(terms)]), refresh=False)
            self._bar.update(1)

    # ---------------------------------------------------------------- evaluation
    def before_eval(self, strategy, metric_values, **kwargs) -> None:
        self._acc = {}
        if self._bar is not None:
            self._bar.set_postfix_str("evaluating")

    def log_single_metric(self, name, value, x_plot) -> None:
        match = _DOMAIN_ACC.match(name)
        if match is not None:
            self._acc[int(match.group(1))] = float(value)

    def after_eval(self, strategy, metric_values, **kwargs) -> None:
        if self._bar is None:  # an evaluation outside training: no bar to close
            return
        seen = [a for j, a in self._acc.items() if j <= (self._domain or 0)]
        if seen:
            text = f"test acc on domains 1-{self._domain + 1}: {100 * sum(seen) / len(seen):.1f}%"
        else:
            text = "evaluated"
        self._bar.set_postfix_str(text, refresh=False)  # close() draws the final state once
        self.close()

    def close(self) -> None:
        """Close an open bar (a run stopped before the evaluation that closes it)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __getstate__(self):  # checkpoints and process pools: the open bar stays behind
        state = dict(self.__dict__)
        state["_bar"] = None
        return state
