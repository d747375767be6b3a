"""Untrusted text made inert: for Streamlit Markdown (`markdown_text`) and for a terminal (`terminal_text`).

Every string a user controls - a profile's name, title, provenance and citations, an nccl-tests GPU name, a file
name, a query parameter's name or value, an error message quoting any of them - goes through one of these before
it is shown. Standard library only (no pandas), so the CLI and the dashboard can import it at no cost.

* `markdown_text`: the text on one line, every ASCII punctuation character backslash-escaped (CommonMark shows
  an escaped character literally: no emphasis, code, link, image, HTML, entity, list, heading, table, LaTeX or
  `:red[...]` directive can form), and a WORD JOINER (U+2060, invisible, zero width) after every `:` and `@` and
  between `www` and its `.`. The joiner is what stops GFM autolink *literals*: Streamlit's renderer (remark-gfm)
  finds `https://...`, `www.x` and `a@b.c` in the text *after* the escapes are resolved, so `https\\://x` still
  becomes a link; `https:\u2060//x`, `www\u2060.x` and `a@\u2060b.c` match none of its patterns (nor do
  `:emoji:` / `:material/...:` shortcodes or the `mailto:` / `xmpp:` forms). Control characters become spaces.
* `terminal_text`: C0 and C1 control characters (ESC, and with it every ANSI / OSC sequence's introducer; CR,
  BEL, backspace, NEL, ...), DEL and the bidirectional overrides / isolates become spaces, so a name can neither
  move the cursor, recolour, retitle or hyperlink the terminal, nor overwrite a line, nor reorder what is shown.
  One line by default (line breaks too become spaces, runs of spaces collapse); with `keep_newlines` the text
  keeps its "\\n" line breaks (a whole report block) and is otherwise left as it was.
"""

from __future__ import annotations

import re
import string
from typing import Any

WORD_JOINER = "\u2060"
# C0, DEL, C1; the bidi embeddings / overrides / isolates and marks; the Unicode line / paragraph separators
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                                  "\u2028\u2029]")
_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_JOIN_AFTER = re.compile(r"([:@])|(?<=www)(?=\\\.)", re.IGNORECASE)


def terminal_text(text: Any, *, keep_newlines: bool = False) -> str:
    """`text` safe to print to a terminal: no control character (see the module docstring); one line unless
    `keep_newlines` (then only "\\n" survives, CR / CRLF line ends become "\\n")."""
    text = str(text)
    if keep_newlines:
        return _CONTROL_BUT_NEWLINE.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    return " ".join(CONTROL.sub(" ", text).split())


def markdown_text(text: Any) -> str:
    """`text` as literal, link-free text inside Streamlit Markdown (st.markdown / caption / warning / help= ...),
    on one line: no Markdown construct, HTML, autolink, e-mail link or shortcode forms, so nothing is fetched
    and nothing is clickable. Shows the same characters (plus invisible word joiners)."""
    line = terminal_text(text)
    line = _PUNCTUATION.sub(r"\\\1", line)
    return _JOIN_AFTER.sub(lambda m: (m.group(1) or "") + WORD_JOINER, line)
