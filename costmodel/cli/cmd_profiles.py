"""`profiles`: the bundled profiles with their provenance (a table, `--citations`, or `--json`).

Each profile is loaded - and so validated - as `load_profile` does; no pandas or scipy is imported.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..io.plain import terminal_text
from ..profiles.families import FAMILIES, VENDORS, gpu_family, gpu_vendor
from ..profiles.paths import DEFAULT_PROFILE, bundled_profiles
from ..profiles.store import load_profile


def profile_rows() -> list[dict[str, Any]]:
    """One row per bundled profile: name, vendor, family, kind, GPU, fabric, GPUs / NICs per node, date, source,
    citations; ordered by vendor, family, name."""
    rows = []
    for name in bundled_profiles():
        p = load_profile(name)
        v = p.provenance
        rows.append({"name": name, "vendor": gpu_vendor(v.gpu), "family": gpu_family(v.gpu), "kind": v.kind,
                     "gpu": v.gpu,
                     "fabric": v.interconnect, "gpus_per_node": v.gpus_per_node, "nics_per_node": v.nics_per_node,
                     "nic_gbps": v.nic_gbps, "date": v.date, "default": name == DEFAULT_PROFILE, "source": v.source,
                     "citations": list(v.citations)})
    return sorted(rows, key=lambda r: (VENDORS.index(r["vendor"]), FAMILIES.index(r["family"]), r["name"]))


def run(args: argparse.Namespace) -> int:
    rows = profile_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def cell(v: Any) -> str:
        return "-" if v is None else str(v)

    print(f"  {'profile':20s} {'vendor':6s} {'family':9s} {'kind':8s} {'GPU':28s} {'GPUs/node':>9s} {'NICs/node':>9s}"
          "  fabric")
    for r in rows:
        r = {k: terminal_text(v) if isinstance(v, str) else v for k, v in r.items()}  # names, GPUs, sources
        star = "*" if r["default"] else " "
        nics = cell(r["nics_per_node"]) + ("" if r["nic_gbps"] is None else f" x {r['nic_gbps'] * 8:g}G")
        print(f"{star} {r['name']:20s} {r['vendor']:6s} {r['family']:9s} {r['kind']:8s} {r['gpu'][:28]:28s} "
              f"{cell(r['gpus_per_node']):>9s} {nics:>9s}  {r['fabric']}")
        if args.citations:
            print(f"      source: {r['source']}")
            for c in r["citations"]:
                print(f"      - {terminal_text(c)}")
    if not args.citations:
        print("\n(--citations: each profile's source and the public figures it was built from; --json: all fields)")
    return 0
