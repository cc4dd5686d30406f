"""One resource type the test API serves: its names, group and versions, and its place in the URL space."""

from __future__ import annotations

import msgspec


class ResourceType(msgspec.Struct, frozen=True, kw_only=True):
    plural: str
    kind: str
    group: str  # "" = the core group
    version: str
    namespaced: bool
    has_status: bool  # a /status subresource: the main resource's writes keep the old status
    field_labels: frozenset[str]  # what fieldSelector may name, as the real server allows
    custom: bool = False  # a CRD: no strategic merge patch, like the real server
    # more versions served from the same objects (a CRD with several served versions of one schema)
    other_versions: tuple[str, ...] = ()
    # what discovery tells clients: kubectl resolves `po` and `all` with these, as on a real cluster
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def base_path(self) -> str:
        return self.base_path_of(self.version)

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.other_versions)

    @property
    def qualified_kind(self) -> str:
        """How the real server names the kind in messages: `ResourceClaim.resource.k8s.io`, `Pod`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def api_version_of(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def base_path_of(self, version: str) -> str:
        return f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"

    @property
    def key(self) -> str:
        """Unique name of the resource type, e.g. `pods` or `hypernodes.topology.volcano.sh`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural
