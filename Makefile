# The two commands of the README's contract: `make test` and `make demo`.
# Each creates or refreshes .venv on a fresh machine with nothing installed by hand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.dataio-installed

.PHONY: test demo docs fuzz sanitize venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile $(wildcard formats/jpeg/*.c formats/jpeg/*.h) augment/_randaugment_cpu.c augment/_normalize_cpu.c augment/_views_cpu.c augment/views_rows.h augment/vector_clones.h dataio/mixtures/_blend.c dataio/text/_collate.c
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU build of torch from the machine's local file (plain `torch` pulls CUDA).
	$(PIP) install -q torch==2.13.0
	# pillow-simd compiles against libjpeg-turbo; install its headers if missing.
	@test -f /usr/include/jpeglib.h || (apt-get update -qq && apt-get install -y -qq libjpeg62-turbo-dev zlib1g-dev libpng-dev) || true
	# A venv made before the distribution was renamed torch-dataio, or with DALI's CUDA 12 build (both
	# DALI builds install nvidia.dali): those go first.
	$(PIP) uninstall -qq -y dataio nvidia-dali-cuda120 nvidia-libnvcomp-cu12 nvidia-nvimgcodec-cu12 \
		nvidia-nvjpeg-cu12 nvidia-nvjpeg2k-cu12 nvidia-nvtiff-cu12
	# DALI for the tests of its CPU pipelines: with a CPU torch either build runs them, CUDA 13's is the
	# smaller (270 MB of wheels, against 524 MB).
	$(PIP) install -q -e '.[test,bench,dali-cuda13,docs]'
	# tests/test_install.py installs torch-dataio into a fresh venv, offline: torch, pillow, matplotlib
	# and torch-dataio's dependencies as wheels, fetched once here while the index is reachable.
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
		> $(VENV)/dataio-requirements.txt
	$(PIP) download -q --only-binary :all: -d $(VENV)/wheelhouse torch==2.13.0 pillow matplotlib \
		-r $(VENV)/dataio-requirements.txt
	# Clients' own code for tests/clients (open_clip's open_clip_train.main, timm, HF transformers' tokenizers,
	# torchvision's transforms v2, tv_tensors and detection models) into a folder of their own, without their
	# dependencies: torchvision's compiled ops need CUDA torch's libraries, so tests/clients/site gives them a CPU
	# nms and only the client tests put both on PYTHONPATH; the library's own tests see no torchvision.
	rm -rf $(VENV)/clients
	$(PIP) install -q --no-deps --target $(VENV)/clients torchvision==0.28.0 open_clip_torch==3.3.0 timm==1.0.28 \
		transformers==5.25.0 ftfy==6.3.1 wcwidth==0.9.5
	# webdataset 0.2.86, the floor dataio declares and the only version open_clip_torch[training] shares with it, in a
	# folder of its own: tests/clients puts it first on PYTHONPATH to run `dataio bench pairs`'s baseline against it.
	rm -rf $(VENV)/clients-wds0286
	$(PIP) install -q --no-deps --target $(VENV)/clients-wds0286 webdataset==0.2.86
	# pillow-simd must be the last thing installed: matplotlib pulls `pillow`,
	# which shares the PIL package and silently replaces the SIMD build.
	$(PIP) uninstall -q -y pillow pillow-simd
	$(PIP) install -q --no-deps pillow-simd
	$(PY) -m dataio.check_install --strict
	@touch $(STAMP)

# Two pytest workers: most tests wait on subprocesses (torchrun ranks, converters, servers), so one process
# keeps a 2-core machine half idle. Each worker builds the session fixtures it needs in its own folder.
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --durations=15 tests

demo: $(STAMP)
	$(PY) -m dataio demo --out demo-data

# The documentation site into site/ (`.venv/bin/mkdocs serve` to browse it while editing). After changing a
# flag of the CLI, `$(PY) -m dataio.cli_reference` rewrites docs/cli.md (make test fails while it is stale).
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

# A longer fuzzing campaign: 2,000 examples per target (about a minute on 2 cores).
fuzz: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests -m fuzz --hypothesis-profile=long

# The region decoder, RandAugment, normalisation, multi-crop views and padded-text C extensions rebuilt with AddressSanitizer + UndefinedBehaviorSanitizer, their tests and a
# long fuzzing run against them, then the normal build put back (whatever the tests said).
SAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -shared -fPIC
sanitize: $(STAMP)
	$(eval INCLUDE := $(shell $(PY) -c "import sysconfig; print(sysconfig.get_paths()['include'])"))
	$(eval SUFFIX := $(shell $(PY) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"))
	gcc $(SAN_FLAGS) -I$(INCLUDE) augment/_randaugment_cpu.c -o augment/_randaugment_cpu$(SUFFIX)
	gcc $(SAN_FLAGS) -I$(INCLUDE) augment/_normalize_cpu.c -o augment/_normalize_cpu$(SUFFIX)
	gcc $(SAN_FLAGS) -I$(INCLUDE) augment/_views_cpu.c -o augment/_views_cpu$(SUFFIX)
	gcc $(SAN_FLAGS) -I$(INCLUDE) dataio/text/_collate.c -o dataio/text/_collate$(SUFFIX)
	gcc $(SAN_FLAGS) -I$(INCLUDE) formats/jpeg/_jpeg_codec.c formats/jpeg/jpeg_restart.c formats/jpeg/jpeg_splice.c \
		formats/jpeg/rgbx_resize.c formats/jpeg/resize_scalar.c formats/jpeg/resize_avx2.c formats/jpeg/resize_avx512.c \
		formats/jpeg/resize_module.c -ljpeg -o formats/jpeg/_jpeg_codec$(SUFFIX)
	ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
		$(PY) -m pytest -q -p no:cacheprovider tests/augment/test_randaugment_kernel.py tests/images/test_region_decode.py tests/formats/test_jpeg_splice.py tests/formats/test_splice_scan.py \
		tests/images/test_rgbx_resize.py tests/text/test_collate_kernels.py tests/test_fuzz.py \
		tests/images/test_host_normalize.py tests/augment/test_views_kernel.py -k "kernel or normalised or region or decoder or pack or shifts or match or splice or resize or padded or packed or refuses or empty" \
		--hypothesis-profile=long; \
		status=$$?; $(PIP) install -q --no-deps --no-build-isolation -e . && $(PY) -m dataio.check_install --strict; exit $$status

clean:
	rm -rf $(VENV) demo-data site build/api-src
