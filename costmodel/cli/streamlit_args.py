"""The `dashboard` launcher's pass-through options, checked before Streamlit starts.

`argmax-tp dashboard --server.port abc` used to reach `streamlit run`, which printed its own usage block and no
`error:` line. `check_streamlit_args` refuses, with one `InputError` line, what can be checked without starting a
server: an option `streamlit run` does not have (Streamlit's config options, `streamlit.config`), an option with no
value, a value of the wrong type (ports 1..65535, booleans as click reads them, integers, numbers), an option
Streamlit only takes from its config file (`sensitive`), and a stray argument (the dashboard takes none).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..io.errors import InputError

PORT_OPTIONS = ("server.port", "browser.serverPort")
MAX_PORT = 65535
BOOL_WORDS = ("1", "true", "t", "yes", "y", "on", "0", "false", "f", "no", "n", "off")  # click.BOOL's spellings
HINT = "(`streamlit run --help` lists them)"


def streamlit_options() -> dict[str, Any]:
    """Streamlit's config options by key ("server.port" -> ConfigOption); {} where its config cannot be read
    (then only the ports and the option form are checked)."""
    try:
        from streamlit import config

        return dict(config.get_config_options())
    except Exception:  # noqa: BLE001 - an unreadable Streamlit config leaves the checks to Streamlit
        return {}


def _value_problem(key: str, kind: Any, value: str) -> str | None:
    """Why `value` cannot be option `key` of type `kind` (None when it can)."""
    text = value.strip()
    if key in PORT_OPTIONS:
        return None if text.isdigit() and 1 <= int(text) <= MAX_PORT else \
            f"is not a port number (an integer in 1..{MAX_PORT})"
    if kind is bool:
        return None if text.lower() in BOOL_WORDS else "is not true or false"
    try:
        if kind is int:
            int(text)
        elif kind is float and not math.isfinite(float(text)):
            return "is not a finite number"
    except ValueError:
        return "is not an integer" if kind is int else "is not a number"
    return None


def check_streamlit_args(argv: Sequence[str]) -> None:
    """Refuse the first pass-through argument Streamlit would refuse (module doc); one-line InputError."""
    options = streamlit_options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            raise InputError(f"dashboard: unexpected argument {arg!r} (options go to `streamlit run`, "
                             "e.g. --server.port 8600)")
        name, eq, value = arg.partition("=")
        key = name[2:] if name.startswith("--") else ""
        if "." not in key or (options and key not in options):
            raise InputError(f"dashboard: {name} is not a Streamlit option {HINT}")
        if options and getattr(options[key], "sensitive", False):
            raise InputError(f"dashboard: {name} is only read from Streamlit's config file or its environment "
                             "variable")
        if not eq:
            if i + 1 == len(argv):
                raise InputError(f"dashboard: {name} needs a value")
            i += 1
            value = argv[i]
        kind = getattr(options.get(key), "type", str)
        problem = _value_problem(key, kind, value)
        if problem:
            raise InputError(f"dashboard: {name} {value!r} {problem}")
        i += 1
