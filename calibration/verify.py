"""Entry point only, kept so `python -m calibration.verify` (and torchrun -m) keeps working: it calls
`calibration.reference.verify.main`, the strategy verifier (torch).
Import from calibration.reference.verify, not from here."""
import sys

from calibration.reference.verify import main

if __name__ == "__main__":
    sys.exit(main())
