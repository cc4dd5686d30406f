"""What every event shares: the schema version, the size bounds, the base Struct."""

from __future__ import annotations

from typing import ClassVar

import msgspec

SCHEMA_VERSION = 1

# The most bytes (as JSON) one event may take; producers refuse a bigger one (topoplace.kafka.wire).
# Kafka refuses a produce request over 1 MiB by default (the producer's max.request.size, the
# broker's message.max.bytes): an event near it fails the whole send, and a batch of several
# fails with it. A node's status, topology or ResourceSlice is a few KiB to a few tens of KiB.
MAX_EVENT_BYTES = 256 * 1024
# One pending pod: after the allow-list of labels and annotations (services/collector/
# watch_pending_fields.py) a real pod is one or two KiB; 64 KiB leaves room for long
# affinities and toleration lists, and no tenant can make one pod's event crowd the topic.
MAX_POD_EVENT_BYTES = 64 * 1024
# A gang carries every pending member (about 0.5-1 KiB each): room for about a thousand,
# still clear of the 1 MiB request limit.
MAX_GANG_EVENT_BYTES = 768 * 1024


class Event(msgspec.Struct, frozen=True, kw_only=True):
    schema_version: int = SCHEMA_VERSION
    max_bytes: ClassVar[int] = MAX_EVENT_BYTES  # not on the wire: the bound of this kind of event
