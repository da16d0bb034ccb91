# One entry point. `make serve` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000
# The model directories served (space-separated): En->De and De->En, so that the bidirectional
# word alignment is on offer (docs/alignment.md), and the En->De software model. A request names a
# model with "model"; naming none, its texts choose between the caption and the software model
# (measured: RESULTS.md, "The software model"): docs/operations.md, "Several models per pair".
MODEL_DIRS ?= models/en-de-align2 models/en-de-software models/de-en-align models/de-en-software models/en-fr
# The translation memories served (space-separated TMX files; empty: none): CLDR's names of countries,
# languages, currencies, time zones, months and weekdays, answered as CLDR writes them (service/memory.py).
MEMORIES ?= memories/cldr-names.tmx memories/debian-terms.tmx
comma := ,
empty :=
space := $(empty) $(empty)
# docs/operations.md, "CPU threads": torch gets the cores minus one, the HTTP event loop keeps one.
CORES := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
OMP_NUM_THREADS ?= $(shell n=$(CORES); [ $$n -gt 1 ] && echo $$((n - 1)) || echo 1)

.PHONY: install serve test mutation clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: a CPU build that lies on local disk; unpinned, pip would fetch a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[onnx,ct2,align,dev]'
	touch $@

install: $(VENV)/.installed

serve: install
	OMP_NUM_THREADS=$(OMP_NUM_THREADS) PHRASAL_MODEL_DIRS='["$(subst $(space),"$(comma)",$(strip $(MODEL_DIRS)))"]' PHRASAL_MEMORIES='$(if $(strip $(MEMORIES)),["$(subst $(space),"$(comma)",$(strip $(MEMORIES)))"],[])' $(PY) -m service --host $(HOST) --port $(PORT)

# What the tests need that pip cannot install (Debian's chromium and docker-compose), with apt-get
# where missing; checked once per virtual environment (the stamp), and again if the script changes.
$(VENV)/.system-packages: tools/system-packages.sh
	@tools/system-packages.sh
	@mkdir -p $(VENV) && touch $@

# Two pytest workers (pytest-xdist), each taking whole files (--dist loadfile), so that a file's
# session-cached models and exports are made once, and one torch thread each: with torch's default
# (a thread per core) two workers ran four spinning OpenMP threads on two cores, 24 CPU-minutes for
# 13; with one, 14 CPU-minutes for under 8 (the suite alone, 2 cores). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
TEST_THREADS ?= 1
test: install $(VENV)/.system-packages
	OMP_NUM_THREADS=$(TEST_THREADS) $(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# Not part of `make test` (tens of minutes on 2 cores): planted bugs and generated mutants of the
# core files against their tests; writes results/mutation.md (tools/mutation.py --help).
mutation: install
	$(PY) tools/mutation.py

clean:
	rm -rf $(VENV)
