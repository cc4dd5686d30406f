"""How every aiokafka client of the services authenticates: TLS and SASL from the environment.

One `KafkaSecurity` is read by `Settings.from_env` and handed to every client
the code creates (producer, consumers, followers, the admin client, the raw
metadata clients of topoplace.kafka.broker_kind) through `client_options`. The password is a
`Secret`: its repr is masked, so it reaches no log line, span or traceback.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any

import msgspec

SECURITY_PROTOCOL = "KAFKA_SECURITY_PROTOCOL"
SASL_MECHANISM = "KAFKA_SASL_MECHANISM"
SASL_USERNAME = "KAFKA_SASL_USERNAME"
SASL_PASSWORD = "KAFKA_SASL_PASSWORD"
SSL_CAFILE = "KAFKA_SSL_CAFILE"
SSL_CERTFILE = "KAFKA_SSL_CERTFILE"
SSL_KEYFILE = "KAFKA_SSL_KEYFILE"
# SASL over an unencrypted connection: the PLAIN password, and every message after SCRAM's
# handshake, cross the network readable and forgeable. Refused unless this says it is meant.
ALLOW_PLAINTEXT_SASL = "TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL"

SECURITY_ENV_VARS: tuple[str, ...] = (
    SECURITY_PROTOCOL,
    SASL_MECHANISM,
    SASL_USERNAME,
    SASL_PASSWORD,
    SSL_CAFILE,
    SSL_CERTFILE,
    SSL_KEYFILE,
    ALLOW_PLAINTEXT_SASL,
)

PROTOCOLS: tuple[str, ...] = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityConfigError(ValueError):
    """A security variable has a value no client can use (names the variable)."""

    def __init__(self, variable: str, reason: str) -> None:
        super().__init__(f"{variable}: {reason}")
        self.variable = variable
        self.reason = reason


class Secret:
    """A value that must never be printed: repr and str are masked; `reveal()` gives it to a client.

    A plain class, not a dataclass or Struct: msgspec (the log encoder) would write those
    field by field; this one it can only write through str(), masked.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class KafkaSecurity(msgspec.Struct, frozen=True, kw_only=True):
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_cafile: str | None = None  # None: the system's trusted CAs
    ssl_certfile: str | None = None  # client certificate (mutual TLS), with ssl_keyfile
    ssl_keyfile: str | None = None
    allow_plaintext_sasl: bool = False  # SASL_PLAINTEXT accepted (a test broker, a trusted loopback)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


def security_from_env(environ: Mapping[str, str]) -> KafkaSecurity:
    """The security variables, checked together; raises SecurityConfigError naming the variable."""

    def get(variable: str) -> str | None:
        return environ.get(variable, "").strip() or None

    protocol = (get(SECURITY_PROTOCOL) or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(SECURITY_PROTOCOL, f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    mechanism = get(SASL_MECHANISM)
    username = get(SASL_USERNAME)
    password = environ.get(SASL_PASSWORD) or None  # a password may begin or end with spaces
    sasl = protocol.startswith("SASL_")
    allow_plaintext_sasl = _allowed(get(ALLOW_PLAINTEXT_SASL))
    if protocol == "SASL_PLAINTEXT" and not allow_plaintext_sasl:
        raise SecurityConfigError(
            SECURITY_PROTOCOL,
            "SASL_PLAINTEXT sends the SASL credentials (PLAIN: the password itself) and every message "
            "unencrypted; use SASL_SSL, or set "
            f"{ALLOW_PLAINTEXT_SASL}=1 if an unencrypted network is really meant",
        )
    if sasl:
        if mechanism is None:
            raise SecurityConfigError(SASL_MECHANISM, f"is required with {SECURITY_PROTOCOL}={protocol}")
        mechanism = mechanism.upper()
        if mechanism not in MECHANISMS:
            raise SecurityConfigError(SASL_MECHANISM, f"must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        if username is None:
            raise SecurityConfigError(SASL_USERNAME, f"is required with {SECURITY_PROTOCOL}={protocol}")
        if password is None:
            raise SecurityConfigError(SASL_PASSWORD, f"is required with {SECURITY_PROTOCOL}={protocol}")
    else:
        for variable, value in ((SASL_MECHANISM, mechanism), (SASL_USERNAME, username), (SASL_PASSWORD, password)):
            if value is not None:
                raise SecurityConfigError(
                    variable, f"needs {SECURITY_PROTOCOL} SASL_PLAINTEXT or SASL_SSL, which is {protocol}"
                )
    files = {variable: get(variable) for variable in (SSL_CAFILE, SSL_CERTFILE, SSL_KEYFILE)}
    for variable, path in files.items():
        if path is None:
            continue
        if protocol not in ("SSL", "SASL_SSL"):
            raise SecurityConfigError(variable, f"needs {SECURITY_PROTOCOL} SSL or SASL_SSL, which is {protocol}")
        if not os.access(path, os.R_OK):
            raise SecurityConfigError(variable, f"{path} is not a readable file")
    if (files[SSL_CERTFILE] is None) != (files[SSL_KEYFILE] is None):
        missing = SSL_KEYFILE if files[SSL_KEYFILE] is None else SSL_CERTFILE
        raise SecurityConfigError(missing, "is required with the other of KAFKA_SSL_CERTFILE / KAFKA_SSL_KEYFILE")
    return KafkaSecurity(
        protocol=protocol,
        sasl_mechanism=mechanism if sasl else None,
        sasl_username=username,
        sasl_password=Secret(password) if password is not None else None,
        ssl_cafile=files[SSL_CAFILE],
        ssl_certfile=files[SSL_CERTFILE],
        ssl_keyfile=files[SSL_KEYFILE],
        allow_plaintext_sasl=allow_plaintext_sasl,
    )


def _allowed(value: str | None) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SecurityConfigError(ALLOW_PLAINTEXT_SASL, f"must be one of true/false/1/0/yes/no/on/off, got {value!r}")


def client_options(security: KafkaSecurity | None) -> dict[str, Any]:
    """Keyword arguments for any aiokafka client (producer, consumer, admin, AIOKafkaClient)."""
    if security is None or security.protocol == "PLAINTEXT":
        return {}
    options: dict[str, Any] = {"security_protocol": security.protocol}
    if security.uses_tls:
        options["ssl_context"] = _ssl_context(security)
    if security.uses_sasl:
        assert security.sasl_password is not None  # checked by security_from_env
        options["sasl_mechanism"] = security.sasl_mechanism
        options["sasl_plain_username"] = security.sasl_username  # aiokafka's SCRAM reads these too
        options["sasl_plain_password"] = security.sasl_password.reveal()
    return options


def _ssl_context(security: KafkaSecurity) -> ssl.SSLContext:
    from aiokafka.helpers import create_ssl_context  # only with TLS: short commands stay light

    context: ssl.SSLContext = create_ssl_context(
        cafile=security.ssl_cafile, certfile=security.ssl_certfile, keyfile=security.ssl_keyfile
    )
    return context
