#!/usr/bin/env bash
# Part 1 of the En-De study (studies/en-de-part1.json) in one GPU slot; studies/gpu/README.md.
exec bash "$(dirname "$0")/run-part.sh" 1 "$@"
