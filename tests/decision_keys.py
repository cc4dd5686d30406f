"""The seal's key of the tests (schemas/seal.py): one random key per test run."""

from __future__ import annotations

import secrets

from schemas.seal import DecisionKey
from topoplace.kafka.security import Secret

TEST_KEY_TEXT = secrets.token_hex(32)
TEST_KEY = DecisionKey(TEST_KEY_TEXT.encode())
TEST_KEY_SECRET = Secret(TEST_KEY_TEXT)  # as Settings holds it
