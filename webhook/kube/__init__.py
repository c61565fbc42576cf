"""Cluster I/O: client configuration, list/watch reflectors and the caches they feed."""
