"""Cluster I/O: client configuration, list/watch reflectors and the caches they feed."""


class ConfigError(ValueError):
    """A cluster client configuration that cannot be used; the message is one line naming its source.

    Defined here, not in `config`, so that the command line can catch it without loading the client.
    """
