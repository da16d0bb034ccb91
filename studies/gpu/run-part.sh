#!/usr/bin/env bash
# One part of the En-De study in one lent GPU slot: train, score, align, pack what comes back.
#
#   bash studies/gpu/part1.sh                     # on the device (device tool: carry [".whl"])
#   STUDY_TINY=1 OUT=/tmp/out bash studies/gpu/part1.sh   # the dry run at toy size on a CPU
#
# Reads studies/en-de-partN.json (its time_limit_s, 540 s, is the runner's --time-limit: training
# stops score_reserve_s before it, scoring fits in the rest). Writes under $OUT, as it goes (every
# 60 s) and at the end: partN-results.tar.gz (logs, scores, hypotheses, alignment reports: what is
# committed), partN-parents.tar.gz (the model directories that later parts fine-tune, if any),
# partN.log (this script's output), partN.md (the part's table) and, when the limit stopped runs,
# partN-partial.md (training/study_partial.py: those runs scored where they stopped).
# studies/gpu/README.md says what to do with them.
set -uo pipefail
part=${1:?usage: run-part.sh N}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-$repo/runs/gpu-out}
mkdir -p "$out"
py=${PYTHON:-python3}
tiny=()
[ "${STUDY_TINY:-0}" = 1 ] && tiny=(--tiny)
study=studies/en-de-part$part.json
export PYTHONUNBUFFERED=1
# Eight trainings share 16 host cores: two threads each, not sixteen each fighting over them.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
exec > >(tee -a "$out/part$part.log") 2>&1
echo "== part $part: $(date -u +%FT%TZ) ${tiny[*]}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"

# What the device lacks: rapidfuzz (model/alignments/cognates.py), carried as a wheel in .whl/.
if ! "$py" -c "import rapidfuzz" 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/rapidfuzz-*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
"$py" -c "import torch, sentencepiece, sacrebleu, safetensors, tqdm, rapidfuzz
print('python packages there; torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 3

# Parts 8 and 9 (the recurrent biases) fit a slot only through the Triton kernel: where it cannot
# run (no Triton, or it fails its check against the step loop) stop now rather than spend the slot.
if [ "${NEEDS_BIAS_KERNEL:-0}" = 1 ] && [ -z "${tiny[*]}" ]; then
    "$py" -c "import sys, torch; from model.biases import recurrence_kernel as k
ok = torch.cuda.is_available() and k.available() and k.verified(torch.device('cuda'))
print('recurrent-bias kernel:', f'checked on {torch.cuda.get_device_name()}' if ok else 'NOT usable here, so the part would not fit its slot')
sys.exit(0 if ok else 1)" || exit 5
fi

# A fine-tuning run may start from a model trained in an earlier part, carried here (or committed):
# refuse to retrain it, which would also overwrite its results. A parent this part trains is fine.
# A dry run first trains its part's runs anew (a toy run left by an earlier dry run would be skipped
# as trained, and the dry run would then check nothing of the training), but for such a parent: the
# earlier part's dry run made it.
"$py" - "$study" "$part" "${tiny[@]}" <<'PY' || exit 4
import shutil
import sys
from pathlib import Path
from training.study_spec import is_trained, load_study, run_dir, tiny
here = sys.argv[1]
dry = "--tiny" in sys.argv[3:]
shrink = (lambda spec: tiny(spec)) if dry else (lambda spec: spec)
spec = shrink(load_study(here))
earlier = {(run.name, seed) for number in range(1, int(sys.argv[2]))
           for run, seed in shrink(load_study(Path(here).with_name(f"en-de-part{number}.json"))).jobs()}
parents = {run.init for run in spec.runs if run.init}
if dry:
    for run, seed in spec.jobs():
        if run.name not in parents or (run.name, seed) not in earlier:
            shutil.rmtree(run_dir(spec, run, seed), ignore_errors=True)
carried = [f"{name} seed {seed}" for name in sorted(parents) for seed in spec.run(name).seeds
           if (name, seed) in earlier and not is_trained(spec, spec.run(name), seed)]
if carried:
    sys.exit(f"the parents {', '.join(carried)} are not in {spec.out}: unpack the earlier parts' *-parents.tar.gz "
             "and carry them (studies/gpu/README.md)")
PY

# A returned folder holds at most 8 files: results, parents, log, table, partial table, and up to
# three of the part's trained models (one per run, its lowest seed) for benchmarks and shipping.
pack() {
    "$py" -m training.study_bundle studies/en-de.json "${tiny[@]}" --into "$out" --name "part$part" \
        --models-of "$study" --models 3 >/dev/null
}
(while sleep 60; do pack; done) &
packer=$!
# STUDY_TIME_LIMIT: another limit than the part's (a dry run on a slow, shared CPU needs more).
limit=${STUDY_TIME_LIMIT:-$("$py" -c "import json; print(int(json.load(open('$study'))['time_limit_s']))")}
# What this script may spend in all (SLOT_S): the device command's 600 s, less a margin for the return;
# a dry run is bound by its own limit instead.
slot=${SLOT_S:-590}
[ -n "${tiny[*]}" ] && slot=$((SECONDS + limit + 120))
# The runner stops itself at its limit; timeout is the backstop (a hung child, a hung scorer), and
# never later than the slot's end, so that the pack below still runs.
backstop=$((limit + 30))
[ $((slot - SECONDS - 15)) -lt "$backstop" ] && backstop=$((slot - SECONDS - 15))
timeout --kill-after=5 "$backstop" "$py" -m training.study "$study" "${tiny[@]}" --time-limit "$limit"
rc=$?
# Runs the limit stopped would come back as nothing (their checkpoints stay on the device): score them
# where they stopped, in what is left of the slot, the pack at the end included.
left=$(( slot - SECONDS - 20 ))
if [ "$left" -gt 30 ]; then
    timeout --kill-after=5 "$left" "$py" -m training.study_partial "$study" "${tiny[@]}" --time-limit $((left - 30))
fi
kill "$packer" 2>/dev/null
wait "$packer" 2>/dev/null
"$py" -m training.study "$study" "${tiny[@]}" --report-only >/dev/null   # the part's table, also when cut short
pack
name=$("$py" -c "import json; print(json.load(open('$study'))['name'])")
dir=$("$py" -c "
import sys; from training.study_spec import load_study, tiny
spec = load_study('$study'); print((tiny(spec) if '${tiny[*]}' else spec).out)")
cp "$dir/$name.md" "$out/part$part.md" 2>/dev/null
cp "$dir/$name-partial.md" "$out/part$part-partial.md" 2>/dev/null
echo "== part $part: runner exit $rc, $(date -u +%FT%TZ)"
ls -l "$out"
exit $rc
