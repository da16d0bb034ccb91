#!/usr/bin/env bash
# Where a study training's time goes on the device, and whether torch.compile buys it back (with CUDA
# graphs: mode reduce-overhead, the recipe key `compile_mode`): the measurement parts 2 and 5 wait for
# (studies/gpu/README.md). The steps run in the order of what they settle, most first; all of them take
# about 8 minutes on an H100/H200, the first three about 3. Each has its own timeout and writes under
# $OUT as it goes, so a cut call returns what it measured.
#
#   bash studies/gpu/speed.sh                       # on the device (device tool: carry [".whl"])
#   DEVICE=cpu TOKENS=256 STEPS_PER_RUN=2 UPDATES=4 RUNS=2 TIMEOUT_SCALE=5 OUT=/tmp/speed PYTHON=.venv/bin/python bash studies/gpu/speed.sh
#
# Steps: profile (one step of the baseline and of QueryK heterogeneous 1-2-3, eager), graphs (the QueryK
# step compiled with CUDA graphs), throughput-graphs (8 QueryK trainings side by side so compiled),
# graphs-loss (whether the graphs keep the loss curve: benchmarks/training_levers.py on recipes/smoke.json,
# the curve with them beside the eager one and another seed's), throughput (8 QueryK trainings, eager), compiled (the QueryK step compiled without graphs), variants (QueryK's
# batch from pageable memory, as training did before 2026-11-30, and without bf16 autocast: the recipe
# key `amp`), throughput-compiled. SPEED_STEPS names the steps to run (default: all, in that order).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-$repo/runs/gpu-out}
mkdir -p "$out"
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
tokens=${TOKENS:-8192}
steps=${STEPS_PER_RUN:-30}
updates=${UPDATES:-300}
runs=${RUNS:-8}
wanted=${SPEED_STEPS:-profile,graphs,throughput-graphs,graphs-loss,throughput,compiled,variants,throughput-compiled}
# Multiplies every step's time limit (they fit an H100; a CPU dry run needs more).
scale=${TIMEOUT_SCALE:-1}
t() { echo $(( $1 * scale )); }
wants() { case ",$wanted," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
export PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
exec > >(tee -a "$out/speed.log") 2>&1
say() { echo "== $(date -u +%H:%M:%S) $*"; }
say "speed on $device"
if ! "$py" -c "import rapidfuzz" 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/rapidfuzz-*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
tiny=()
[ "$device" = cpu ] && tiny=(--tiny)
queryk=recipes/queryk-heterogeneous-1-2-3-tiny-en-de.json
profile=(--device "$device" --tokens "$tokens" --steps "$steps" --out "$out/training_step_profile.md")

if wants profile; then
    say "host and device time of one step: the baseline, QueryK heterogeneous 1-2-3"
    timeout $(t 60) "$py" benchmarks/training_step_profile.py --recipe recipes/transformer-tiny-en-de.json "${profile[@]}" >/dev/null \
        || say "baseline profile FAILED ($?)"
    timeout $(t 60) "$py" benchmarks/training_step_profile.py --recipe "$queryk" "${profile[@]}" >/dev/null \
        || say "QueryK profile FAILED ($?)"
fi
if wants graphs; then
    say "the QueryK step through torch.compile with CUDA graphs (reduce-overhead)"
    timeout $(t 150) "$py" benchmarks/training_step_profile.py --recipe "$queryk" "${profile[@]}" --compile \
        --compile-mode reduce-overhead >/dev/null || say "graphs profile FAILED ($?)"
fi
throughput=(--recipe "$queryk" --runs "$runs" --updates "$updates" --device "$device" --out "$out/study_throughput.md" "${tiny[@]}")
[ "$device" = cuda ] && throughput+=(--mps)
if wants throughput-graphs; then
    say "$runs QueryK trainings side by side, $updates updates, compiled with CUDA graphs"
    # Inductor compiles with a worker per core in each process: 8 processes share the host's cores.
    TORCHINDUCTOR_COMPILE_THREADS=2 timeout $(t 240) "$py" benchmarks/study_throughput.py "${throughput[@]}" \
        --set compile=true --set compile_mode=reduce-overhead || say "throughput with graphs FAILED ($?)"
fi
if wants graphs-loss; then
    say "the loss curve with CUDA graphs beside the eager one and another seed's"
    timeout $(t 150) "$py" benchmarks/training_levers.py --lever compile=true --lever compile_mode=reduce-overhead \
        --device "$device" --updates "$updates" > "$out/graphs_loss.txt" || say "graphs loss curve FAILED ($?)"
fi
if wants throughput; then
    say "$runs QueryK trainings side by side, $updates updates"
    timeout $(t 120) "$py" benchmarks/study_throughput.py "${throughput[@]}" || say "throughput FAILED ($?)"
fi
if wants compiled; then
    say "the QueryK step through torch.compile"
    timeout $(t 150) "$py" benchmarks/training_step_profile.py --recipe "$queryk" "${profile[@]}" --compile >/dev/null \
        || say "compiled profile FAILED ($?)"
fi
if wants variants; then
    timeout $(t 60) "$py" benchmarks/training_step_profile.py --recipe "$queryk" "${profile[@]}" --pageable >/dev/null \
        || say "QueryK profile, pageable batch, FAILED ($?)"
    timeout $(t 60) "$py" benchmarks/training_step_profile.py --recipe "$queryk" "${profile[@]}" --amp off >/dev/null \
        || say "QueryK profile, no autocast, FAILED ($?)"
fi
if wants throughput-compiled; then
    say "the same, compiled"
    TORCHINDUCTOR_COMPILE_THREADS=2 timeout $(t 200) "$py" benchmarks/study_throughput.py "${throughput[@]}" --set compile=true \
        || say "compiled throughput FAILED ($?)"
fi
say "done"
ls -l "$out"
