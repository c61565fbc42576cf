"""Files in and out: manifests (YAML/JSON), PriorityClass files, certificates."""


class InputError(ValueError):
    """Bad command-line input; the message is one line naming the file and the problem.

    Defined here, not in `documents`, so that a command reading no manifest (the sidecar) can raise it
    without loading the YAML parser.
    """
