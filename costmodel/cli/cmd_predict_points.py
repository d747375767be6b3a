"""`predict-points`: add predicted_us (and optionally its 90% interval) to measurement-schema rows."""

from __future__ import annotations

import argparse

import numpy as np

from ..evidence.point_intervals import point_intervals
from ..io.errors import InputError
from ..io.measurements import read_measurements
from ..model.engines import ENGINES
from ..model.points import engine_points, predict_points
from ..profiles.store import load_profile
from .options import parse_choice_list
from .output import write_table


def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    frame = read_measurements(args.input, require_times=False)
    if getattr(args, "engine", None):
        out = engine_points(frame, profile, parse_choice_list(args.engine, "engine", ENGINES[1:])[0])
    else:
        out = predict_points(frame, profile)
    bad = ~np.isfinite(out["predicted_us"].to_numpy(float))
    if bad.any():
        raise InputError(f"{args.input}: row {int(np.flatnonzero(bad)[0]) + 2} has no finite prediction")
    if getattr(args, "intervals", False):
        out["predicted_p05_us"], out["predicted_p95_us"] = point_intervals(
            out, profile, predicted_us=out["predicted_us"].to_numpy(float))
    write_table(out, args.out)
    return 0
