# The two commands of the README's contract: `make test` and `make demo`.
# Each creates or refreshes .venv on a fresh machine with nothing installed by hand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.dataio-installed

.PHONY: test demo fuzz venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile dataio/_jpeg_region.c augment/_randaugment_cpu.c
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU build of torch from the machine's local file (plain `torch` pulls CUDA).
	$(PIP) install -q torch==2.13.0
	# pillow-simd compiles against libjpeg-turbo; install its headers if missing.
	@test -f /usr/include/jpeglib.h || (apt-get update -qq && apt-get install -y -qq libjpeg62-turbo-dev zlib1g-dev libpng-dev) || true
	$(PIP) install -q -e '.[test,bench]'
	# pillow-simd must be the last thing installed: matplotlib pulls `pillow`,
	# which shares the PIL package and silently replaces the SIMD build.
	$(PIP) uninstall -q -y pillow pillow-simd
	$(PIP) install -q --no-deps pillow-simd
	$(PY) -m dataio.check_install
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests

demo: $(STAMP)
	$(PY) -m dataio demo --out demo-data

# A longer fuzzing campaign: 2,000 examples per target (about a minute on 2 cores).
fuzz: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests -m fuzz --hypothesis-profile=long

clean:
	rm -rf $(VENV) demo-data
