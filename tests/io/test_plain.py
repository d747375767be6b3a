"""costmodel.io.plain: untrusted text inert in Streamlit Markdown (no Markdown, no GFM autolink, no e-mail link)
and in a terminal (no control character).

No CommonMark + GFM renderer is installed in the venv (Streamlit renders Markdown in the browser, with
remark-gfm; tests/dashboard/test_browser.py checks the real thing), so the Markdown properties are checked the
way that renderer works: (1) every ASCII punctuation character is backslash-escaped, so no construct can open;
(2) after CommonMark resolves the escapes, the text matches neither of the patterns GFM autolinks literals with
at transform time (mdast-util-gfm-autolink-literal: `(https?://|www(?=\\.))[-.\\w]+` and
`[-.\\w+]+@[-\\w]+(\\.[-\\w]+)+`, JavaScript's ASCII `\\w`), nor an emoji / material shortcode; (3) what is shown
is the input's characters (on one line), plus invisible word joiners.
"""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.io.plain import WORD_JOINER, markdown_text, terminal_text
from costmodel.io.safe_io import escape_markdown

AUTOLINK_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)", re.IGNORECASE | re.ASCII)
AUTOLINK_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII)
SHORTCODE = re.compile(r":[-\w+/]+:", re.ASCII)  # :smile:, :material/home:
ESCAPE = re.compile(r"\\([" + re.escape(string.punctuation) + "])")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

HOSTILE = [
    "![i](https://evil.example/i.png)",
    "[click](https://evil.example)",
    "mail@evil.example",
    "mailto:mail@evil.example",
    "xmpp:mail@evil.example/resource",
    "see www.evil.example/x and WWW.EVIL.EXAMPLE",
    "http://evil.example:8080/?q=1&r=<2>",
    "<https://evil.example> <img src=x onerror=alert(1)> &lt;b&gt; &#58;",
    ":red[big] :smile: :material/home: $x^2$ **b** _i_ ~~s~~ `c` | a | b |",
    "# heading", "- item", "1. item", "> quote", "    code", "---", "=== ",
    "[ref]: https://evil.example", "a\\", "\\[x](https://evil.example)", "x\n\n![i](https://evil.example/i.png)",
    "name\x1b]8;;https://evil.example\x07click\x1b]8;;\x07\x1b[2J\rover\u202eevil",
]


def displayed(markdown: str) -> str:
    """The text CommonMark shows for `markdown` when no construct forms: escapes resolved."""
    return ESCAPE.sub(r"\1", markdown)


def assert_inert(text: str) -> None:
    out = markdown_text(text)
    assert "\n" not in out and not CONTROL.search(out), (text, out)
    bare = ESCAPE.sub("", out)  # escapes taken out left to right: no unescaped punctuation may remain
    assert not any(ch in string.punctuation for ch in bare), (text, out)
    shown = displayed(out)
    assert not AUTOLINK_URL.search(shown), (text, shown)
    assert not AUTOLINK_EMAIL.search(shown), (text, shown)
    assert not SHORTCODE.search(shown), (text, shown)
    # the same characters as the input, on one line
    assert shown.replace(WORD_JOINER, "") == terminal_text(text).replace(WORD_JOINER, "")


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_forms_no_markdown_link_or_image(text):
    assert_inert(text)


def test_markdown_text_examples():
    wj = WORD_JOINER
    assert markdown_text("![i](https://evil.example/i.png)") == \
        rf"\!\[i\]\(https\:{wj}\/\/evil\.example\/i\.png\)"
    assert markdown_text("mail@evil.example") == rf"mail\@{wj}evil\.example"
    assert markdown_text("www.evil.example") == rf"www{wj}\.evil\.example"
    assert markdown_text("h100 80GB\nNVLink") == "h100 80GB NVLink"
    assert markdown_text(3) == "3"
    assert escape_markdown("[x](y)") == markdown_text("[x](y)")  # the old name is the same helper


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]()!*_`$<>~|:/.@wWhtps -+#=1 abc\\\n&;{}\x1b\x07\r\u2060")),
               max_size=50))
def test_markdown_text_is_inert_for_markdown_alphabet(text):
    assert_inert(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_markdown_text_is_inert_for_any_text(text):
    assert_inert(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_terminal_text_never_holds_a_control_character(text):
    line = terminal_text(text)
    assert not CONTROL.search(line) and "\n" not in line and "\u2028" not in line
    assert line == line.strip() and "  " not in line
    block = terminal_text(text, keep_newlines=True)
    assert not CONTROL.search(block.replace("\n", ""))


def test_terminal_text_examples():
    hostile = "evil\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\\x1b[2K\rprofile\nnext\x9b31m\u202eab"
    assert terminal_text(hostile) == "evil ]8;;https://evil.example \\link ]8;; \\ [2K profile next 31m ab"
    assert terminal_text("  h100-sxm  ") == "h100-sxm"
    assert terminal_text("line 1\r\nline 2\n\x1b[31mred\x1b[0m", keep_newlines=True) == "line 1\nline 2\n [31mred [0m"
    assert terminal_text("a  b", keep_newlines=True) == "a  b"  # a block's columns are kept
