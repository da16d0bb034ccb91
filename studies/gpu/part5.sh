#!/usr/bin/env bash
# Part 5 of the En-De study (studies/en-de-part5.json) in one GPU slot; studies/gpu/README.md.
# The recurrent biases need their CUDA kernel to fit (run-part.sh checks it first).
NEEDS_BIAS_KERNEL=1 exec bash "$(dirname "$0")/run-part.sh" 5 "$@"
