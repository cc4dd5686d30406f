"""The project's error for input that cannot be read: it names the field and the reason."""

from __future__ import annotations


class FieldError(ValueError):
    """A value (a pod request, an object, a snapshot) that cannot be read: names the field and the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
