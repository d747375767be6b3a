"""GPU vendors and families of profiles (NVIDIA: Blackwell, Hopper, Ampere, Ada; AMD: CDNA; CPU; other): labels
for listings and pickers.

A plain lookup on the provenance GPU name, without numpy or pandas (`profiles` lists them;
`costmodel.answers.compare` re-exports them for the compare views and the dashboard's grouped picker).
"""

from __future__ import annotations

VENDORS = ("NVIDIA", "AMD", "other", "CPU")
FAMILIES = ("Blackwell", "Hopper", "Ampere", "Ada", "CDNA", "other", "CPU")
# AMD first: its names hold no NVIDIA key, but an NVIDIA key must never claim an Instinct part
_FAMILY_KEYS = (("CDNA", ("INSTINCT", "MI300", "MI325", "MI350", "MI355")),
                ("Blackwell", ("B200", "B300", "GB200", "GB300", "RTX PRO 6000", "BLACKWELL")),
                ("Hopper", ("H100", "H200", "H20", "H800", "GH200")), ("Ampere", ("A100", "A800", "A10")),
                ("Ada", ("L40", "L4", "4090")), ("CPU", ("CPU",)))
_VENDOR_OF_FAMILY = {"Blackwell": "NVIDIA", "Hopper": "NVIDIA", "Ampere": "NVIDIA", "Ada": "NVIDIA", "CDNA": "AMD",
                     "CPU": "CPU"}


def gpu_family(gpu: str) -> str:
    """GPU family of a provenance GPU name: Blackwell, Hopper, Ampere, Ada, CDNA, CPU, else "other"."""
    g = gpu.upper()
    for family, keys in _FAMILY_KEYS:
        if any(k in g for k in keys):
            return family
    return "other"


def family_vendor(family: str) -> str:
    """Vendor of a family label (FAMILIES): NVIDIA for Blackwell / Hopper / Ampere / Ada, AMD for CDNA, CPU, else
    "other"."""
    return _VENDOR_OF_FAMILY.get(family, "other")


def gpu_vendor(gpu: str) -> str:
    """Vendor of a provenance GPU name: NVIDIA / AMD by family (or the name's own "NVIDIA" / "AMD"), CPU, else
    "other"."""
    vendor = _VENDOR_OF_FAMILY.get(gpu_family(gpu))
    if vendor is not None:
        return vendor
    g = gpu.upper()
    return "NVIDIA" if "NVIDIA" in g else "AMD" if g.startswith("AMD") or " AMD " in g else "other"
