"""Python's garbage collector as the placer runs it: out of the way of decisions.

The placer's view of a 10,000-node cluster is a few million long-lived objects. With the
interpreter's defaults (a young collection every 700 net allocations, a full one every
100 young ones or so) a full collection walks all of them, and one landing inside a gang
decision added up to 240 ms to it. Two settings keep that off the hot path:

- `tune_collector`, at start: young collections every GEN0_THRESHOLD net allocations, the older
  generations rarely. A pod decision at 1,000 nodes leaves about 300 objects to the collector, a
  64-pod gang about 12,000: one young collection (a few ms) every few hundred decisions stays out
  of their p99 (at the default 700, one came every two or three decisions), and every few gangs;
- `freeze_long_lived`, once the view is built (the placer's catch-up): everything alive then
  moves to the permanent generation, which no collection walks again. What the view holds
  later (changed nodes) is collected as usual; reference counting frees the rest.

`collector_as_the_placer_runs_it` applies both around a block and puts the defaults back
after, so the bench measures decisions with the service's settings.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GEN0_THRESHOLD = 100_000  # net allocations between young collections (default 700)
GEN1_THRESHOLD = 20  # young collections between middle ones (default 10)
GEN2_THRESHOLD = 100  # middle collections between full ones (default 10; the interpreter also waits for growth)


def tune_collector() -> None:
    """The placer's thresholds (see the module docstring)."""
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)


def freeze_long_lived() -> None:
    """Collect once, then move every object alive now to the permanent generation (no collection walks it)."""
    gc.collect()
    gc.freeze()


@contextmanager
def collector_as_the_placer_runs_it() -> Iterator[None]:
    """Within the block, the placer's thresholds; `freeze_long_lived` there freezes what was built so far.
    After it, the thresholds as they were and nothing frozen."""
    before = gc.get_threshold()
    tune_collector()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
