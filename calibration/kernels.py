"""Entry point only, kept so `python -m calibration.kernels` (and torchrun -m) keeps working: it calls
`calibration.bench.kernels.main`, the kernel benchmark (torch).
Import from calibration.bench.kernels, not from here."""
import sys

from calibration.bench.kernels import main

if __name__ == "__main__":
    sys.exit(main())
