"""The one "did you mean" of every message that refuses a name: the closest valid names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(
    names: object | Iterable[object],
    choices: Iterable[str],
    *,
    cutoff: float = 0.6,
    n: int = 1,
    prefix: str = "",
) -> str:
    """`` (did you mean 'gamma'?)`` for each of ``names`` (a name, or up to three of many) that
    has a close one among ``choices``; ``""`` when none has.

    ``cutoff``: how close a choice must be (:func:`difflib.get_close_matches`' ratio, 0-1);
    ``n``: how many choices one hint may name (``'a' or 'b'``); a dotted choice whose last part
    is the name (``'strategy.beta'`` for ``beta``) is always named. ``prefix``: written before
    each suggestion (``prefix="synthetic:"`` suggests ``'synthetic:svhn'``).
    """
    many = isinstance(names, Iterable) and not isinstance(names, str)
    asked = [str(x) for x in names][:3] if many else [str(names)]  # type: ignore[union-attr]
    valid = sorted({str(c) for c in choices})
    hints = []
    for name in asked:
        close = difflib.get_close_matches(name, valid, n=n, cutoff=cutoff)
        close += [c for c in valid if c.endswith("." + name) and c not in close]
        if close:
            hints.append(f" (did you mean {' or '.join(repr(prefix + c) for c in close)}?)")
    return "".join(hints)
