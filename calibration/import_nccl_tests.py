"""Entry point only, kept so `python -m calibration.import_nccl_tests` (and torchrun -m) keeps working: it calls
`calibration.logs.import_nccl_tests.main`, the nccl-tests log importer (no torch).
Import from calibration.logs.import_nccl_tests, not from here."""
import sys

from calibration.logs.import_nccl_tests import main

if __name__ == "__main__":
    sys.exit(main())
