"""Node-side preemption: pure decisions, no I/O.

`resources` (requests, allocatable), `qos`, `predicates` (kubelet admission checks) and `kubelet`
(critical-pod admission with victim selection) model the kubelet; the cluster planner builds on them.
"""
