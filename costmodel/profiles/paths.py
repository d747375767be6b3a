"""Where the bundled data lives: data/ (profiles, presets, reference tables, examples) and the default profile.

Plain paths and names without numpy or pandas, so the CLI's parser and `profiles` / `presets` can name them
without loading the model (`costmodel.profiles.store` re-exports them). An installed package carries data/ as
costmodel/data (pyproject.toml); a checkout has it at the repository root.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the costmodel package
DATA_DIR = _PACKAGE_DIR / "data" if (_PACKAGE_DIR / "data" / "profiles").is_dir() else _PACKAGE_DIR.parent / "data"
PROFILE_DIR = DATA_DIR / "profiles"
PRESETS_CSV = DATA_DIR / "presets" / "models.csv"
GPUS_CSV = DATA_DIR / "presets" / "gpus.csv"  # GPU memory per provenance.gpu name (costmodel.profiles.gpus)
REFERENCE_DIR = DATA_DIR / "reference"  # published and measured reference tables (costmodel.evidence.reference)
DEFAULT_PROFILE = "h200-sxm-nvlink"
# the default model of every face (CLI flags, the dashboard's Inputs, the answers layer): one question by default
DEFAULT_PRESET = "llama4-maverick"


def bundled_profiles() -> list[str]:
    """Names of the profiles shipped in data/profiles/."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json") if p.name != "schema.json")


def profile_file(name_or_path: str) -> Path | None:
    """The file a --profile value stands for: the bundled `data/profiles/NAME.json` when the value is a bare name
    of one (no ".json", no "/"; a bundled name wins over a same-named local file), else the path itself when it
    exists (resolved), else None. `load_profile` reads this file and the CLI's output check protects it."""
    text = str(name_or_path)
    candidate = PROFILE_DIR / f"{text}.json"
    if not text.endswith(".json") and "/" not in text and text != "schema" and candidate.exists():
        return candidate
    return Path(text).resolve() if Path(text).exists() else None
