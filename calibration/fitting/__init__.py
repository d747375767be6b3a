"""Profile fitting (no torch; the dashboard imports it): the fitter, segmented regression,
the fit report's table (report_table) and the kernel report."""
