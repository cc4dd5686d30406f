"""How many examples a fuzz test runs: a short profile in `make test`, a long one in `make fuzz`.

TOPOPLACE_FUZZ_PROFILE=long (what `make fuzz` sets) runs at least 100,000 examples per test.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "TOPOPLACE_FUZZ_PROFILE"
EXAMPLES = {"short": 100, "long": 100_000}


def profile_name() -> str:
    name = os.environ.get(PROFILE_ENV, "short")
    if name not in EXAMPLES:
        raise ValueError(f"{PROFILE_ENV}: {name!r} is not one of {', '.join(EXAMPLES)}")
    return name


# deadline None: the first example of a test builds decoders and caches; the count, not the time, bounds a run.
FUZZ = settings(
    max_examples=EXAMPLES[profile_name()],
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    database=None,
)
