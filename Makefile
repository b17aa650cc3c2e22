# The two commands: `make demo` and `make test`. Each creates the venv when missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The extras installed with the package: `make test EXTRAS=test,examples` adds the
# real-library studies' dependencies (CI does); one stamp per set, so changing it reinstalls.
EXTRAS ?= test
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: demo test install bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python scripts/bench.py --quick

clean:
	rm -rf $(VENV) .venv312 build *.egg-info
