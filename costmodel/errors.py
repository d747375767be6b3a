"""One exception type for every user-facing input problem.

Messages are a single line that names the bad field or file, so the CLI, the
calibration tools and the dashboard can show them verbatim (no traceback).
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a malformed profile, CSV, flag or impossible scenario."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
