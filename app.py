"""Placeholder view until the dashboard lands: the verdict for the default scenario."""

import streamlit as st

from costmodel import Scenario, default_profile, predict

st.title("Local argmax vs full all-gather")
pred = predict(Scenario(), default_profile())
st.write(f"Fastest strategy: {pred.best().item()}")
st.dataframe(pred.to_frame())
