"""What an engine may remember and how far its set searches go: given once, when the engine is made."""

from __future__ import annotations

from typing import Annotated

import msgspec

SEARCH_CAP = 20_000  # branches expanded per set search; ~0.5 s of Python at 72 devices


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """An engine's limits. The defaults are the placer's; the others exist to compare paths.

    `caches`: keep answers in the engine's bounded memo tables (off: every answer computed afresh,
    the reference the tables must equal). `table_search`: answer set searches by lookup where a
    topology allows (off: the branch-and-bound alone, the reference the lookups must equal).
    `search_cap`: branches one branch-and-bound may expand before it returns the best set found
    (marked inexact)."""

    caches: bool = True
    table_search: bool = True
    search_cap: Annotated[int, msgspec.Meta(ge=1)] = SEARCH_CAP
