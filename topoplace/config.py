"""Settings of every service, read once from the environment at start."""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec

from topoplace.env_values import ConfigError as ConfigError
from topoplace.env_values import choice as _choice
from topoplace.env_values import flag as _bool
from topoplace.env_values import name as _name
from topoplace.env_values import name_or_none as _name_or_none
from topoplace.env_values import optional as _optional
from topoplace.env_values import port as _port
from topoplace.env_values import positive_int as _positive_int
from topoplace.env_values import positive_seconds as _positive_seconds
from topoplace.env_values import url as _url
from topoplace.feature_gates import known_gates
from topoplace.kafka.security import SECURITY_ENV_VARS, KafkaSecurity, Secret, SecurityConfigError, security_from_env
from topoplace.lease_timings import LEADER_LEASE as LEADER_LEASE
from topoplace.lease_timings import LEADER_RENEW_DEADLINE as LEADER_RENEW_DEADLINE
from topoplace.lease_timings import LEADER_RETRY as LEADER_RETRY
from topoplace.lease_timings import LEADER_STOP_GRACE as LEADER_STOP_GRACE
from topoplace.lease_timings import LEADER_WATCHDOG as LEADER_WATCHDOG
from topoplace.lease_timings import LeaseTimingError as LeaseTimingError
from topoplace.lease_timings import LeaseTimings as LeaseTimings

KAFKA_BOOTSTRAP = "KAFKA_BOOTSTRAP"
KAFKA_IDEMPOTENCE = "TOPOPLACE_KAFKA_IDEMPOTENCE"
EMBEDDED_BROKER = "TOPOPLACE_EMBEDDED_BROKER"
TOPOLOGY_REPUBLISH = "TOPOPLACE_TOPOLOGY_REPUBLISH_SECONDS"
VOLUME_BIND_TIMEOUT = "TOPOPLACE_VOLUME_BIND_TIMEOUT_SECONDS"
NOMINATION_SECONDS = "TOPOPLACE_NOMINATION_SECONDS"
KUBE_API_URL = "TOPOPLACE_KUBE_API_URL"
KUBECONFIG = "KUBECONFIG"
SCHEDULER_NAME = "TOPOPLACE_SCHEDULER_NAME"
HEALTH_PORT = "TOPOPLACE_HEALTH_PORT"
TRACES_FILE = "TOPOPLACE_TRACES_FILE"
LOG_LEVEL = "TOPOPLACE_LOG_LEVEL"
GROUP_PREFIX = "TOPOPLACE_GROUP_PREFIX"
OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
NODE_POLICY = "TOPOPLACE_NODE_POLICY"
ENFORCEMENT = "TOPOPLACE_ENFORCEMENT"
LEADER_ELECTION = "TOPOPLACE_LEADER_ELECTION"
LEADER_IDENTITY = "TOPOPLACE_LEADER_IDENTITY"
LEADER_NAMESPACE = "TOPOPLACE_LEADER_NAMESPACE"
TOPIC_REPLICATION_FACTOR = "TOPOPLACE_TOPIC_REPLICATION_FACTOR"
TOPIC_MIN_INSYNC_REPLICAS = "TOPOPLACE_TOPIC_MIN_INSYNC_REPLICAS"
# The key that seals pods' devices (schemas/seal.py): a file (a mounted Secret), or the key itself (dev runs).
DECISION_KEY_FILE = "TOPOPLACE_DECISION_KEY_FILE"
DECISION_KEY = "TOPOPLACE_DECISION_KEY"
MIN_DECISION_KEY_CHARS = 16
FEATURE_GATES = "TOPOPLACE_FEATURE_GATES"  # the placer's DRA and Kueue gates (topoplace/feature_gates.py)

# How nodes enforce a device choice when neither their label nor HAMi's registration says
# (schemas/enforcement.py; not imported here, so building the CLI parser stays light).
ENFORCEMENT_CHOICES: tuple[str, ...] = ("auto", "dra", "hami", "device-plugin")

# Node policies a cluster may choose for pods that do not name one (hami.io/node-scheduler-policy).
NODE_POLICIES: tuple[str, ...] = ("binpack", "spread", "fragmentation")

# Every variable the configuration reads, for `--help` texts and docs.
ENV_VARS: tuple[str, ...] = (
    KAFKA_BOOTSTRAP,
    KAFKA_IDEMPOTENCE,
    EMBEDDED_BROKER,
    TOPOLOGY_REPUBLISH,
    VOLUME_BIND_TIMEOUT,
    NOMINATION_SECONDS,
    KUBE_API_URL,
    KUBECONFIG,
    SCHEDULER_NAME,
    HEALTH_PORT,
    TRACES_FILE,
    LOG_LEVEL,
    GROUP_PREFIX,
    OTLP_ENDPOINT,
    OTLP_TRACES_ENDPOINT,
    OTEL_RESOURCE_ATTRIBUTES,
    NODE_POLICY,
    ENFORCEMENT,
    LEADER_ELECTION,
    LEADER_IDENTITY,
    LEADER_NAMESPACE,
    LEADER_LEASE,
    LEADER_RENEW_DEADLINE,
    LEADER_RETRY,
    LEADER_WATCHDOG,
    LEADER_STOP_GRACE,
    TOPIC_REPLICATION_FACTOR,
    TOPIC_MIN_INSYNC_REPLICAS,
    DECISION_KEY_FILE,
    DECISION_KEY,
    FEATURE_GATES,
    *SECURITY_ENV_VARS,
)

LOG_LEVELS: tuple[str, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class TopicDurability(msgspec.Struct, frozen=True, kw_only=True):
    """How many copies of each topic the brokers keep; None: derived from the cluster (topoplace/kafka/admin.py)."""

    replication_factor: int | None = None  # None: min(3, the brokers the cluster reports)
    min_insync_replicas: int | None = None  # None: min(2, the replication factor)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """What a service needs to know about its surroundings.

    Built by `Settings.from_env`; tests construct it directly. Defaults suit the
    embedded broker (no idempotent producer: Tansu cannot serve one).
    """

    kafka_bootstrap: str | None = None  # None: the embedded broker when embedded_broker, else an error
    kafka_idempotence: bool = False
    embedded_broker: bool = False  # run a private in-memory broker when no kafka_bootstrap is given
    kafka_security: KafkaSecurity = KafkaSecurity()  # TLS / SASL of every Kafka client; its password is masked
    topic_durability: TopicDurability = TopicDurability()  # replicas of the topics a service creates
    topology_republish_seconds: float = 60.0  # the node agent sends an unchanged topology again this often
    nomination_seconds: float = 300.0  # how long a preemption's freed room is held for the nominated pod
    kube_api_url: str | None = None
    kubeconfig: str | None = None
    scheduler_name: str = "topoplace"
    health_port: int = 0  # 0: pick a free port
    traces_file: str | None = None
    log_level: str = "INFO"
    consumer_group_prefix: str = "topoplace"
    otlp_endpoint: str | None = None  # base URL; traces go to <base>/v1/traces
    otlp_traces_endpoint: str | None = None  # full URL, wins over otlp_endpoint
    resource_attributes: dict[str, str] = {}
    node_policy: str | None = None  # the placer's node policy for pods that name none (engine default: binpack)
    # How nodes without a topoplace.io/enforcement label and without HAMi enforce devices (None: auto)
    enforcement: str | None = None  # one of ENFORCEMENT_CHOICES but auto
    # The binder's replicas elect one to bind (a coordination.k8s.io Lease `<scheduler_name>-binder`).
    leader_election: bool = True
    leader_identity: str | None = None  # None: this host's name and process id
    leader_namespace: str = "default"  # where the Lease lives
    decision_key: Secret | None = None  # the seal's key; the binder and the cluster watcher need it
    lease_timings: LeaseTimings = LeaseTimings()
    # How long the binder waits for a pod's claims to be bound before giving the pod back (kube's bindTimeout).
    volume_bind_timeout_seconds: float = 600.0
    feature_gates: dict[str, bool] = {}  # the placer's, by upstream name; the others keep their defaults

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        bootstrap = _optional(environ, KAFKA_BOOTSTRAP)
        if bootstrap is not None:
            _check_bootstrap(bootstrap)
        # An external Kafka gets exactly-once-per-partition produces by default;
        # the embedded Tansu broker rejects InitProducerId, so it is off there.
        idempotence = _bool(environ, KAFKA_IDEMPOTENCE, default=bootstrap is not None)
        kube_api_url = _url(environ, KUBE_API_URL)
        otlp_endpoint = _url(environ, OTLP_ENDPOINT)
        otlp_traces_endpoint = _url(environ, OTLP_TRACES_ENDPOINT)
        try:
            security = security_from_env(environ)
        except SecurityConfigError as exc:
            raise ConfigError(exc.variable, exc.reason) from None
        return cls(
            kafka_security=security,
            topic_durability=_topic_durability(environ),
            kafka_bootstrap=bootstrap,
            kafka_idempotence=idempotence,
            embedded_broker=_bool(environ, EMBEDDED_BROKER, default=False),
            topology_republish_seconds=_positive_seconds(environ, TOPOLOGY_REPUBLISH, default=60.0),
            nomination_seconds=_positive_seconds(environ, NOMINATION_SECONDS, default=300.0),
            kube_api_url=kube_api_url,
            kubeconfig=_optional(environ, KUBECONFIG),
            scheduler_name=_name(environ, SCHEDULER_NAME, "topoplace"),
            health_port=_port(environ, HEALTH_PORT),
            traces_file=_optional(environ, TRACES_FILE),
            log_level=_log_level(environ),
            consumer_group_prefix=_name(environ, GROUP_PREFIX, "topoplace"),
            otlp_endpoint=otlp_endpoint,
            otlp_traces_endpoint=otlp_traces_endpoint,
            resource_attributes=_resource_attributes(environ),
            node_policy=_choice(environ, NODE_POLICY, NODE_POLICIES),
            enforcement=_enforcement(environ),
            leader_election=_bool(environ, LEADER_ELECTION, default=True),
            leader_identity=_name_or_none(environ, LEADER_IDENTITY),
            leader_namespace=_name(environ, LEADER_NAMESPACE, "default"),
            decision_key=_decision_key(environ),
            lease_timings=_lease_timings(environ),
            volume_bind_timeout_seconds=_positive_seconds(environ, VOLUME_BIND_TIMEOUT, default=600.0),
            feature_gates=_feature_gates(environ),
        )

    def require_decision_key(self) -> bytes:
        """The seal's key, for a service that seals or reads pods' devices; a ConfigError without one."""
        if self.decision_key is None:
            raise ConfigError(
                DECISION_KEY_FILE,
                "is required: the file with the key that seals pods' devices (a Secret shared by the binder "
                f"and the cluster watcher; {DECISION_KEY} for a development run)",
            )
        return self.decision_key.reveal().encode()

    def group_id(self, service: str) -> str:
        """The consumer group of one service, e.g. "topoplace-placer"."""
        return f"{self.consumer_group_prefix}-{service.removeprefix('topoplace-')}"


def _enforcement(environ: Mapping[str, str]) -> str | None:
    value = _choice(environ, ENFORCEMENT, ENFORCEMENT_CHOICES)
    return None if value == "auto" else value


def _lease_timings(environ: Mapping[str, str]) -> LeaseTimings:
    default = LeaseTimings()
    try:
        return LeaseTimings(
            lease_seconds=_positive_int(environ, LEADER_LEASE) or default.lease_seconds,
            renew_deadline_seconds=_positive_int(environ, LEADER_RENEW_DEADLINE) or default.renew_deadline_seconds,
            retry_seconds=_positive_int(environ, LEADER_RETRY) or default.retry_seconds,
            watchdog_seconds=_positive_seconds(environ, LEADER_WATCHDOG, default=default.watchdog_seconds),
            stop_grace_seconds=_positive_seconds(environ, LEADER_STOP_GRACE, default=default.stop_grace_seconds),
        )
    except LeaseTimingError as exc:
        raise ConfigError(", ".join(exc.variables), exc.reason) from None


def _topic_durability(environ: Mapping[str, str]) -> TopicDurability:
    replication_factor = _positive_int(environ, TOPIC_REPLICATION_FACTOR)
    min_insync = _positive_int(environ, TOPIC_MIN_INSYNC_REPLICAS)
    if replication_factor is not None and min_insync is not None and min_insync > replication_factor:
        raise ConfigError(
            TOPIC_MIN_INSYNC_REPLICAS,
            f"must not exceed {TOPIC_REPLICATION_FACTOR} ({replication_factor}), got {min_insync}: "
            "no write could ever be acknowledged",
        )
    return TopicDurability(replication_factor=replication_factor, min_insync_replicas=min_insync)


def _log_level(environ: Mapping[str, str]) -> str:
    value = (_optional(environ, LOG_LEVEL) or "INFO").upper()
    if value == "WARN":
        value = "WARNING"
    if value not in LOG_LEVELS:
        raise ConfigError(LOG_LEVEL, f"must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return value


def _decision_key(environ: Mapping[str, str]) -> Secret | None:
    path = _optional(environ, DECISION_KEY_FILE)
    if path is not None:
        variable = DECISION_KEY_FILE
        try:
            with open(path, encoding="utf-8") as file:
                key = file.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = f"{path} is not a readable text file ({exc.__class__.__name__})"
            raise ConfigError(DECISION_KEY_FILE, reason) from None
    else:
        variable = DECISION_KEY
        key = environ.get(DECISION_KEY, "").strip()
        if not key:
            return None
    if len(key) < MIN_DECISION_KEY_CHARS:
        raise ConfigError(variable, f"the key must have at least {MIN_DECISION_KEY_CHARS} characters, got {len(key)}")
    return Secret(key)


def _feature_gates(environ: Mapping[str, str]) -> dict[str, bool]:
    try:
        return known_gates(_optional(environ, FEATURE_GATES))
    except ValueError as exc:
        raise ConfigError(FEATURE_GATES, str(exc)) from None


def _check_bootstrap(bootstrap: str) -> None:
    for server in bootstrap.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(KAFKA_BOOTSTRAP, f"must be host:port[,host:port...], got {server.strip()!r}")


def _resource_attributes(environ: Mapping[str, str]) -> dict[str, str]:
    """OTEL_RESOURCE_ATTRIBUTES as the OpenTelemetry spec writes it: k1=v1,k2=v2."""
    value = _optional(environ, OTEL_RESOURCE_ATTRIBUTES)
    if value is None:
        return {}
    attributes: dict[str, str] = {}
    for pair in value.split(","):
        key, sep, val = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(OTEL_RESOURCE_ATTRIBUTES, f"expected key=value pairs, got {pair!r}")
        attributes[key.strip()] = val.strip()
    return attributes
