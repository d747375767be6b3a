#!/usr/bin/env bash
# One prepared run for a machine with one CUDA GPU (sized for ~8 minutes on an H200):
#   1. the Triton tests natively (tests/calibration/test_triton_kernels.py, tests/model/test_fused_integration.py),
#   2. the kernel benchmark - every torch op and, when Triton compiles, its *_fused variant - in CUDA-graph
#      and eager mode (calibration.kernels; each point is checked before it is timed, rows flushed as measured),
#   3. the report: achieved bandwidth vs the device's copy bandwidth at large shapes, fused vs torch at batch 1.
#
#   OUT=/some/dir bash scripts/gpu_calibrate.sh [extra calibration.kernels flags, e.g. --resume]
#
# Installs nothing: needs requirements-dev.txt with a CUDA build of torch. PYTHON picks the interpreter,
# BUDGET_S (default 300) stops starting new benchmark points. Writes to $OUT: nvidia-smi.txt, tests.log,
# kernels.csv, provenance.json, kernels.log, shapes.csv, bandwidth.csv, batch1.csv. Exit 1 when a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "error: $PY has no CUDA-enabled torch (install requirements-dev.txt with a CUDA torch build)" >&2
    exit 2
fi
unset TRITON_INTERPRET
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
status=0
timeout 240 "$PY" -m pytest -q -p no:cacheprovider tests/calibration/test_triton_kernels.py tests/model/test_fused_integration.py \
    > "$OUT/tests.log" 2>&1 || { echo "error: Triton tests failed natively; see $OUT/tests.log" >&2; status=1; }
tail -n 3 "$OUT/tests.log"
"$PY" -m calibration.kernels --device cuda --out "$OUT" \
    --rows 1,4,16,64,256,1024,2048 --dtypes bf16,fp32 --modes graph,eager --world-sizes 2,4,8 \
    --point-seconds 0.25 --budget-s "${BUDGET_S:-300}" "$@" 2> >(tee "$OUT/kernels.log" >&2) || status=1
"$PY" -m calibration.kernel_report "$OUT/kernels.csv" --out "$OUT" || status=1
exit $status
