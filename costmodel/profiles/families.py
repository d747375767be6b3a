"""GPU families of profiles (Blackwell, Hopper, Ampere, Ada, CPU, other): labels for listings and pickers.

A plain lookup on the provenance GPU name, without numpy or pandas (`profiles` lists them;
`costmodel.answers.compare` re-exports them for the compare views).
"""

from __future__ import annotations

FAMILIES = ("Blackwell", "Hopper", "Ampere", "Ada", "other", "CPU")
_FAMILY_KEYS = (("Blackwell", ("B200", "B300", "GB200", "GB300", "RTX PRO 6000", "BLACKWELL")),
                ("Hopper", ("H100", "H200", "H20", "H800", "GH200")), ("Ampere", ("A100", "A800", "A10")),
                ("Ada", ("L40", "L4", "4090")), ("CPU", ("CPU",)))


def gpu_family(gpu: str) -> str:
    """GPU family of a provenance GPU name: Blackwell, Hopper, Ampere, Ada, CPU, else "other"."""
    g = gpu.upper()
    for family, keys in _FAMILY_KEYS:
        if any(k in g for k in keys):
            return family
    return "other"
