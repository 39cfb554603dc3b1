#!/usr/bin/env bash
# The CUDA path (issue 26) on a machine with an NVIDIA GPU, in one run: build rkm with RKM_CUDA=ON into the Python
# that holds PyTorch and CuPy, import it and print its configuration, run tests/test_cuda.py, run a subset of it
# under compute-sanitizer (memcheck) where that tool is present, then the benchmark (bench/cuda.py --quick).
#
#   bash bench/gpu_cuda.sh                      # everything under $OUT (default /tmp/rkm_gpu_cuda)
#   BUDGET_S=400 CUDA_ARCH=native bash bench/gpu_cuda.sh
#   BENCH_ARGS="--repeats 5" PYTEST_OPTS="--maxfail=5" bash bench/gpu_cuda.sh
#
# Every step runs under `timeout`, with its output in a log under $OUT, and a failing step does not stop the later
# ones (a failed build skips the tests, but the benchmark still runs its PyTorch and CuPy rows). The steps share
# BUDGET_S seconds (default 510, for a 9-minute call): each gets at most its own cap and at most what is left after
# the time kept back for the benchmark. Files under $OUT (8 at most): env.log (machine, toolkit, packages, then
# rkm.show_config() and rkm._core.cuda_info() after the build), build.log, tests.log, sanitizer.log, bench.log,
# cuda_bench.json, cuda_bench.md and summary.txt (one line per step: exit status and seconds).
#
# Eigen: the machine has no Eigen headers and no network. Copy a cmeel-eigen prefix (include/eigen3 and
# share/eigen3/cmake) to .gpu/cmeel.prefix in the repository (ignored through .git/info/exclude) and carry it with
# the call; the build passes Eigen3_DIR=$PWD/.gpu/cmeel.prefix/share/eigen3/cmake (EIGEN_PREFIX to use another
# prefix). Without it CMake looks for a system Eigen or a cmeel.prefix on the Python's sys.path.
#
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, else python3), CUDA_ARCH (CMAKE_CUDA_ARCHITECTURES,
# default 90: H100 and H200), N_THREADS (OpenMP threads and bench/cuda.py --n-threads, default 16), BUDGET_S,
# PYTEST_OPTS (default --maxfail=25: a first run on a GPU should show every failing area), SANITIZER_K (pytest -k
# of the memcheck run, default "float64 and (rbf or eigensolver)": the kernels and the GPU Krylov iteration),
# BENCH_ARGS (extra options of bench/cuda.py), WERROR=1 (build with RKM_WERROR=ON).
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
OUT=${OUT:-/tmp/rkm_gpu_cuda}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
ENV_LOG=$OUT/env.log
: >"$SUMMARY"
BUDGET_S=${BUDGET_S:-510}
BENCH_RESERVE_S=150 # kept back for the benchmark by the steps before it
N_THREADS=${N_THREADS:-16}
CUDA_ARCH=${CUDA_ARCH:-90}
EIGEN_PREFIX=${EIGEN_PREFIX:-$PWD/.gpu/cmeel.prefix}
PYTEST_OPTS=${PYTEST_OPTS:---maxfail=25}
SANITIZER_K=${SANITIZER_K:-float64 and (rbf or eigensolver)}
BENCH_ARGS=${BENCH_ARGS:-}

PY=${PYTHON:-/opt/torch/.venv/bin/python3}
if [[ ! -x $PY ]]; then
  PY=$(command -v python3)
fi
# The venv's tools (cmake, ninja from pip) first, for scikit-build-core and the logs.
PATH=$(dirname "$PY"):$PATH
if [[ -d /usr/local/cuda/bin ]]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi
NVCC=$(command -v nvcc || true)
if [[ -n $NVCC ]]; then
  export CUDACXX=$NVCC
fi
export OMP_NUM_THREADS=$N_THREADS CMAKE_BUILD_PARALLEL_LEVEL=$N_THREADS
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET_S - $(elapsed))); }
# cap SECONDS [RESERVE]: SECONDS, or less so that RESERVE seconds of the budget stay for later steps.
cap() {
  local want=$1 reserve=${2:-0} have
  have=$(($(left) - reserve))
  echo $((want < have ? want : have))
}
note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME LOG LIMIT COMMAND...: COMMAND under `timeout LIMIT` with its output appended to LOG; a line in the
# summary; the end of the log on stdout (the call's reply shows the end of stdout). Returns COMMAND's status.
step() {
  local name=$1 log=$2 limit=$3 t0 rc
  shift 3
  if ((limit < 15)); then
    note "$name: skipped, ${limit} s of the budget left"
    return 99
  fi
  local shown="$*"
  shown=${shown%%$'\n'*} # the first line of a command with a script in it
  echo "=== $name (limit ${limit} s, $(elapsed) s elapsed): $shown"
  local offset
  offset=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1)) # the log may hold earlier steps' output
  echo "### $name: $shown (limit ${limit} s)" >>"$log"
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0)) what=""
  if ((rc == 124 || rc == 137)); then
    what=" (timed out)"
  fi
  tail -c "+$offset" "$log" | tail -n 25
  note "$name: exit $rc$what, ${took} s (log: $(basename "$log"))"
  return $rc
}

# ------------------------------------------------------------------------------------------ machine and tools
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host $(uname -srm); $(nproc) CPUs"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "python: $PY ($("$PY" --version 2>&1))"
  echo "nvcc: ${NVCC:-not found}"
  [[ -n $NVCC ]] && "$NVCC" --version | tail -n 2
  timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 || echo "nvidia-smi failed"
  echo "cmake: $(cmake --version 2>&1 | head -n 1); ninja: $(ninja --version 2>&1)"
  echo "Eigen prefix: $EIGEN_PREFIX ($([[ -f $EIGEN_PREFIX/share/eigen3/cmake/Eigen3Config.cmake ]] && echo found || echo MISSING))"
  echo "packages:"
  "$PY" -m pip list 2>/dev/null | grep -i -E '^(torch|cupy-cuda[0-9x]+|nvidia-cublas|nvidia-cuda-runtime|cuda-pathfinder|scikit-build-core|pybind11|cmake|ninja|numpy|scipy|scikit-learn|threadpoolctl|pytest) '
  echo "libcublas: $("$PY" - <<'EOF' 2>&1
import glob, importlib.util, os
spec = importlib.util.find_spec("nvidia")
roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
print(sorted({p for r in roots for p in glob.glob(os.path.join(r, "*", "lib", "libcublas.so*"))}) or "not found")
EOF
)"
} >"$ENV_LOG" 2>&1
cat "$ENV_LOG"

# ------------------------------------------------------------------------------------------------- build
build_args=(-m pip install --no-deps --no-build-isolation --no-cache-dir -v
  -Cbuild-dir=build/gpu-cuda
  -Ccmake.define.RKM_CUDA=ON
  "-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH")
if [[ -f $EIGEN_PREFIX/share/eigen3/cmake/Eigen3Config.cmake ]]; then
  build_args+=("-Ccmake.define.Eigen3_DIR=$EIGEN_PREFIX/share/eigen3/cmake")
else
  note "build: no Eigen at $EIGEN_PREFIX; CMake looks for a system Eigen or a cmeel.prefix"
fi
if [[ ${WERROR:-0} == 1 ]]; then
  build_args+=(-Ccmake.define.RKM_WERROR=ON)
fi
build_args+=(.)
built=0
if step build "$OUT/build.log" "$(cap 330 $((BENCH_RESERVE_S + 30)))" "$PY" "${build_args[@]}"; then
  built=1
fi

# ------------------------------------------------------------------------- configuration after the build
step config "$ENV_LOG" "$(cap 60 "$BENCH_RESERVE_S")" "$PY" -c '
import json
import rkm
from rkm import _core
rkm.show_config()
print("cuda_info:", json.dumps(_core.cuda_info(), indent=1, default=str))
' || built=0

# --------------------------------------------------------------------------------------------------- tests
tests_ok=0
if ((built)); then
  # shellcheck disable=SC2086
  step tests "$OUT/tests.log" "$(cap 200 "$BENCH_RESERVE_S")" "$PY" -m pytest $PYTEST_OPTS -q -p no:cacheprovider \
    -o faulthandler_timeout=120 --durations=15 tests/test_cuda.py && tests_ok=1
else
  note "tests: skipped, rkm did not build or import"
fi

# ----------------------------------------------------------------------------- compute-sanitizer (memcheck)
SANITIZER=$(command -v compute-sanitizer || true)
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
  /opt/nvidia/compute-sanitizer/compute-sanitizer; do
  if [[ -z $SANITIZER && -x $candidate ]]; then
    SANITIZER=$candidate
  fi
done
if ((!built)); then
  note "sanitizer: skipped, rkm did not build or import"
elif [[ -z $SANITIZER ]]; then
  note "sanitizer: skipped, compute-sanitizer not found"
else
  # --error-exitcode 86: memcheck findings, apart from test failures; exit 5: no test matched -k (then "rbf").
  sanitize() {
    step "sanitizer (-k '$1')" "$OUT/sanitizer.log" "$(cap 90 "$BENCH_RESERVE_S")" "$SANITIZER" --tool memcheck \
      --error-exitcode 86 --print-limit 20 "$PY" -m pytest -x -q -p no:cacheprovider tests/test_cuda.py -k "$1"
  }
  sanitize "$SANITIZER_K"
  if (($? == 5)); then
    sanitize rbf
  fi
fi

# ------------------------------------------------------------------------------------------------ benchmark
bench_limit=$(cap 240 5)
# shellcheck disable=SC2086
step bench "$OUT/bench.log" "$bench_limit" "$PY" bench/cuda.py --quick --out "$OUT" --n-threads "$N_THREADS" \
  --budget $((bench_limit > 60 ? bench_limit - 40 : bench_limit / 2)) $BENCH_ARGS
bench_ok=$?

rm -f "$OUT"/.cuda_bench.*.tmp # left by a benchmark stopped while writing (at most 8 files come back)
note "total: $(elapsed) s of a ${BUDGET_S} s budget"
echo
echo "=== summary"
cat "$SUMMARY"
if [[ -f $OUT/cuda_bench.md ]]; then
  echo
  cat "$OUT/cuda_bench.md"
fi
((built && tests_ok && bench_ok == 0))
