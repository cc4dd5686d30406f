"""A cluster given as Kubernetes objects, as the engine reads it (`topoplace engine place --cluster`).

files.py    objects from JSON / multi-document YAML files, Lists flattened, each with where it was found
nodes.py    Node objects and their running pods -> NodeState (devices from a snapshot, or counted)
pods.py     Pod objects -> the pod to place (PodRequest), or what a running pod holds
priority.py PriorityClasses, PodDisruptionBudgets, a Pod's priority -> what preemption reads
cluster.py  the whole cluster -> Snapshot; the pods to place
"""
