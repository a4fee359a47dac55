"""Warnings on the command line's terminal: each as one line, each distinct one once.

Python shows a warning with the file and line that raised it, and again wherever another line
raises it (or after a ``catch_warnings`` block forgets what was shown): a sweep repeated one
warning for every run. :func:`one_line_warnings` shows each as ``warning: <message>`` on stderr,
once per distinct message and category for as long as it is active (one command), warnings
that filters ignore staying ignored. A sweep's worker processes hand theirs to the driver
(:func:`recorded_warnings`, :func:`show_recorded`), which shows them the same way. This module
needs the standard library alone.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["one_line_warnings", "recorded_warnings", "show_recorded"]

#: A warning as a worker hands it over: message, category, file, line.
Recorded = tuple[str, type, str, int]


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Show every warning raised inside as ``warning: <message>`` (stderr, no file or line),
    each distinct one (message and category) once; filters that ignore a warning still do, and
    a caller that records warnings (``catch_warnings(record=True)``) still gets each one."""
    seen: set[tuple[type, str]] = set()
    formatwarning = warnings.formatwarning

    def one_line(message, category, filename, lineno, line=None) -> str:
        text = " ".join(str(message).split())  # one line
        if (category, text) in seen:
            return ""  # said already
        seen.add((category, text))
        return f"warning: {text}\n"

    with warnings.catch_warnings():
        # after every other filter: what no filter ignores is shown each time it is raised, to
        # be said once here (Python's own once-per-line registry would repeat it elsewhere)
        warnings.filterwarnings("always", append=True)
        warnings.formatwarning = one_line
        try:
            yield
        finally:
            warnings.formatwarning = formatwarning


def recorded_warnings(run: Callable[[], Any]) -> tuple[Any, list[Recorded]]:
    """``run()``'s result and the warnings it raised (for a worker process to hand over)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", append=True)
        result = run()
    return result, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def show_recorded(recorded: Sequence[Recorded]) -> None:
    """Raise again, here, the warnings a worker recorded (:func:`recorded_warnings`), where they
    were raised: this process's filters and display decide what is shown."""
    for message, category, filename, lineno in recorded:
        warnings.warn_explicit(message, category, filename, lineno)
