"""AWS Neuron devices (Trainium, Inferentia): the plugin (plugin.py) and the instance families' rules (rules.py)."""

from engine.node.vendors.neuron.plugin import NEURON, NEURONCORE, NOUSE_UUID, USE_UUID, NeuronPlugin
from engine.node.vendors.neuron.plugin import NeuronPlugin as Plugin  # what the registry reads

__all__ = ["NEURON", "NEURONCORE", "NOUSE_UUID", "USE_UUID", "NeuronPlugin", "Plugin"]
