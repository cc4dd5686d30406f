"""Which broker this is, and the consumer-group quirks of the embedded one.

Production code: a service asks whether its broker is the embedded Tansu (it
recognises it by cluster id) to pick a session timeout and to leave a group of
generation 0 by hand. Starting an embedded broker is the dev harness's
business (topoplace.dev.broker).
"""

from __future__ import annotations

import logging

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from aiokafka.protocol.group import LeaveGroupRequest
from aiokafka.protocol.metadata import MetadataRequest

from topoplace.kafka.security import KafkaSecurity, client_options

log = logging.getLogger(__name__)

EMBEDDED_CLUSTER_ID = "topoplace-embedded"  # how clients recognise the embedded broker


class TopicMissingError(LookupError):
    """A topic is not on the broker (create it first; a restarted in-memory broker comes back empty)."""


async def cluster_id(bootstrap: str, *, timeout_ms: int = 10000, security: KafkaSecurity | None = None) -> str | None:
    """The cluster id the broker reports in a metadata response."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms, **client_options(security))
    try:
        await client.bootstrap()
        node = client.get_random_node()
        response = await client.send(node, MetadataRequest([]))
        value = response.to_object().get("cluster_id")
        return str(value) if value is not None else None
    finally:
        await client.close()


_embedded: dict[str, bool] = {}


async def is_embedded(bootstrap: str, security: KafkaSecurity | None = None) -> bool:
    """Whether `bootstrap` is an embedded Tansu broker (cached per address)."""
    known = _embedded.get(bootstrap)
    if known is None:
        known = _embedded[bootstrap] = await cluster_id(bootstrap, security=security) == EMBEDDED_CLUSTER_ID
    return known


# --- Tansu's consumer-group quirks ----------------------------------------------------------

KAFKA_SESSION_TIMEOUT_MS = 10_000  # the client default; Kafka refuses less than 6 s unless configured
EMBEDDED_SESSION_TIMEOUT_MS = 2_000


async def group_session_timeout_ms(bootstrap: str, security: KafkaSecurity | None = None) -> int:
    """The consumer-group session timeout for this broker.

    Tansu holds a JoinGroup for about half the session timeout (measured: 10 s
    -> 5 s, 6 s -> 3 s, 2 s -> 1 s), so the embedded broker gets a short one;
    a real Kafka keeps the client default.
    """
    return EMBEDDED_SESSION_TIMEOUT_MS if await is_embedded(bootstrap, security) else KAFKA_SESSION_TIMEOUT_MS


async def leave_group(bootstrap: str, group_id: str, member_id: str, security: KafkaSecurity | None = None) -> None:
    """Best-effort LeaveGroup for a member of generation 0, which aiokafka does not send.

    Only Tansu has a generation 0, and it is a single node: any node coordinates.
    """
    client = AIOKafkaClient(bootstrap_servers=bootstrap, **client_options(security))
    try:
        await client.bootstrap()
        await client.send(client.get_random_node(), LeaveGroupRequest(group_id, member_id))
    except (KafkaError, OSError) as exc:
        log.info("group.leave_failed", extra={"fields": {"group": group_id, "error": str(exc)}})
    finally:
        await client.close()
