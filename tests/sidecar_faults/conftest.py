"""The sidecar test fixtures (a test API server with the eviction subresource, started sidecars)."""

from tests.sidecar.conftest import cluster, sidecar  # noqa: F401  (fixtures, shared as they are)
