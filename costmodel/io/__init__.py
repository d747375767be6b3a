"""Edges: one-line input errors, bounded reads, safe outputs, strict JSON, formula-safe CSV, plain text, display.

Nothing here knows the model. `errors` is the one exception type every user-facing problem raises; `safe_io` is
the one place a file is read or a CSV written (size checked before a byte is read, cells that a spreadsheet would
run neutralised); `outputs` writes a file whole or not at all and never over an input; `plain` makes user text
inert in Markdown and on a terminal; `measurements` is the schema of a measured row shared by every calibration tool
and `predict-points` (its names - ops, dtypes, modes - in `schema_names`, free of numpy / pandas); `formatting`
turns model outputs into display text. Every other layer may import this one.
"""
