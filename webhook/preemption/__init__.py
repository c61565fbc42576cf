"""Preemption, both sides, as pure decisions (no I/O, no client, no threads).

The shared pod model: `resources` (requests, allocatable, quantities), `pods`, `qos`, `predicates`,
`validate`. On it, two sides that never import each other: `node/` is the kubelet's critical-pod
admission and its victim search (`victims`, the sidecar); `cluster/` is kube-scheduler's DefaultPreemption
on a cluster snapshot (`plan`).
"""
