"""Calibration: measure a cluster, fit a profile, and check the strategies. By concern, and by what
needs torch: bench/ (torch) measures, reference/ (torch) runs the strategies as engines do, fitting/ and
logs/ (no torch) turn measurements into profiles. The calibration/<command>.py modules are entry points."""
