"""The bare Streamlit page `scripts/bench_cli.py --browser` compares the dashboard's first page against (issue 43
item 4): Streamlit's own cost of one wide page that draws one Altair chart and one table, nothing of the project.

    streamlit run scripts/bare_page.py
"""

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

st.set_page_config(page_title="bare page", layout="wide")
st.title("A bare Streamlit page")
batch = np.arange(1, 257)
frame = pd.DataFrame({"batch": np.concatenate([batch, batch]),
                      "time_us": np.concatenate([50 + 0.5 * batch, 80 + 0.1 * batch]),
                      "strategy": ["a"] * len(batch) + ["b"] * len(batch)})
st.altair_chart(alt.Chart(frame).mark_line().encode(x="batch", y="time_us", color="strategy"), width="stretch")
st.dataframe(frame.head(20), width="stretch")
