"""`predict-points`: add predicted_us (and optionally its 90% interval) to measurement-schema rows."""

from __future__ import annotations

import argparse

import numpy as np

from ..evidence.point_intervals import point_intervals
from ..io.errors import InputError
from ..io.measurements import read_measurements
from ..model.engines import ENGINES
from ..model.fabrics import profile_on_fabric
from ..model.points import engine_points, predict_points
from ..profiles.store import load_profile
from .options import parse_one_choice
from .output import write_table
from .question_args import fabric_kwargs


def run(args: argparse.Namespace) -> int:
    engine = getattr(args, "engine", None)
    if engine is not None:  # one engine ('' and 'vllm,sglang' refused, not read as none / the first)
        engine = parse_one_choice(engine, "engine", ENGINES[1:], "predict-points")
    profile = profile_on_fabric(load_profile(args.profile), **fabric_kwargs(args))
    frame = read_measurements(args.input, require_times=False)
    if engine is not None:
        out = engine_points(frame, profile, engine)
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
