"""API errors answered as Kubernetes `Status` objects, with the real server's reasons and messages."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the API answers with a `Status` body (code, reason, message)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str = "",
        kind: str = "",
        causes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.name = name
        self.kind = kind
        self.causes = causes or []

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            body["details"] = details
        return body


def not_found(plural: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{plural} "{name}" not found', name=name, kind=plural)


def already_exists(plural: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists', name=name, kind=plural)


def conflict(plural: str, name: str, detail: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {plural} "{name}": {detail}',
        name=name,
        kind=plural,
    )


def stale_version(plural: str, name: str) -> ApiError:
    return conflict(
        plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    )


def uid_precondition_failed(plural: str, name: str, wanted: str, actual: str) -> ApiError:
    """409: a write whose uid precondition names another object (storage.Preconditions.Check's words)."""
    return conflict(plural, name, f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {actual}")


def invalid(kind: str, name: str, field: str, detail: str, *, reason: str = "FieldValueInvalid") -> ApiError:
    """422: `<Kind> "<name>" is invalid: <field>: <detail>`, the real server's wording."""
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {field}: {detail}',
        name=name,
        kind=kind,
        causes=[{"reason": reason, "message": detail, "field": field}],
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def success_status(code: int) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
