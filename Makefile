# trace-tui — the appliance's entry points.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip
# torch: the CPU wheel (stages extra) resolves from the local constraint where one exists.
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# No pip cache: each install here happens once per machine, and a cache would be a second copy on disk.
export PIP_NO_CACHE_DIR := 1

.PHONY: install test bench appliance lock wheelhouse pin push clean base-image test-gpu-images

$(BIN)/trace-tui: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,stages]' -c appliance/requirements/dev-constraints.txt
	@touch $@

install: $(BIN)/trace-tui  ## a .venv with the package and its dev extras

test: install  ## the import contract (pyproject.toml), then the whole suite
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25 $(PYTEST_ARGS)

bench: install  ## benchmarks, printing ratios against baselines measured in the same run
	$(BIN)/python -m bench

# FLAVOR=cpu|gpu overrides the detection (gpu when Docker has an NVIDIA runtime).
FLAVOR ?= $(shell docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia && echo gpu || echo cpu)

# The release evaluator for the gpu infer/score images: a local bundle (the two archives) or checkout,
# verified against recipes/release.lock.json; empty = fetched from GitHub at the pinned commits.
EVALUATOR_SOURCE ?= $(wildcard ../shared/evaluator)
export EVALUATOR_SOURCE

appliance: install  ## the venv and the three stage images of the detected flavour, plus appliance/images.lock.json
	$(BIN)/python appliance/lock.py wheelhouse $(FLAVOR)
	$(BIN)/trace-tui images build --flavor $(FLAVOR) $(if $(EVALUATOR_SOURCE),--evaluator-source $(EVALUATOR_SOURCE))

lock: install  ## regenerate the hash-pinned requirement locks of FLAVOR (needs the package index; gpu: uv)
	$(PIP) install -q uv
	$(BIN)/python appliance/lock.py lock $(FLAVOR)

test-gpu-images: install  ## maintainer check (not in CI): build the gpu images here and run the gpu stack on CPU
	$(MAKE) appliance FLAVOR=gpu
	TRACE_TUI_GPU_IMAGES=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m gpu_images tests/test_gpu_images.py

wheelhouse:  ## download exactly what the locks of FLAVOR pin into appliance/wheelhouse/FLAVOR
	$(BIN)/python appliance/lock.py wheelhouse $(FLAVOR)

pin:  ## write the base image digests the last build resolved back into appliance/pins.json
	$(BIN)/trace-tui images pin

push:  ## push the locked images to REGISTRY=host:port/ns and record their digests in the lock
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host:port/namespace"; exit 2; }
	$(BIN)/trace-tui images push --registry $(REGISTRY)

base-image:  ## the local Debian base images (for machines whose Docker cannot pull): bookworm, and trixie for vLLM on CPU
	appliance/make-base-image.sh
	appliance/make-base-image.sh trace-tui/debian-base-vllm:trixie "$$($(PYTHON) -c 'import json; print(",".join(json.load(open("appliance/pins.json"))["flavors"]["cpu"]["vllm"]["local_base_packages"]))')"

clean:
	rm -rf $(VENV) build dist src/*.egg-info
