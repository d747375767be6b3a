"""Small percentages keep two significant digits (issue 18: impact labels rounded to "+0.1%" / "0%")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costmodel.io.formatting import MISSING, format_pct, format_small_pct


@pytest.mark.parametrize("value, text", [(0.0, "0%"), (0.053, "+0.053%"), (-0.0012, "-0.0012%"), (0.96, "+0.96%"),
                                         (0.999, "+1.0%"), (12.34, "+12.3%"), (None, MISSING)])
def test_by_hand(value, text):
    assert format_small_pct(value) == text


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False))
def test_never_zero_for_a_nonzero_value_and_pct_above_one(x):
    text = format_small_pct(x)
    if abs(x) >= 0.995:
        assert text == format_pct(x)
    elif x != 0:
        assert float(text.rstrip("%")) != 0 and abs(float(text.rstrip("%")) / x - 1) < 0.05
