"""Reading one environment variable: each reader names the variable and the reason when its value
cannot be used (ConfigError), so a service refuses bad configuration in one clear line."""

from __future__ import annotations

from collections.abc import Mapping

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigError(ValueError):
    """A configuration variable has a value the services cannot use."""

    def __init__(self, variable: str, reason: str) -> None:
        super().__init__(f"{variable}: {reason}")
        self.variable = variable
        self.reason = reason


def optional(environ: Mapping[str, str], variable: str) -> str | None:
    value = environ.get(variable, "").strip()
    return value or None


def url(environ: Mapping[str, str], variable: str) -> str | None:
    value = optional(environ, variable)
    if value is not None and not value.startswith(("http://", "https://")):
        raise ConfigError(variable, f"must be an http:// or https:// URL, got {value!r}")
    return value


def choice(environ: Mapping[str, str], variable: str, choices: tuple[str, ...]) -> str | None:
    value = optional(environ, variable)
    if value is not None and value not in choices:
        raise ConfigError(variable, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def name(environ: Mapping[str, str], variable: str, default: str) -> str:
    value = optional(environ, variable)
    if value is None:
        return default
    if any(ch.isspace() for ch in value):
        raise ConfigError(variable, f"must not contain spaces, got {value!r}")
    return value


def name_or_none(environ: Mapping[str, str], variable: str) -> str | None:
    return name(environ, variable, "") or None


def flag(environ: Mapping[str, str], variable: str, *, default: bool) -> bool:
    value = optional(environ, variable)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConfigError(variable, f"must be one of true/false/1/0/yes/no/on/off, got {value!r}")


def positive_seconds(environ: Mapping[str, str], variable: str, *, default: float) -> float:
    value = optional(environ, variable)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(variable, f"must be a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(variable, f"must be a positive number of seconds, got {value!r}")
    return seconds


def port(environ: Mapping[str, str], variable: str) -> int:
    value = optional(environ, variable)
    if value is None:
        return 0
    try:
        port = int(value)
    except ValueError:
        raise ConfigError(variable, f"must be an integer port, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise ConfigError(variable, f"must be between 0 and 65535, got {port}")
    return port


def positive_int(environ: Mapping[str, str], variable: str) -> int | None:
    value = optional(environ, variable)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(variable, f"must be a positive integer, got {value!r}") from None
    if number < 1:
        raise ConfigError(variable, f"must be a positive integer, got {number}")
    return number
