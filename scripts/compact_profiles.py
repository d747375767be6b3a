"""Store profiles' verbose `bootstrap` lists compactly: `ensemble` columns-v1 (costmodel.profiles.compact).

Only the numbers that differ between the replicates are kept (one column per parameter), so a fitted profile's
100 stored replicates take a few tens of KB instead of MB; loading expands them back to the same documents bit for
bit (checked here before anything is written). The derived profiles are written compact by
scripts/derive_profiles.py and scripts/derive_profiles_current.py (their members are redrawn from a seed). Run:

    python scripts/compact_profiles.py [PROFILE.json ...]     # default: every bundled profile with a list
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.profiles.compact import compact_document, expand_document  # noqa: E402
from costmodel.profiles.store import PROFILE_DIR, bundled_profiles, save_profile  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])] or [
        PROFILE_DIR / f"{name}.json" for name in bundled_profiles()]
    for path in paths:
        data = json.loads(path.read_text())
        out = compact_document(data)
        if out is data:
            print(f"{path.name}: kept ({'no bootstrap list' if not data.get('bootstrap') else 'members differ'})")
            continue
        dumps = json.dumps
        if dumps(expand_document(out)) != dumps(data):
            raise SystemExit(f"{path}: the compact form does not expand to the same document")
        before = path.stat().st_size
        save_profile(out, path)
        print(f"{path.name}: {len(data['bootstrap'])} replicates as {len(out['ensemble']['stored']['columns'])} "
              f"columns, {before:,} -> {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
