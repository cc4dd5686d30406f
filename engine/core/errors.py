"""The engine's error for input it cannot read: the project's FieldError, under the engine's name."""

from __future__ import annotations

from schemas.errors import FieldError

RequestError = FieldError  # one class: the event contract's objects raise it too

__all__ = ["RequestError"]
