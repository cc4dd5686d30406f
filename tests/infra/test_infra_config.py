"""Settings.from_env: defaults, the external-Kafka switch, and errors that name the variable."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import certifi
import msgspec
import pytest

from topoplace.config import ENV_VARS, ConfigError, Settings


def test_empty_environment_means_embedded_broker_and_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.kafka_bootstrap is None
    assert settings.kafka_idempotence is False  # Tansu cannot serve idempotent producers
    assert settings.scheduler_name == "topoplace"
    assert settings.health_port == 0
    assert settings.log_level == "INFO"
    assert settings.consumer_group_prefix == "topoplace"
    assert settings.kube_api_url is None and settings.kubeconfig is None
    assert settings.traces_file is None


def test_external_kafka_turns_idempotence_on_unless_told_otherwise() -> None:
    assert Settings.from_env({"KAFKA_BOOTSTRAP": "kafka:9092"}).kafka_idempotence is True
    off = Settings.from_env({"KAFKA_BOOTSTRAP": "kafka:9092", "TOPOPLACE_KAFKA_IDEMPOTENCE": "false"})
    assert off.kafka_idempotence is False
    on = Settings.from_env({"TOPOPLACE_KAFKA_IDEMPOTENCE": "yes"})
    assert on.kafka_idempotence is True


def test_values_are_read_and_normalised() -> None:
    settings = Settings.from_env(
        {
            "KAFKA_BOOTSTRAP": "a:9092,b:9093",
            "TOPOPLACE_KUBE_API_URL": "http://127.0.0.1:8001",
            "KUBECONFIG": "kubeconfig.yaml",
            "TOPOPLACE_SCHEDULER_NAME": "gpu-sched",
            "TOPOPLACE_HEALTH_PORT": "8081",
            "TOPOPLACE_TRACES_FILE": "traces.jsonl",
            "TOPOPLACE_LOG_LEVEL": "debug",
            "TOPOPLACE_GROUP_PREFIX": "staging",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test, team = gpu",
        }
    )
    assert settings.kafka_bootstrap == "a:9092,b:9093"
    assert settings.kube_api_url == "http://127.0.0.1:8001"
    assert settings.kubeconfig == "kubeconfig.yaml"
    assert settings.scheduler_name == "gpu-sched"
    assert settings.health_port == 8081
    assert settings.traces_file == "traces.jsonl"
    assert settings.log_level == "DEBUG"
    assert settings.group_id("topoplace-placer") == "staging-placer"
    assert settings.otlp_endpoint == "http://jaeger:4318"
    assert settings.resource_attributes == {"deployment.environment": "test", "team": "gpu"}


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("TOPOPLACE_HEALTH_PORT", "http", "integer"),
        ("TOPOPLACE_HEALTH_PORT", "70000", "65535"),
        ("TOPOPLACE_HEALTH_PORT", "-1", "65535"),
        ("TOPOPLACE_KAFKA_IDEMPOTENCE", "maybe", "true/false"),
        ("TOPOPLACE_LOG_LEVEL", "LOUD", "DEBUG"),
        ("KAFKA_BOOTSTRAP", "localhost", "host:port"),
        ("KAFKA_BOOTSTRAP", "a:9092,b:x", "'b:x'"),
        ("TOPOPLACE_KUBE_API_URL", "127.0.0.1:8001", "http://"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "jaeger:4318", "http://"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "jaeger", "http://"),
        ("OTEL_RESOURCE_ATTRIBUTES", "team", "key=value"),
        ("TOPOPLACE_SCHEDULER_NAME", "my scheduler", "spaces"),
        ("TOPOPLACE_GROUP_PREFIX", "a b", "spaces"),
        ("TOPOPLACE_FEATURE_GATES", "DRAListTypeAttributes=maybe", "Name=true or Name=false"),
        ("TOPOPLACE_FEATURE_GATES", "DRAListTypeAttribute=true", "unknown feature gate(s) DRAListTypeAttribute"),
    ],
)
def test_bad_value_names_the_variable_and_the_reason(variable: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({variable: value})
    assert caught.value.variable == variable
    assert str(caught.value).startswith(f"{variable}: ")
    assert words in caught.value.reason


class _RecordingEnv(Mapping[str, str]):
    """An empty environment that remembers which variables were asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        raise KeyError(key)

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(key)
        return default

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_env_vars_lists_every_variable_read() -> None:
    env = _RecordingEnv()
    Settings.from_env(env)
    assert env.asked, "from_env read nothing"
    assert env.asked <= set(ENV_VARS), f"read but not listed: {env.asked - set(ENV_VARS)}"


_VALID = {
    "KAFKA_BOOTSTRAP": "kafka:9092",
    "TOPOPLACE_KAFKA_IDEMPOTENCE": "on",
    "TOPOPLACE_EMBEDDED_BROKER": "1",
    "TOPOPLACE_TOPOLOGY_REPUBLISH_SECONDS": "15",
    "TOPOPLACE_KUBE_API_URL": "http://api:8080",
    "KUBECONFIG": "kc.yaml",
    "TOPOPLACE_SCHEDULER_NAME": "other",
    "TOPOPLACE_HEALTH_PORT": "9000",
    "TOPOPLACE_TRACES_FILE": "t.jsonl",
    "TOPOPLACE_LOG_LEVEL": "ERROR",
    "TOPOPLACE_GROUP_PREFIX": "p",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://otel:4318/v1/traces",
    "OTEL_RESOURCE_ATTRIBUTES": "a=b",
    "TOPOPLACE_NODE_POLICY": "fragmentation",
    "TOPOPLACE_ENFORCEMENT": "hami",
    "TOPOPLACE_LEADER_ELECTION": "off",
    "TOPOPLACE_LEADER_IDENTITY": "topoplace-binder-7d9f-x2",
    "TOPOPLACE_LEADER_NAMESPACE": "topoplace",
    "TOPOPLACE_LEADER_LEASE_SECONDS": "20",
    "TOPOPLACE_LEADER_RENEW_DEADLINE_SECONDS": "8",
    "TOPOPLACE_LEADER_RETRY_SECONDS": "3",
    "TOPOPLACE_LEADER_WATCHDOG_SECONDS": "0.25",
    "TOPOPLACE_LEADER_STOP_GRACE_SECONDS": "3",
    "TOPOPLACE_VOLUME_BIND_TIMEOUT_SECONDS": "120",
    "TOPOPLACE_NOMINATION_SECONDS": "60",
    "TOPOPLACE_FEATURE_GATES": "DRAListTypeAttributes=true,TASBalancedPlacement=true",
    "KAFKA_SECURITY_PROTOCOL": "SSL",
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
    "KAFKA_SASL_USERNAME": "user",
    "KAFKA_SASL_PASSWORD": "secret",
    "KAFKA_SSL_CAFILE": certifi.where(),
    "KAFKA_SSL_CERTFILE": __file__,  # any readable file: only the path is read here
    "KAFKA_SSL_KEYFILE": __file__,
    "TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL": "1",
    "TOPOPLACE_TOPIC_REPLICATION_FACTOR": "3",
    "TOPOPLACE_TOPIC_MIN_INSYNC_REPLICAS": "2",
    "TOPOPLACE_DECISION_KEY_FILE": __file__,  # any readable text of 16 characters or more
    "TOPOPLACE_DECISION_KEY": "k" * 32,
}
# Variables that mean something only beside others: the test sets those too.
_SASL = {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN",
         "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}  # fmt: skip
_TLS_PAIR = {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERTFILE": certifi.where(),
             "KAFKA_SSL_KEYFILE": certifi.where()}  # fmt: skip
_NEEDS: dict[str, dict[str, str]] = {
    "KAFKA_SASL_MECHANISM": _SASL,
    "KAFKA_SASL_USERNAME": _SASL,
    "KAFKA_SASL_PASSWORD": _SASL,
    "KAFKA_SSL_CAFILE": {"KAFKA_SECURITY_PROTOCOL": "SSL"},
    "KAFKA_SSL_CERTFILE": _TLS_PAIR,
    "KAFKA_SSL_KEYFILE": _TLS_PAIR,
}


@pytest.mark.parametrize("variable", ENV_VARS)
def test_every_listed_variable_has_an_effect(variable: str) -> None:
    beside = _NEEDS.get(variable, {})
    default = msgspec.structs.asdict(Settings.from_env(beside))
    changed = msgspec.structs.asdict(Settings.from_env({**beside, variable: _VALID[variable]}))
    assert changed != default


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf", "nan"])
def test_the_republish_interval_must_be_a_positive_number(value: str) -> None:
    with pytest.raises(ConfigError, match="TOPOPLACE_TOPOLOGY_REPUBLISH_SECONDS"):
        Settings.from_env({"TOPOPLACE_TOPOLOGY_REPUBLISH_SECONDS": value})


def test_blank_values_count_as_unset() -> None:
    assert Settings.from_env({"KAFKA_BOOTSTRAP": "  ", "TOPOPLACE_HEALTH_PORT": ""}) == Settings.from_env({})


def test_the_seals_key_comes_from_its_file_or_the_variable_and_never_shows() -> None:
    assert Settings.from_env({}).decision_key is None
    keyed = Settings.from_env({"TOPOPLACE_DECISION_KEY": "  " + "k" * 32 + "\n"})
    assert keyed.require_decision_key() == b"k" * 32
    assert "kkkk" not in repr(keyed)


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"TOPOPLACE_DECISION_KEY": "short"}, "TOPOPLACE_DECISION_KEY"),
        ({"TOPOPLACE_DECISION_KEY_FILE": "/no/such/key"}, "TOPOPLACE_DECISION_KEY_FILE"),
    ],
)
def test_a_short_or_unreadable_key_is_a_configuration_error(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env(environ)


def test_a_service_that_needs_the_key_names_the_setting_without_it() -> None:
    with pytest.raises(ConfigError, match="TOPOPLACE_DECISION_KEY_FILE: is required"):
        Settings.from_env({}).require_decision_key()


def test_feature_gates_are_read_by_their_upstream_names() -> None:
    settings = Settings.from_env({"TOPOPLACE_FEATURE_GATES": " DRAListTypeAttributes=true, DRAAdminAccess=False ,"})
    assert settings.feature_gates == {"DRAListTypeAttributes": True, "DRAAdminAccess": False}
    assert Settings.from_env({}).feature_gates == {}
