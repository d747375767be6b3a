"""A one-page HTML report of one scenario that opens offline: inputs, verdict, charts, provenance.

`html_report(...)` only assembles what the caller computed - it prices nothing. Every text is HTML-escaped;
charts arrive as SVG documents (e.g. from vl-convert) and are inlined, so the file has no script, no
stylesheet link and no request of any kind: it renders the same with the network off.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_SVG_START = re.compile(r"<svg\b", re.IGNORECASE)
_FORBIDDEN = re.compile(r"<script\b|<foreignObject\b|\bon\w+\s*=|javascript:|(?:href|src)\s*=\s*[\"']https?:",
                        re.IGNORECASE)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 1.6rem; }
.muted { color: #666; font-size: .9rem; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .6rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { font-size: 1.1rem; font-weight: 600; }
figure { margin: 1rem 0; } figcaption { font-weight: 600; margin-bottom: .3rem; }
"""


@dataclass(frozen=True)
class ReportTable:
    """A table already formatted for people: column headers and rows of display strings."""

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: Sequence[bool] = field(default=())


def inline_svg(svg: str) -> str:
    """The <svg> element of an SVG document, checked to be inert (no script, handler, link out)."""
    match = _SVG_START.search(svg)
    if match is None:
        raise ValueError("not an SVG document")
    body = svg[match.start():]
    if _FORBIDDEN.search(body):
        raise ValueError("the SVG contains a script, an event handler or an external link")
    return body


def _table(t: ReportTable) -> str:
    numeric = list(t.numeric) or [False] * len(t.columns)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td{' class=num' if n else ''}>{html.escape(str(v))}</td>"
                                    for v, n in zip(row, numeric)) + "</tr>" for row in t.rows)
    return f"<h2>{html.escape(t.title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(*, title: str, subtitle: str, inputs: Mapping[str, str], verdict: Sequence[str],
                tables: Sequence[ReportTable] = (), charts: Sequence[tuple[str, str]] = (),
                provenance: Sequence[str] = (), footer: str = "") -> str:
    """The report as one self-contained HTML document.

    inputs: label -> value (already formatted); verdict: sentences, the first one emphasised; tables: formatted
    tables; charts: (caption, SVG document); provenance: sentences (source, citations).
    """
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p class=muted>{html.escape(subtitle)}</p>", "<h2>Verdict</h2>"]
    for i, line in enumerate(verdict):
        parts.append(f"<p{' class=verdict' if i == 0 else ''}>{html.escape(line)}</p>")
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in inputs.items())
    parts.append(f"<h2>Inputs</h2><table><tbody>{rows}</tbody></table>")
    parts += [_table(t) for t in tables]
    for caption, svg in charts:
        parts.append(f"<figure><figcaption>{html.escape(caption)}</figcaption>{inline_svg(svg)}</figure>")
    if provenance:
        items = "".join(f"<li>{html.escape(p)}</li>" for p in provenance)
        parts.append(f"<h2>Provenance</h2><ul>{items}</ul>")
    if footer:
        parts.append(f"<p class=muted>{html.escape(footer)}</p>")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")
