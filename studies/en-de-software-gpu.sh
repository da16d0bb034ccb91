#!/usr/bin/env bash
# One command on a lent GPU machine (the device tool's `run`, timeout_s 600): train and score the
# software study part studies/en-de-software.json (vanilla, QueryK het. 1-2-3, QueryK interleaved,
# three side by side on one GPU) for at most STUDY_TIME_LIMIT seconds, then copy back what a
# report needs: the study table, the logs and scores, and the vanilla model (in pieces of at most
# 15 MiB: the tool returns 8 files of 16 MiB at most).
#
#     bash studies/en-de-software-gpu.sh                      # on the device: run(command=...)
#     STUDY=studies/en-de-software-cpu-smoke.json PYTHON=.venv/bin/python OUT=/tmp/out \
#         bash studies/en-de-software-gpu.sh
#                                                             # the CPU dry run of the same steps
#
# The device image has torch, sentencepiece, sacrebleu, safetensors and tqdm (all training needs), so
# the call carries nothing: the repository alone must fit the 64 MiB a call takes (`python
# tools/device_tree.py size`: 59.9 MiB on 2026-11-28; `python tools/device_tree.py aside --for software`
# first, then `restore` after, leaves 34.7 MiB; this part reads data/debian_catalogs' splits and data/cldr_names).
# A study cut by the time limit keeps its checkpoints on that machine only: rerun on the same warm
# machine to continue, or report it as partial (the table says which runs finished).
set -euo pipefail
STUDY=${STUDY:-studies/en-de-software.json}
STUDY_TIME_LIMIT=${STUDY_TIME_LIMIT:-540}
OUT=${OUT:?OUT must name the folder whose files come back}
PYTHON=${PYTHON:-$(command -v python3)}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1 || echo "no GPU" > "$OUT/device.txt"
read -r study_out study_name < <("$PYTHON" -c "import sys; from training.study_spec import load_study; s = load_study(sys.argv[1]); print(s.out, s.name)" "$STUDY")
# A dry run (another study than the GPU one) trains anew: runs left by an earlier dry run would be
# skipped as trained, and it would check nothing of training. The GPU study keeps what a cut-short
# call left on a warm machine, to continue it.
if [ "$STUDY" != studies/en-de-software.json ]; then rm -rf "$study_out"; fi
status=0
"$PYTHON" -m training.study "$STUDY" --time-limit "$STUDY_TIME_LIMIT" 2>&1 | tee "$OUT/study.log" || status=$?
# The report is OUT/NAME.md and OUT/NAME.json (training/study.py); its absence is a failure of this command.
cp "$study_out/$study_name.md" "$study_out/$study_name.json" "$OUT/" || status=1
# Scores, hypotheses and training logs of every run (small); the checkpoints stay behind.
(cd "$study_out" && find . \( -path '*/eval/*' -o -name log.jsonl -o -name train.out \) -print0 \
    | tar --null -czf "$OUT/runs.tar.gz" --files-from=-)
model="$study_out/vanilla/seed1/model"
if [ -f "$model/manifest.json" ]; then
    tar -czf - -C "$(dirname "$model")" model | split -b 15M -d - "$OUT/vanilla-model.tar.gz.part"
fi
ls -la "$OUT"
exit "$status"
