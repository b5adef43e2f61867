# Commands for a fresh machine with Python 3.11+ and make (each creates ./.venv and installs the project when needed):
#   make demo      build the bundled offline demo release into $(DEMO_DATA)/release: manifests/demo + the mirror in
#                  manifests/mirror, no network, seconds (PROFILE=mini: a few rows of each, into release-mini)
#   make test      run the whole test suite
#   make dataset   build the real catalogue (manifests/datasets) from the network into $(MMBU_DATA)/release: the
#                  fetch plan first, then fetch and build with resume; offline it fails fast, one line per dataset;
#                  PROFILE=paper (default: the paper's ~38.7K rows at the full catalogue), full (every row, into
#                  release-full) or mini (a few rows of each, into release-mini)
#   make catalogue the catalogue's coverage against the taxonomy and the paper into $(MMBU_DATA)/catalogue (Markdown, JSON, PNG)
#   make bench     speed/memory benchmarks (by hand, not in CI)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mmbu-installed
export MMBU_DATA ?= $(CURDIR)/data
DEMO_DATA ?= $(MMBU_DATA)/demo
JOBS   ?= 2
PROFILE ?= paper

.PHONY: demo dataset catalogue test bench venv clean

$(STAMP): pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found %s); set PYTHON=..." % sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/mmbu build --manifests manifests/demo --mirror manifests/mirror --data $(DEMO_DATA) --jobs $(JOBS) --profile $(PROFILE)

dataset: $(STAMP)
	$(BIN)/mmbu build --manifests manifests/datasets --data $(MMBU_DATA) --jobs $(JOBS) --profile $(PROFILE)

catalogue: $(STAMP)
	$(BIN)/mmbu catalogue --out $(MMBU_DATA)/catalogue

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .setuptools-build *.egg-info
