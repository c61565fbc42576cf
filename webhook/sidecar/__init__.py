"""The per-node sidecar: node-side preemption for pods the kubelet rejected.

Pure decisions live in `lifecycle` (pod states), `trigger` (which rejections to act on), `record` (the
durable preemption state on the rejected pod), `ratelimit`, `actions` (settings and hints in, actions
out), `decide` (view in, actions out: which rejected pods, in which order) and `victims` (room for one
rejected pod: its view, the module's answer, the evictions). `agent` is
the loop that keeps the node view and asks `decide`; `execute` carries the actions out through the API;
`memory` holds the hints remembered between passes; `metrics` and `observe` export them.
"""
