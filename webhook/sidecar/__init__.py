"""The per-node sidecar: node-side preemption for pods the kubelet rejected.

Pure decisions live in `lifecycle` (pod states), `trigger` (which rejections to act on), `record` (the
durable preemption state on the rejected pod), `ratelimit` and `decide` (view in, actions out). `agent` is
the thin loop that keeps the node view and carries the actions out; `metrics` and `observe` export them.
"""
