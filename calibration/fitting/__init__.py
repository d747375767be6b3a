"""Profile fitting (no torch; the dashboard imports it): the fitter, segmented regression
and the kernel report."""
