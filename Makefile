# The two commands of the README. Both install what they need first (idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install demo test wheel-check lint format bench-sampler bench-iteration readme demo-result \
	test-result install-result docs docs-serve

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/install.sh
	./scripts/install.sh
	touch $@

# Main job: ORDER on the offline synthetic benchmark, quick preset (< 5 min on 2 cores).
demo: install
	$(PY) -m avalanche_sets run --preset quick --out runs

# The whole test suite (it builds the documentation site strictly and opens it in Chromium).
test: install
	$(PY) -m pytest -q

# The package as pip installs it (scripts/wheel_check.py; CI runs it after `make test`): the sdist
# and the wheel built and checked by twine, every package file in both, the wheel installed into a
# fresh environment apart from $(VENV), and there, outside the checkout, `avalanche-sets run` on a tiny
# stream and a smoke subset of the tests.
wheel-check: install
	$(PY) -m pip install --quiet "build>=1.2" "twine>=6"
	$(PY) scripts/wheel_check.py

# The documentation site (mkdocs.yml): a strict build into site/, or served with live reload.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

lint: install
	$(VENV)/bin/ruff check avalanche_sets tests benchmarks examples docs/hooks.py
	$(VENV)/bin/ruff format --check avalanche_sets tests benchmarks examples docs/hooks.py

format: install
	$(VENV)/bin/ruff format avalanche_sets tests benchmarks examples docs/hooks.py
	$(VENV)/bin/ruff check --fix avalanche_sets tests benchmarks examples docs/hooks.py

bench-sampler: install
	$(PY) -m benchmarks.sampler_throughput

bench-iteration: install
	$(PY) -m benchmarks.iteration_time

# The README's and the site's numbers and pictures come from benchmarks/results/
# (benchmarks/readme.py): `make readme` rewrites their generated blocks; the *-result targets re-measure one of them
# first (tests/benchmarks/test_readme_numbers.py fails while the README is stale).
readme: install
	$(PY) -m benchmarks.readme update

demo-result: install
	$(PY) -m benchmarks.readme record-demo
	$(PY) -m benchmarks.readme update

test-result: install
	$(PY) -m benchmarks.readme record-tests
	$(PY) -m benchmarks.readme update

install-result: install
	$(PY) -m benchmarks.readme record-install
	$(PY) -m benchmarks.readme update
