"""Kafka TLS / SASL settings: read from the environment, handed to every aiokafka client, never printed."""

from __future__ import annotations

import io
import json
import logging
import os
import ssl
import subprocess
import sys
from typing import Any

import certifi
import pytest

from schemas import topics
from topoplace.config import ConfigError, Settings
from topoplace.kafka import admin as topic_admin
from topoplace.kafka import broker_kind
from topoplace.kafka.consumer import EventConsumer
from topoplace.kafka.follower import TopicFollower
from topoplace.kafka.producer import EventProducer
from topoplace.kafka.security import KafkaSecurity, Secret, client_options
from topoplace.logs import configure_logging

PASSWORD = "correct-horse-battery-staple"
CA = certifi.where()


def sasl_env(mechanism: str = "SCRAM-SHA-512", protocol: str = "SASL_SSL") -> dict[str, str]:
    env = {
        "KAFKA_SECURITY_PROTOCOL": protocol,
        "KAFKA_SASL_MECHANISM": mechanism,
        "KAFKA_SASL_USERNAME": "placer",
        "KAFKA_SASL_PASSWORD": PASSWORD,
    }
    if protocol == "SASL_SSL":
        env["KAFKA_SSL_CAFILE"] = CA
    return env


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-256"])
def test_sasl_settings_are_read(mechanism: str) -> None:
    security = Settings.from_env(sasl_env(mechanism)).kafka_security
    assert security == KafkaSecurity(
        protocol="SASL_SSL", sasl_mechanism=mechanism.upper(), sasl_username="placer",
        sasl_password=Secret(PASSWORD), ssl_cafile=CA,
    )  # fmt: skip


def test_plaintext_is_the_default_and_passes_nothing() -> None:
    security = Settings.from_env({}).kafka_security
    assert security.protocol == "PLAINTEXT"
    assert client_options(security) == {}


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL"),
        ({**sasl_env(), "KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM"),
        ({k: v for k, v in sasl_env().items() if k != "KAFKA_SASL_MECHANISM"}, "KAFKA_SASL_MECHANISM"),
        ({k: v for k, v in sasl_env().items() if k != "KAFKA_SASL_USERNAME"}, "KAFKA_SASL_USERNAME"),
        ({k: v for k, v in sasl_env().items() if k != "KAFKA_SASL_PASSWORD"}, "KAFKA_SASL_PASSWORD"),
        ({"KAFKA_SASL_USERNAME": "placer"}, "KAFKA_SASL_USERNAME"),  # SASL needs a SASL protocol
        ({"KAFKA_SSL_CAFILE": CA}, "KAFKA_SSL_CAFILE"),  # TLS files need a TLS protocol
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"}, "KAFKA_SSL_CAFILE"),
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CERTFILE": CA}, "KAFKA_SSL_KEYFILE"),
    ],
)
def test_bad_security_settings_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    assert caught.value.variable == variable
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_over_plaintext_is_refused_at_start_unless_explicitly_allowed(mechanism: str) -> None:
    env = sasl_env(mechanism, protocol="SASL_PLAINTEXT")
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    assert caught.value.variable == "KAFKA_SECURITY_PROTOCOL"
    assert "SASL_SSL" in caught.value.reason and "TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL=1" in caught.value.reason
    assert PASSWORD not in str(caught.value)
    for no in ("0", "false"):
        with pytest.raises(ConfigError):
            Settings.from_env({**env, "TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL": no})
    allowed = Settings.from_env({**env, "TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL": "1"}).kafka_security
    assert allowed.protocol == "SASL_PLAINTEXT" and allowed.allow_plaintext_sasl
    assert client_options(allowed)["security_protocol"] == "SASL_PLAINTEXT"


def test_the_plaintext_sasl_switch_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL": "sometimes"})
    assert caught.value.variable == "TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL"


def test_a_service_with_sasl_over_plaintext_exits_2_naming_the_variable() -> None:
    env = {**os.environ, **sasl_env("PLAIN", protocol="SASL_PLAINTEXT"), "KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    env.pop("TOPOPLACE_KAFKA_ALLOW_PLAINTEXT_SASL", None)
    result = subprocess.run(
        [sys.executable, "-m", "topoplace.cli", "placer"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "KAFKA_SECURITY_PROTOCOL" in result.stderr and "Traceback" not in result.stderr
    assert PASSWORD not in result.stderr + result.stdout


def assert_secured(client: Any) -> None:
    """aiokafka's client config, as the producer / consumer / admin client hands it down."""
    assert client._security_protocol == "SASL_SSL"
    assert client._sasl_mechanism == "SCRAM-SHA-512"
    assert client._sasl_plain_username == "placer"
    assert client._sasl_plain_password == PASSWORD
    assert isinstance(client._ssl_context, ssl.SSLContext)


async def test_every_client_gets_the_security_settings() -> None:
    security = Settings.from_env(sasl_env()).kafka_security
    producer = EventProducer("kafka:9093", service="test", security=security).client()
    consumer = EventConsumer(
        "kafka:9093", [topics.PODS_PENDING], group_id="g", service="test",
        producer=EventProducer("kafka:9093", service="test"), security=security,
    ).client()  # fmt: skip
    follower = TopicFollower("kafka:9093", [topics.TOPOLOGY_NODES], service="test", security=security).client()
    try:
        assert_secured(producer.client)
        assert_secured(consumer._client)
        assert_secured(follower._client)
    finally:
        await producer.stop()
        await consumer.stop()
        await follower.stop()


class Refused(Exception):
    pass


async def test_the_admin_and_metadata_clients_get_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    security = Settings.from_env(sasl_env()).kafka_security
    made: list[dict[str, Any]] = []

    def recording(**kwargs: Any) -> Any:
        made.append(kwargs)
        raise Refused  # constructed: that is all this test needs

    monkeypatch.setattr(topic_admin, "AIOKafkaAdminClient", recording)
    monkeypatch.setattr(broker_kind, "AIOKafkaClient", recording)
    with pytest.raises(Refused):
        await topic_admin.ensure_topics("kafka:9093", security=security)
    with pytest.raises(Refused):
        await broker_kind.cluster_id("kafka:9093", security=security)
    assert len(made) == 2
    for kwargs in made:
        assert kwargs["security_protocol"] == "SASL_SSL" and kwargs["sasl_plain_password"] == PASSWORD


def test_the_password_is_in_no_repr_and_no_log_line() -> None:
    settings = Settings.from_env({**sasl_env(), "KAFKA_BOOTSTRAP": "kafka:9093"})
    assert PASSWORD not in repr(settings) and PASSWORD not in str(settings)
    assert PASSWORD not in repr(settings.kafka_security)
    stream = io.StringIO()
    configure_logging("test-secrets", "INFO", stream=stream)
    logging.getLogger("test.secrets").info(
        "settings", extra={"fields": {"settings": settings, "security": settings.kafka_security}}
    )
    line = stream.getvalue()
    assert json.loads(line.splitlines()[-1])["event"] == "settings"
    assert PASSWORD not in line
    assert "placer" in line  # the rest of the settings is there
