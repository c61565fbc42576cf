"""`priority-webhook serve`, with each worker reporting what it holds when sent SIGUSR2 (for memory tests).

    python -m testkit.memprobe serve --bind ... (the CLI's own arguments)

The environment variable MEMPROBE_FILE names a file each worker appends one JSON line to per SIGUSR2 (never
send it to the master: gunicorn's master re-executes itself on SIGUSR2): its pid, the connections it
tracks, how many objects of each connection-related type are alive, the interpreter's allocated blocks and
the memory tracemalloc traces. tracemalloc starts with the worker.

The cyclic garbage collector is off in the workers: what a test then sees is what reference counting alone
frees. A full collection runs at no fixed time, and between two of them whatever only it can free stays
allocated; a connection's state that needs it is the memory that grew under connection churn (issue #30).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import tracemalloc
from collections import Counter
from typing import Any

from webhook.server import worker

FILE_ENV = "MEMPROBE_FILE"
# Types whose live instances are counted: a connection's own state, from the socket up.
COUNTED = {
    ("webhook.server.http1", "Connection"): "connection",
    ("webhook.server.reader", "RequestReader"): "reader",
    ("httptools.parser.parser", "HttpRequestParser"): "parser",
    ("asyncio.sslproto", "SSLProtocol"): "ssl protocol",
    ("webhook.server.tlsproto", "SharedBufferSSLProtocol"): "ssl protocol",
    ("asyncio.sslproto", "_SSLProtocolTransport"): "ssl transport",
    ("asyncio.selector_events", "_SelectorSocketTransport"): "socket transport",
    ("ssl", "SSLObject"): "ssl object",
    ("_ssl", "MemoryBIO"): "memory bio",
    ("socket", "socket"): "socket",
    ("builtins", "frame"): "frame",
    ("builtins", "traceback"): "traceback",
}


def report(owner: Any) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        kind = type(obj)
        name = COUNTED.get((kind.__module__, kind.__qualname__))
        if name is not None:
            counts[name] += 1
    return {
        "pid": os.getpid(),
        "tracked": len(getattr(owner, "connections", ())),
        "objects": dict(counts),
        "blocks": sys.getallocatedblocks(),
        "traced": tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None,
    }


_run = worker.AsyncWorker.run


def _probed_run(self: worker.AsyncWorker) -> None:
    gc.disable()
    tracemalloc.start()
    path = os.environ[FILE_ENV]

    def dump(signum: int, frame: Any) -> None:
        line = json.dumps(report(self))
        with open(path, "a") as out:
            out.write(line + "\n")

    signal.signal(signal.SIGUSR2, dump)
    _run(self)


worker.AsyncWorker.run = _probed_run  # type: ignore[method-assign]

if __name__ == "__main__":
    from webhook.cli import main

    sys.argv[0] = "priority-webhook"
    raise SystemExit(main())
