# Two commands for a fresh machine with Python 3.11+ and make:
#   make dataset   build the benchmark release into $(MMBU_DATA)/release (offline: from the bundled mirror)
#   make test      run the whole test suite
# Both create ./.venv and install the project into it when needed.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mmbu-installed
export MMBU_DATA ?= $(CURDIR)/data
export MMBU_MIRROR ?= $(CURDIR)/manifests/mirror
JOBS   ?= 2

.PHONY: dataset test bench venv clean

$(STAMP): pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found %s); set PYTHON=..." % sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

venv: $(STAMP)

dataset: $(STAMP)
	$(BIN)/mmbu build --manifests manifests/datasets --data $(MMBU_DATA) --jobs $(JOBS)

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .setuptools-build *.egg-info
