"""priority-webhook: out-of-tree Kubernetes pod priority."""

__version__ = "0.1.0"
