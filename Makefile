# Commands for a fresh machine with Python 3.11+ and make (each creates ./.venv and installs the project when needed):
#   make demo      build the bundled offline demo release into $(DEMO_DATA)/release: manifests/demo + the mirror in
#                  manifests/mirror, no network, seconds (PROFILE=mini: a few rows of each, into release-mini)
#   make test      run the whole test suite on every core (TEST_JOBS=auto: pytest-xdist, one worker per core)
#   make dataset   build the real catalogue (manifests/datasets) from the network into $(MMBU_DATA)/release: the
#                  fetch plan first, then fetch and build with resume; offline it fails fast, one line per host;
#                  PROFILE=paper (default: the paper's ~38.7K rows at the full catalogue), full (every row, into
#                  release-full) or mini (a few rows of each, into release-mini); a release already there is not
#                  replaced by a smaller one unless ALLOW_PARTIAL=1
#   make catalogue the catalogue's coverage against the taxonomy and the paper into $(MMBU_DATA)/catalogue (Markdown, JSON, PNG)
#   make bench     speed/memory benchmarks (by hand, not in CI)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.mmbu-installed
export MMBU_DATA ?= $(CURDIR)/data
DEMO_DATA ?= $(MMBU_DATA)/demo
JOBS   ?= 2
TEST_JOBS ?= auto
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
	$(BIN)/mmbu build --manifests manifests/datasets --data $(MMBU_DATA) --jobs $(JOBS) --profile $(PROFILE) $(if $(ALLOW_PARTIAL),--allow-partial)

catalogue: $(STAMP)
	$(BIN)/mmbu catalogue --out $(MMBU_DATA)/catalogue

# The tests' temporary folders go under one folder of its own, removed when every test passed (a failed test's
# folder is kept, and its place said). Bytecode is cached (git-ignored __pycache__) even where PYTHONDONTWRITEBYTECODE
# is set: else each of the hundreds of Python processes the suite starts (`mmbu` commands, build and eval workers)
# compiles the toolkit's sources again, and each test worker its assertion-rewritten test modules.
test: $(STAMP)
	@unset PYTHONDONTWRITEBYTECODE; base=$$(mktemp -d -t mmbu-tests.XXXXXX); \
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal --basetemp="$$base"; status=$$?; \
	if [ $$status -eq 0 ]; then rm -rf "$$base"; else echo "temporary folders of the failed tests: $$base"; fi; \
	exit $$status

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .setuptools-build *.egg-info
