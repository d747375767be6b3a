#!/usr/bin/env bash
# Kernel benchmark on one CUDA GPU -> $OUT/kernels.csv, $OUT/provenance.json, $OUT/nvidia-smi.txt, $OUT/kernels.log
#
#   OUT=/some/dir bash scripts/gpu_kernels.sh          (PYTHON=... to pick the interpreter)
#
# Installs nothing: needs the packages of requirements-dev.txt with a CUDA build of torch.
# Grid (~1,950 points): rows 1,4,16,64,256,1024,2048 x the default per-op cols x bf16,fp32 x graph,eager
# x p = 2,4,8. Sized for ~5 minutes on an H200: no new point starts after 270 s (bf16 first); every row
# is flushed as measured, so rerunning the same command with --resume appended finishes the grid.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "error: $PY has no CUDA-enabled torch (install requirements-dev.txt with a CUDA torch build)" >&2
    exit 2
fi
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
"$PY" -m calibration.kernels --device cuda --out "$OUT" \
    --rows 1,4,16,64,256,1024,2048 --dtypes bf16,fp32 --modes graph,eager --world-sizes 2,4,8 \
    --point-seconds 0.25 --budget-s 270 "$@" 2> >(tee "$OUT/kernels.log" >&2)
