"""Entry point only, kept so `python -m calibration.collectives` (and torchrun -m) keeps working: it calls
`calibration.bench.collectives.cli`, the collective benchmark (torch).
Import from calibration.bench.collectives, not from here."""
from calibration.bench.collectives import cli

if __name__ == "__main__":
    cli()
