"""The dev harness's subcommands: `topoplace broker`, `kube-api serve`, `demo`, `workload`."""
