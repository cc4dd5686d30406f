"""kube-scheduler's node filters as pure rules: which nodes a pod may run on, and why not.

The binder imports them from here too (its own re-check of a placement): one implementation.

taints.py    toleration matching (TaintToleration, NodeUnschedulable)
affinity.py  nodeSelector and node affinity (NodeAffinity)
ports.py     host ports a pod's containers take against those its node's pods hold (NodePorts)
resources.py requests against allocatable (NodeResourcesFit) and a pod's effective request
filters.py   the filter chain in kube-scheduler's default order, compiled once per pod
messages.py  the "0/N nodes are available: ..." message
default_selector.py  kube-scheduler's DefaultSelector (Services and controllers a pod belongs to)
"""
