"""Kubernetes objects as the API server sees them: its defaulting, its name rules, workload templates.

Pure (no I/O, no client): offline commands use it so that a manifest is judged as the API server would
store it, not as it was typed.
"""
