"""Suite-wide settings."""

from __future__ import annotations

import os

from hypothesis import settings

# In CI the property tests run a fixed sequence of examples, so a run's verdict depends on the code alone;
# on a developer's machine they keep exploring new examples (and keep finding what CI would not).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
