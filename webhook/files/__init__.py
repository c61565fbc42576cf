"""Files in and out: manifests (YAML/JSON), PriorityClass files, certificates."""
