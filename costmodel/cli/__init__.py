"""`argmax-tp` / `python -m costmodel`: parsing (`options`), commands (`commands`), text (`render`), entry (`main`).

The top layer: it imports every other one and nothing imports it.
"""
