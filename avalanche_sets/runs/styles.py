"""One colour, marker and hatch per method, the same in every figure of a project.

A method's style is derived from its name, never from where its row falls in a table: MSKM is
the same green in a table of three methods and in one of seven, so a reader can compare
figures side by side. The built-in methods have fixed styles, chosen so that the methods of
each of the paper's tables differ in colour; any other method (one of one's own) gets the
colour, marker and hatch that the SHA-256 of its name picks, stable across runs and machines
(two such methods may share a colour; their markers and hatches then most likely differ).

Rows of one method that differ in a setting (ORDER at ``mem_size`` 50 and 200) share the
method's style and differ in their dashes (bars: edge dashes and shade), by
:func:`variant_dashes`. Standard library only.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

__all__ = ["MethodStyle", "PALETTE", "MARKERS", "HATCHES", "DASHES", "method_style",
           "variant_dashes"]  # fmt: skip

#: the colours a method of one's own is drawn from (the built-ins use them too)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#e7ba52")  # fmt: skip
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "H")
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "++", "--", "||", "**")
DASHES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (8, 3)))


class MethodStyle(NamedTuple):
    """How every figure draws a method's rows."""

    color: str
    marker: str
    hatch: str


_B, _O, _G, _R, _P, _BR, _PK, _GR, _OL, _C, _IN, _GO = PALETTE
# the paper's Table 2 (protonet … order) and Table 3 (semi-* … joint-matched) each differ in
# colour; the ablations (order-*) differ from ORDER and from each other
_BUILTIN = {
    "order": MethodStyle(_R, "o", ""),
    "order-mi-only": MethodStyle(_O, "s", "//"),
    "order-ot-only": MethodStyle(_GO, "D", "\\\\"),
    "order-mi-id-only": MethodStyle(_PK, "v", ".."),
    "order-mi-ood-only": MethodStyle(_OL, "^", "xx"),
    "order-no-ot": MethodStyle(_BR, "P", "oo"),
    "order-ood-filter-only": MethodStyle(_C, "X", "++"),
    "order-ot-support-only": MethodStyle(_IN, "h", "--"),
    "protonet": MethodStyle(_B, "^", ".."),
    "anil": MethodStyle(_P, "v", "xx"),
    "mskm": MethodStyle(_G, "D", "\\\\"),
    "lst": MethodStyle(_BR, "P", "oo"),
    "tpn": MethodStyle(_C, "X", "++"),
    "semi-seq": MethodStyle(_B, "<", "//"),
    "semi-er": MethodStyle(_G, ">", ".."),
    "semi-agem": MethodStyle(_P, "s", "xx"),
    "semi-gem": MethodStyle(_PK, "h", "oo"),
    "semi-mer": MethodStyle(_OL, "P", "++"),
    "semi-gpm": MethodStyle(_C, "v", "--"),
    "semi-der": MethodStyle(_BR, "X", "\\\\"),
    "joint": MethodStyle(_GR, "p", "||"),
    "joint-matched": MethodStyle(_IN, "H", "**"),
}


def method_style(method: str) -> MethodStyle:
    """The colour, marker and hatch of ``method`` (a method's name as its records hold it):
    a built-in's fixed style, else the one the SHA-256 of the name picks. Independent of any
    table's rows, so the same in every figure."""
    if method in _BUILTIN:
        return _BUILTIN[method]
    digest = hashlib.sha256(method.encode()).digest()
    return MethodStyle(
        PALETTE[digest[0] % len(PALETTE)],
        MARKERS[digest[1] % len(MARKERS)],
        HATCHES[1 + digest[2] % (len(HATCHES) - 1)],  # a hatch: never the plain bar of ORDER
    )


def variant_dashes(methods: list[str]) -> list:
    """The dashes of each of a figure's rows (``methods``: each row's method, in row order): the
    k-th row of a method gets :data:`DASHES` ``[k]``, so rows of one method, which share its
    colour, marker and hatch, stay apart."""
    seen: dict[str, int] = {}
    out = []
    for m in methods:
        k = seen[m] = seen.get(m, -1) + 1
        out.append(DASHES[k % len(DASHES)])
    return out
