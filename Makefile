# The README's test command is `make test`; .ci/run calls it on a clean clone.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

include versions.env

GO ?= go
LOCALCLUSTER := bin/localcluster
E2E_TIMEOUT ?= 60m

##@ Local cluster

.PHONY: $(LOCALCLUSTER)
$(LOCALCLUSTER): ## Build the local cluster tool.
	$(GO) build -o $@ ./test/localcluster/cmd/localcluster

.PHONY: cluster-up
cluster-up: $(LOCALCLUSTER) ## Bring the local cluster up (idempotent).
	$(LOCALCLUSTER) up

.PHONY: cluster-down
cluster-down: $(LOCALCLUSTER) ## Stop the local cluster and remove everything it made (idempotent).
	$(LOCALCLUSTER) down

.PHONY: cluster-status
cluster-status: $(LOCALCLUSTER) ## Show the local cluster's components and health.
	$(LOCALCLUSTER) status

##@ Test

.PHONY: test
test: test-unit test-lifecycle test-e2e ## Everything CI runs.

.PHONY: test-unit
test-unit: ## Unit tests (no cluster).
	$(GO) test -race -count=1 ./...

.PHONY: test-lifecycle
test-lifecycle: $(LOCALCLUSTER) ## Up, down, up, down: nothing of the cluster may remain.
	$(GO) test -tags lifecycle -count=1 -timeout 20m -v -run TestUpDownUpDown ./test/localcluster/

.PHONY: test-e2e
test-e2e: $(LOCALCLUSTER) ## Bring the cluster up, run the e2e suite, bring it down.
	$(LOCALCLUSTER) up
	status=0; \
	$(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/... || status=$$?; \
	$(LOCALCLUSTER) down || status=1; \
	exit $$status

##@ Help

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_\/.-]+:.*##/ {printf "  %-22s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)
