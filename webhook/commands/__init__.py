"""Subcommands. Each module has `register(subparsers)`, which sets `run(args) -> exit code`."""
