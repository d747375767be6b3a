"""Entry point only, kept so `python -m calibration.kernel_report` (and torchrun -m) keeps working: it calls
`calibration.fitting.kernel_report.main`, the kernel report (no torch).
Import from calibration.fitting.kernel_report, not from here."""
import sys

from calibration.fitting.kernel_report import main

if __name__ == "__main__":
    sys.exit(main())
