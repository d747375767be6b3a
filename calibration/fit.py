"""Entry point only, kept so `python -m calibration.fit` (and torchrun -m) keeps working: it calls
`calibration.fitting.fit.main`, the profile fitter (no torch).
Import from calibration.fitting.fit, not from here."""
import sys

from calibration.fitting.fit import main

if __name__ == "__main__":
    sys.exit(main())
