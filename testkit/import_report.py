"""The modules a process loaded, read from Python's `-X importtime` report (PYTHONPROFILEIMPORTTIME=1).

Forked processes inherit the setting and write to the same stderr, so a report may hold several headers.
"""

from __future__ import annotations

HEADER = "imported package"


def modules_in(report: str) -> set[str]:
    """Every module named in the report's `import time: self | cumulative | name` lines."""
    names = (
        line.rsplit("|", 1)[1].strip() for line in report.splitlines() if line.startswith("import time:")
    )
    return {name for name in names if name != HEADER}
