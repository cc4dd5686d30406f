"""kube-scheduler's node filters as pure rules: which nodes a pod may run on, and why not.

objects.py   the Pod/Node fields the rules read (taints, tolerations, node affinity), in Kubernetes' JSON shape
taints.py    toleration matching (TaintToleration, NodeUnschedulable)
affinity.py  nodeSelector and node affinity (NodeAffinity)
resources.py requests against allocatable (NodeResourcesFit) and a pod's effective request
filters.py   the filter chain in kube-scheduler's default order, compiled once per pod
messages.py  the "0/N nodes are available: ..." message
"""
