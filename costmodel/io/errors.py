"""One exception type for every user-facing input problem, and the helpers that keep errors to one line.

Messages are a single line that names the bad field or file, so the CLI, the
calibration tools and the dashboard can show them verbatim (no traceback).
`OneLineParser` turns argparse's usage + message + exit into an `InputError`;
`first_line` is the gist of any exception for an `error: ...` line.
"""

from __future__ import annotations

import argparse
import re

FIRST_LINE_LIMIT = 160


class InputError(ValueError):
    """Bad user input: a malformed profile, CSV, flag or impossible scenario."""

    def __init__(self, message: str):
        # one line, and printable: a lone surrogate from a file name or argv becomes "\\ud800"
        text = " ".join(str(message).split()).encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(text)


LAUNCHED_AS: str | None = None  # "argmax-tp <command>" while the argmax-tp launcher runs a tool


class OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose errors raise `InputError` (the CLI prints one line, exit 2) instead of exiting.

    A tool's `prog="python -m calibration.X"` becomes the command the user typed when `argmax-tp` launched it
    (`LAUNCHED_AS`, set by the launcher: runpy replaces sys.argv[0]), so usage lines name what was run."""

    def __init__(self, *args, **kwargs):
        prog = kwargs.get("prog")
        if isinstance(prog, str) and prog.startswith("python -m ") and LAUNCHED_AS:
            kwargs["prog"] = LAUNCHED_AS
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse would print usage + 2 lines and exit 2
        raise InputError(message)


def first_line(exc: BaseException, limit: int = FIRST_LINE_LIMIT) -> str:
    """The gist of an exception: its first non-empty line, without gloo's "[file:line] " prefix and
    "This is typically ..." advice, cut to `limit` characters; the type name when the message is empty."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    line = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0].strip())
    line = line.split(". This is typically")[0] or type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
