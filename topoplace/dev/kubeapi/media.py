"""Content negotiation as the real server does it: the Accept header's media types, with their
`as`/`v`/`g` parameters, choose between a plain JSON answer and a variant of it (a Table, aggregated
discovery). Anything else, protobuf included, is not offered here."""

from __future__ import annotations

import msgspec

JSON = "application/json"
PLAIN = ("", "", "")  # no variant: the object or list itself


class MediaType(msgspec.Struct, frozen=True):
    """One entry of an Accept header; `variant` is its (group, version, as) triple, empty for plain JSON."""

    mime: str
    variant: tuple[str, str, str] = ("", "", "")
    quality: float = 1.0

    @property
    def plain(self) -> bool:
        return self.variant == ("", "", "")


TABLE_V1 = ("meta.k8s.io", "v1", "Table")
TABLE_V1BETA1 = ("meta.k8s.io", "v1beta1", "Table")
DISCOVERY_V2 = ("apidiscovery.k8s.io", "v2", "APIGroupDiscoveryList")
DISCOVERY_V2BETA1 = ("apidiscovery.k8s.io", "v2beta1", "APIGroupDiscoveryList")


def parse_accept(header: str) -> list[MediaType]:
    """The header's media types, best first (by `q`, then by order, as the real server ranks them)."""
    found: list[MediaType] = []
    for entry in header.split(","):
        parts = [p.strip() for p in entry.split(";")]
        if not parts[0]:
            continue
        params: dict[str, str] = {}
        for part in parts[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            quality = float(params.get("q", "1"))
        except ValueError:
            quality = 0.0  # an unreadable weight: offered last, never chosen over a readable one
        variant = (params.get("g", ""), params.get("v", ""), params.get("as", ""))
        found.append(MediaType(parts[0].lower(), variant, quality))
    return sorted(found, key=lambda m: -m.quality)  # a stable sort keeps the header's order among equals


def choose(header: str, variants: tuple[tuple[str, str, str], ...]) -> tuple[str, str, str] | None:
    """The first acceptable answer: one of `variants`, or ("", "", "") for plain JSON; None if none.

    No Accept header (or `*/*`) means plain JSON, as for any client that asks for nothing special.
    """
    if not header.strip():
        return ("", "", "")
    for media in parse_accept(header):
        if media.quality <= 0 or media.mime not in (JSON, "application/*", "*/*"):
            continue
        if media.plain:
            return ("", "", "")
        if media.variant in variants:
            return media.variant
    return None


def content_type(variant: tuple[str, str, str]) -> str:
    """The Content-Type the real server names a variant with (kubectl reads the variant back from it)."""
    if variant == ("", "", ""):
        return JSON
    group, version, as_kind = variant
    return f"{JSON};g={group};v={version};as={as_kind}"
