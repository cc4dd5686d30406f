"""AWS Neuron devices (Trainium, Inferentia): the plugin (plugin.py), its request (request.py), what the node
policies read of a node (measures.py) and the instance families' rules (rules.py)."""

from engine.node.vendors.neuron.plugin import NeuronPlugin
from engine.node.vendors.neuron.plugin import NeuronPlugin as Plugin  # what the registry reads
from engine.node.vendors.neuron.request import NEURON, NEURONCORE, NOUSE_UUID, USE_UUID

__all__ = ["NEURON", "NEURONCORE", "NOUSE_UUID", "USE_UUID", "NeuronPlugin", "Plugin"]
