"""A recording publisher for the watcher tests (the API server and broker come from tests/conftest.py)."""

from __future__ import annotations

import pytest
from cluster_fakes import RecordingPublisher


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()
