#!/usr/bin/env bash
# Issue 30's GPU measurements in one command (about 5 minutes on an H100): every step under its own
# `timeout`, results written to $OUT as they come, so a step that runs out of time costs only itself.
#
#   1. setup: the carried wheels (.whl/, made here by `python benchmarks/gpu/wheels.py`) where the
#      image lacks fastapi / pydantic / uvicorn / CTranslate2; CTranslate2 4.8 is built against
#      CUDA 12's cuBLAS, the image has CUDA 13's: libcublas(Lt).so.12 links to the .so.13 ones.
#   2. the engine grid (benchmarks/engines.py): eager torch fp32/fp16, static + CUDA graphs fp32/fp16
#      (what the service runs on CUDA), CTranslate2 float16 with one translate_batch per batch;
#      beam 5, batch 1/32/128; agreement with eager fp32 (fp32 graphs must be 1.000).
#   3. load through HTTP (benchmarks/load.py): throughput and p50/p99 at 1, 16, 64, 256 clients, the
#      torch backend (static decoding + CUDA graphs, the CUDA default) and the ct2 backend (float16);
#      the clients in a quarter of the cores' processes (4 here), with the server process's CPU time a
#      request and the busiest client process's CPU use (which of the two bounds a level).
#   4. QueryK heterogeneous 1-2-3 against vanilla in our engine (graphs, fp16), random weights at the
#      bundled size (benchmarks/engines.py --sizes random,queryk-random): results/variants_cuda.md.
#   5. the CUDA tests: static + graph replay equals the eager search for every family, no step
#      synchronises (tests/model/test_static_decoding.py, test_static_step_host_reads.py).
#   6. (STEPS=profile) where a graph step's time goes at batch 1 and 128 (benchmarks/decode_step_profile.py):
#      kernels a step, their device time, how busy the device is; results/decode_step_profile_cuda.md.
#   7. (STEPS=compiled) the graphs with the step through torch.compile (model/decoding/compiled_step.py:
#      inductor's fused kernels in each replay) beside the graphs as the service runs them and CTranslate2,
#      bundled model, the grid's batch sizes: results/engines_cuda.md, agreement with eager fp32.
#
# On the device machine (from the repository root, .whl carried):
#   bash benchmarks/gpu/serving.sh
# The repository (~56 MiB) and the wheels (~31 MiB) exceed the 64 MiB a device call carries; what this
# script never reads is set aside here for the call, and put back after it:
#   python tools/device_tree.py aside --for serving && python tools/device_tree.py size --carry .whl
#   ... the device call: command `bash benchmarks/gpu/serving.sh`, carry [".whl"] ...
#   python tools/device_tree.py restore
# A shorter slot: STEPS names the steps to run (default grid,variants,load,tests), ENGINES and BATCH_SIZES
# narrow the grid, e.g. STEPS=grid,tests ENGINES=torch-fp16,torch-fp16-graphs,ct2-fp16 BATCH_SIZES=32,128.
# A CPU dry run at tiny scale (checks the plumbing, not the numbers; CPU engines instead):
#   DEVICE=cpu SENTENCES=8 CLIENTS=1,2 DURATION=1 TIMEOUT_SCALE=4 OUT=/tmp/serving-dry PYTHON=.venv/bin/python bash benchmarks/gpu/serving.sh
set -u
DEVICE=${DEVICE:-cuda}
SENTENCES=${SENTENCES:-256}
CLIENTS=${CLIENTS:-1,16,64,256}
DURATION=${DURATION:-8}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-results/gpu-serving}
# Multiplies every step's time limit (the limits fit an H100; a CPU dry run needs more).
SCALE=${TIMEOUT_SCALE:-1}
STEPS=${STEPS:-grid,variants,load,tests}
VARIANT_SENTENCES=${VARIANT_SENTENCES:-64}
BATCH_SIZES=${BATCH_SIZES:-1,32,128}
wants() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
t() { echo $(( $1 * SCALE )); }
mkdir -p "$OUT"
LOG="$OUT/log.txt"
WORK=$(mktemp -d /tmp/serving-XXXXXX)
export PYTHONUNBUFFERED=1
step() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }

step "setup on $DEVICE"
if ! "$PYTHON" -c "import fastapi, pydantic_settings, uvicorn, ctranslate2" 2>/dev/null; then
  timeout $(t 90) "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >>"$LOG" 2>&1 || step "wheel install FAILED"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ "$DEVICE" = cuda ]; then
  mkdir -p /tmp/cublas12
  for lib in libcublas libcublasLt; do
    found=$(find /usr/local /opt /usr/lib -name "$lib.so.13" 2>/dev/null | head -1)
    [ -n "$found" ] && ln -sf "$found" "/tmp/cublas12/$lib.so.12" && echo "$lib.so.12 -> $found" >>"$LOG"
  done
  export LD_LIBRARY_PATH=/tmp/cublas12${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$LOG" 2>&1
  ENGINES=${ENGINES:-torch,torch-fp16,torch-graphs,torch-fp16-graphs,ct2-fp16}
  VARIANT_ENGINES=${VARIANT_ENGINES:-torch-fp16-graphs}
  COMPILED_ENGINES=${COMPILED_ENGINES:-torch,torch-fp16-graphs,torch-fp16-graphs-compiled,ct2-fp16}
else
  ENGINES=${ENGINES:-torch,torch-static,ct2}
  VARIANT_ENGINES=${VARIANT_ENGINES:-torch-static}
  COMPILED_ENGINES=${COMPILED_ENGINES:-torch,torch-static,torch-static-compiled}
fi
"$PYTHON" -c "import torch, ctranslate2; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'ctranslate2', ctranslate2.__version__, 'ct2 cuda devices', ctranslate2.get_cuda_device_count())" >>"$LOG" 2>&1

if wants grid; then
  step "engine grid: $ENGINES"
  timeout $(t 170) "$PYTHON" benchmarks/engines.py --device "$DEVICE" --sizes bundled --engines "$ENGINES" \
    --sentences "$SENTENCES" --beams 5 --batch-sizes "$BATCH_SIZES" --work-dir "$WORK/engines" \
    --results "$OUT/engines_$DEVICE.md" --json "$OUT/engines_$DEVICE.json" >>"$LOG" 2>&1 || step "engine grid FAILED or timed out ($?)"
fi

if wants profile; then
  # Batch 1 also with eager steps: the same kernels launched one by one (and a check that the trace sees
  # the kernels of graph replays: with graphs it must count about as many a step).
  for run in "1 on" "1 off" "128 on"; do
    set -- $run
    step "decoding step profile, batch $1, graphs $2"
    timeout $(t 90) "$PYTHON" benchmarks/decode_step_profile.py --device "$DEVICE" --batch-size $1 --graphs $2 \
      --sentences $(( $1 == 1 ? 32 : 128 )) --dtype "$( [ "$DEVICE" = cuda ] && echo float16 || echo float32 )" \
      --out "$OUT/decode_step_profile_$DEVICE.md" >>"$LOG" 2>&1 || step "profile at batch $1 FAILED or timed out ($?)"
  done
fi

if wants compiled; then
  # The compiled engine compiles its step at its first search (a minute or two), then captures as the other.
  step "compiled step: $COMPILED_ENGINES"
  timeout $(t 300) "$PYTHON" benchmarks/engines.py --device "$DEVICE" --sizes bundled --engines "$COMPILED_ENGINES" \
    --sentences "$SENTENCES" --beams 5 --batch-sizes "$BATCH_SIZES" --work-dir "$WORK/compiled" \
    --results "$OUT/engines_$DEVICE.md" --json "$OUT/engines_compiled_$DEVICE.json" >>"$LOG" 2>&1 \
    || step "compiled step FAILED or timed out ($?)"
fi

if wants variants; then
  # QueryK heterogeneous 1-2-3 against vanilla in our engine (target: <= 1.5x the time): both with
  # random weights at the bundled size, so that both decode every sentence to its length limit.
  step "QueryK against vanilla: $VARIANT_ENGINES"
  timeout $(t 100) "$PYTHON" benchmarks/engines.py --device "$DEVICE" --sizes random,queryk-random \
    --engines "$VARIANT_ENGINES" --sentences "$VARIANT_SENTENCES" --beams 5 --batch-sizes "$BATCH_SIZES" \
    --work-dir "$WORK/variants" --results "$OUT/variants_$DEVICE.md" >>"$LOG" 2>&1 \
    || step "QueryK against vanilla FAILED or timed out ($?)"
fi

if wants load; then
  step "load: torch backend (static decoding, CUDA graphs on CUDA)"
  # 190 s: start-up warms, for the default request and the one with word alignments, every batch
  # size, source width up to 64 and target rung those widths reach (98 searches, capturing their
  # graphs; TorchRuntime.warmup logs the time), then four client levels of DURATION + 3 s.
  timeout $(t 190) "$PYTHON" benchmarks/load.py --serve --batching on --device "$DEVICE" --label "torch, static decoding" \
    --server-env PHRASAL_STATIC_DECODING=on --clients "$CLIENTS" --duration "$DURATION" --warmup 3 \
    --out "$OUT/load_$DEVICE.md" >>"$LOG" 2>&1 || step "torch load FAILED or timed out ($?)"

  step "load: ct2 backend (float16)"
  timeout $(t 60) "$PYTHON" -m export ct2 models/en-de "$WORK/ct2-float16" --quantization float16 --device "$DEVICE" \
    --verify-sentences 100 >>"$LOG" 2>&1 || step "ct2 export FAILED ($?)"
  timeout $(t 80) "$PYTHON" benchmarks/load.py --serve --batching on --device "$DEVICE" --label "ct2 float16" \
    --server-env PHRASAL_BACKEND=ct2 --server-env "PHRASAL_EXPORT_DIRS=[\"$WORK/ct2-float16\"]" \
    --clients "$CLIENTS" --duration "$DURATION" --warmup 3 --out "$OUT/load_$DEVICE.md" >>"$LOG" 2>&1 \
    || step "ct2 load FAILED or timed out ($?)"
fi

if [ "$DEVICE" = cuda ] && wants tests; then
  step "CUDA tests"
  timeout $(t 150) "$PYTHON" -m pytest -q -p no:cacheprovider tests/model/test_static_decoding.py \
    tests/model/test_static_step_host_reads.py -k "cuda" >"$OUT/tests.txt" 2>&1 || step "CUDA tests FAILED or timed out ($?)"
fi
step "done"
rm -rf "$WORK"
