# trace-tui — the appliance's entry points.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip
# torch: the CPU wheel (stages extra) resolves from the local constraint where one exists.
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install test bench appliance pin push clean base-image

$(BIN)/trace-tui: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,stages]'
	@touch $@

install: $(BIN)/trace-tui  ## a .venv with the package and its dev extras

test: install  ## the whole suite
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

bench: install  ## benchmarks, printing ratios against baselines measured in the same run
	$(BIN)/python -m bench

base-image:  ## the local Debian base image (for machines whose Docker cannot pull)
	appliance/make-base-image.sh

clean:
	rm -rf $(VENV) build dist src/*.egg-info
