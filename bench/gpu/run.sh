#!/usr/bin/env bash
# The llama.cpp backend on a GPU: build llama-cpp-python with CUDA, then run
# bench/gpu/driver.py (the batching bench, a bench-judge sweep, calls/s and tokens/s per
# batch size, and audits at batch_size 8 ÷ 1 through babelrun.audit). For a machine with an
# NVIDIA GPU and the CUDA toolkit; not a test.
#
# What must travel (the device reaches no registry; 64 MiB a call, carried paths):
#   .whl/            wheels for python3.12 of what the device image lacks (msgspec, aiolimiter,
#                    tenacity, langcodes, language-data, marisa-trie, ...: `pip download
#                    --only-binary=:all: --python-version 3.12 ...` as the device README says)
#                    and the llama-cpp-python sdist (llama_cpp_python-*.tar.gz, ~50 MB with
#                    its vendored llama.cpp).
#   the model        Gemma 3 270M Q4_K_M is 253 MB: over one call's limit. Carry it in parts
#                    (split -b 60m) on successive calls into .model/ while the machine stays
#                    warm (ignored build outputs stay between calls), then
#                    MODEL=.model/gemma.gguf (cat .model/part-* > .model/gemma.gguf).
#
#   bench/gpu/run.sh [--dry-run] [driver args...]
#     --dry-run   no CUDA build: the llama_cpp already importable, n_gpu_layers 0, small sizes
#                 (checks the script and the driver on a CPU machine)
# Environment: MODEL (GGUF path, required), PY (python, default python3), OUT (results folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
: "${MODEL:?set MODEL to the GGUF file}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

if [[ "${1:-}" == "--dry-run" ]]; then
  shift
  "$PY" -c "import llama_cpp" || { echo "dry run: llama_cpp is not importable by $PY"; exit 2; }
  set -o pipefail
  "$PY" bench/gpu/driver.py --model "$MODEL" --gpu-layers 0 --threads 2 --sizes 1 2 --calls 4 \
      --rounds 1 --sample 4 "$@" 2>&1 | tee "$OUT/dry-run.log"
  exit
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
nvcc --version | tail -1 | tee -a "$OUT/gpu.txt"
SITE=/tmp/site
mkdir -p "$SITE"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
fi
export PYTHONPATH="$SITE:$PYTHONPATH"
if ! "$PY" -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)" 2>/dev/null; then
  SDIST=$(ls .whl/llama_cpp_python-*.tar.gz 2>/dev/null | head -1)
  [[ -n "$SDIST" ]] || { echo "no llama-cpp-python sdist in .whl/"; exit 2; }
  # Hopper (sm_90); a generic CPU build (GGML_NATIVE off) is also what decodes on the
  # AVX-512 FP16/BF16 development machine, where the native build segfaults in llama_decode.
  started=$(date +%s)
  CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=16 \
    "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target "$SITE" "$SDIST" \
    2>&1 | tail -20 | tee "$OUT/build.log"
  echo "build: $(( $(date +%s) - started ))s" | tee -a "$OUT/build.log"
fi
set -o pipefail
"$PY" bench/gpu/driver.py --model "$MODEL" "$@" 2>&1 | tee "$OUT/gpu-bench.log"
