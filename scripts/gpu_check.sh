#!/usr/bin/env bash
# The prepared device run: every GPU measurement of the project in one command that fits a
# lease (its default stages' limits add up to 8 minutes; the stages before the captured one took
# about 6 on one H100), each stage with its own time limit and its own result
# under $OUT, written as soon as the stage (or a part of it) finishes, so that a command cut
# short still returns the stages before.
#
#   scripts/gpu_check.sh                    on the GPU machine, from the repository root
#   GPU_CHECK_DEVICE=cpu GPU_CHECK_TINY=1 OUT=/tmp/gc scripts/gpu_check.sh   rehearsal on a CPU
#
# Stages (limit in seconds; each writes to $OUT, 8 files at most, none in a sub-folder):
#   install  (20)  the carried wheels (.whl/*.whl) into /tmp/site (GPU_CHECK_SITE), offline, nothing built
#   env      (40)  env.txt: nvidia-smi, torch, CUDA, cuDNN, the GPU, the carried packages
#   tests    (90)  pytest.txt: tests/test_cuda.py
#   eager    (80)  step_eager.json + .md: benchmarks.gpu_step, eager backbone, ProtoNet, MSKM and
#                  ORDER at R = 50 and 250, episodes on the device and from host memory
#   compile  (80)  step_compile.json + .md: the backbone alone with torch.compile, MSKM and ORDER,
#                  R = 50 (not a default stage: the captured stage compiles the whole step)
#   captured (100) step_captured.json + .md: the whole training step compiled and replayed as a
#                  CUDA graph (EpisodicTemplate.compile_training_step, mode reduce-overhead),
#                  ProtoNet, MSKM and ORDER (OT plan on the device), R = 50, beside the eager step
#   paper   (150)  paper_short.json: benchmarks.paper_scale --short, ORDER on the synthetic 84 px
#                  paper preset, GPU_CHECK_SHORT iterations per domain, the real evaluation, the
#                  whole run's cost computed
#   log.txt        every stage's output
#
# Environment: OUT (required off the device tool), PYTHON (default python3: the image's, with its
# CUDA torch), GPU_CHECK_DEVICE (cuda), GPU_CHECK_TINY=1 (a tiny network and evaluation: only to
# rehearse the script), GPU_CHECK_SHORT (iterations per domain of the paper stage, default 200),
# GPU_CHECK_STAGES (the stages to run, default "install env tests eager captured paper"; add
# compile for the backbone-only torch.compile stage),
# GPU_CHECK_LIMIT_SCALE (multiplies every limit: a slow rehearsal machine), WHEELS (default .whl).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here" || exit 2
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
SHORT="${GPU_CHECK_SHORT:-150}"
STAGES="${GPU_CHECK_STAGES:-install env tests eager captured paper}"
WHEELS="${WHEELS:-.whl}"
SCALE="${GPU_CHECK_LIMIT_SCALE:-1}"
LOG="$OUT/log.txt"
export OUT PY WHEELS SITE
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" PIP_DISABLE_PIP_VERSION_CHECK=1
SITE="${GPU_CHECK_SITE:-/tmp/site}"
export PYTHONPATH="$SITE:$here${PYTHONPATH:+:$PYTHONPATH}"

SETS=()
if [ "${GPU_CHECK_TINY:-0}" = 1 ]; then
  SETS=(--set image_size=16 --set n_blocks=2 --set width=4 --set threads=1
        --set n_test_episodes=2 --set n_val_episodes=2 --set eval_mb_size=2)
fi

started=$SECONDS
# stage NAME LIMIT COMMAND...: run COMMAND under its own time limit, its output into log.txt
stage() {
  local name="$1" limit=$(($2 * SCALE)) rc t0=$SECONDS
  shift 2
  case " $STAGES " in *" $name "*) ;; *) return 0 ;; esac
  echo "=== [gpu_check] $name (limit ${limit}s, at $((SECONDS - started))s)" | tee -a "$LOG"
  # bash -c: a stage may be one of the functions below (exported), or a program
  timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" >> "$LOG" 2>&1
  rc=$?
  rm -f "$OUT"/*.part  # a result file being rewritten when the limit struck: the whole one stays
  case $rc in
    0) echo "=== [gpu_check] $name: ok in $((SECONDS - t0))s" | tee -a "$LOG" ;;
    124|137) echo "=== [gpu_check] $name: CUT at its ${limit}s limit (what it wrote stays)" | tee -a "$LOG" ;;
    *) echo "=== [gpu_check] $name: FAILED (exit $rc) after $((SECONDS - t0))s" | tee -a "$LOG" ;;
  esac
  return 0
}

install_wheels() {
  set -e
  ls "$WHEELS"/*.whl > /dev/null
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WHEELS"/*.whl
  echo "installed $(ls "$WHEELS"/*.whl | wc -l) wheels into $SITE"
}

environment() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || echo "no nvidia-smi"
    "$PY" - <<'PY'
import importlib.metadata as md
import torch
print("python", __import__("sys").version.split()[0], "torch", torch.__version__,
      "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("gpu", p.name, f"{p.total_memory / 2**30:.1f} GiB", p.multi_processor_count, "SMs",
          "bf16", torch.cuda.is_bf16_supported())
for name in ("avalanche-lib", "POT", "quadprog", "qpsolvers", "wandb", "numpy", "scipy"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "MISSING")
import avalanche, avalanche.training.plugins, ot, avalanche_sets  # noqa: E401
print("imports ok:", avalanche_sets.__file__)
PY
  } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
}

tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_cuda.py > "$OUT/pytest.txt" 2>&1
  local rc=$?
  tail -n 30 "$OUT/pytest.txt"
  return $rc
}

export -f install_wheels environment tests
: > "$LOG"
stage install 20 install_wheels
stage env 40 environment
stage tests 90 tests
stage eager 80 "$PY" -m benchmarks.gpu_step --device "$DEVICE" --out "$OUT" --stem step_eager \
  --variants eager --methods protonet mskm order --n-ood 50 250 --data device host \
  --warm 6 --iters 12 --round 4 "${SETS[@]}"
stage captured 100 "$PY" -m benchmarks.gpu_step --device "$DEVICE" --out "$OUT" --stem step_captured \
  --variants captured eager --methods protonet mskm order --n-ood 50 --data device \
  --warm 6 --iters 12 --round 4 "${SETS[@]}"
stage compile 80 "$PY" -m benchmarks.gpu_step --device "$DEVICE" --out "$OUT" --stem step_compile \
  --variants compile --methods mskm order --n-ood 50 --data device \
  --warm 4 --iters 8 --round 4 "${SETS[@]}"
stage paper 150 "$PY" -m benchmarks.paper_scale --device "$DEVICE" --out "$OUT" --short "$SHORT" \
  --methods order --stem paper_short "${SETS[@]}"
echo "=== [gpu_check] all stages done in $((SECONDS - started))s; files in $OUT:" | tee -a "$LOG"
ls -la "$OUT" | tee -a "$LOG"
