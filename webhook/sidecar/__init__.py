"""The per-node sidecar: node-side preemption for pods the kubelet rejected.

Pure decisions live in `lifecycle`, `trigger`, `record`, `ratelimit` and `decide`; `agent` is the thin loop
that feeds them the node view and carries out the actions; `observe` serves health and metrics.
"""
