"""MetaX GPUs: the plugin (plugin.py), its request (request.py), QoS and application classes (qos.py),
MetaLink zones (zones.py) and the whole-card node preference from node annotations (gpu.py)."""

from engine.node.vendors.metax.plugin import MetaxPlugin
from engine.node.vendors.metax.plugin import MetaxPlugin as Plugin  # what the registry reads

__all__ = ["MetaxPlugin", "Plugin"]
