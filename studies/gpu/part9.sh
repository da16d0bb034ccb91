#!/usr/bin/env bash
# Part 9 of the En-De study (studies/en-de-part9.json) in one GPU slot; studies/gpu/README.md.
exec bash "$(dirname "$0")/run-part.sh" 9 "$@"
