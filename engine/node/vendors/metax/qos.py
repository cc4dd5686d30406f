"""MetaX sGPU sharing rules: QoS pools and online/offline application classes.

From HAMi pkg/device/metax/sdevice.go (checkDeviceQos, checkAppClass,
prioritizeOnlineDevices, scoreOnlineDevices) and protocol.go (names).

- QoS (``metax-tech.com/sgpu-qos-policy``: best-effort | fixed-share |
  burst-share; HAMi's webhook writes best-effort when a non-online pod has
  none): a card in use accepts only pods of the QoS it already runs; an idle
  card accepts any, and so does any card for an exclusive request (vcore 100).
- Application class (``metax-tech.com/sgpu-app-class``: online | offline,
  one card per pod): classed pods and ordinary pods never share a card, and
  an offline pod never joins a card that runs an online pod. Online pods
  skip the QoS and compute checks and hold no compute share.
"""

from __future__ import annotations

from collections.abc import Sequence

QOS_ANNOTATION = "metax-tech.com/sgpu-qos-policy"
APP_CLASS_ANNOTATION = "metax-tech.com/sgpu-app-class"

BEST_EFFORT = "best-effort"
FIXED_SHARE = "fixed-share"
BURST_SHARE = "burst-share"
QOS_POLICIES = (BEST_EFFORT, FIXED_SHARE, BURST_SHARE)
DEFAULT_QOS = BEST_EFFORT

ONLINE = "online"
OFFLINE = "offline"
APP_CLASSES = (ONLINE, OFFLINE)

EXCLUSIVE_CORES = 100


def qos_accepts(card_qos: str, card_in_use: bool, request_qos: str, request_cores: int) -> bool:
    """HAMi's checkDeviceQos: may a pod of ``request_qos`` share this card?"""
    if not card_in_use or request_cores == EXCLUSIVE_CORES:
        return True
    return card_qos == "" or card_qos == request_qos


def card_qos(allocation_qos: Sequence[str]) -> str:
    """The QoS a card runs: that of its first holder with one ("" = none yet).

    ``allocation_qos`` lists the QoS of the card's holders in the order they
    were placed; exclusive and online holders carry "".
    """
    for qos in allocation_qos:
        if qos:
            return qos
    return ""


def app_class_accepts(card_classes: Sequence[str], request_class: str) -> bool:
    """HAMi's checkAppClass over the classes of the pods on the card ("" = ordinary pod)."""
    if not card_classes:
        return True  # an idle card takes any pod
    card_online = ONLINE in card_classes
    card_offline = OFFLINE in card_classes
    card_classed = card_online or card_offline
    request_classed = request_class in APP_CLASSES
    if card_classed != request_classed:
        return False
    # An online pod suspends the offline ones, so sending more offline work there is pointless.
    return not (card_online and request_class == OFFLINE)


def online_preference(card_classes: Sequence[str]) -> tuple[int, int, int]:
    """Sort key for an online pod's candidate cards (lower first), as HAMi's prioritizeOnlineDevices.

    Cards running only offline pods go last (fewest offline pods first among
    them); the others order by fewer online pods, then fewer offline pods.
    """
    online = sum(1 for c in card_classes if c == ONLINE)
    offline = sum(1 for c in card_classes if c == OFFLINE)
    only_offline = online == 0 and offline > 0
    if only_offline:
        return (1, 0, offline)
    return (0, online, offline)


def online_card_score(card_classes: Sequence[str]) -> int:
    """HAMi's scoreOnlineDevices term for one chosen card (higher = better)."""
    online = sum(1 for c in card_classes if c == ONLINE)
    offline = sum(1 for c in card_classes if c == OFFLINE)
    if offline > 0 and online == 0:
        return -100 * offline
    return -20 * online - 2 * offline
