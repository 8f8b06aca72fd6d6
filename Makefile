# The README's test command is `make test`; .ci/run calls it on a clean clone.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

include versions.env

GO ?= go
LOCALCLUSTER := bin/localcluster
LOCAL_KUBECONFIG := $(CURDIR)/.cache/localcluster/kubeconfig
LOCAL_KUBECTL := $(CURDIR)/.cache/localcluster/bin/kubectl
E2E_TIMEOUT ?= 60m
# The e2e suite's output, kept for the summary of failed tests printed last
# (CI shows the end of the output, after the operator's logs and the teardown).
E2E_LOG := $(CURDIR)/.cache/artifacts/e2e/go-test.log
# Parallel e2e tests at once. They mostly wait on etcd and the kubelet, so
# more run than there are cores; tests that stop nodes or the operator call
# framework.Serial instead of t.Parallel and run alone, before the parallel ones.
E2E_PARALLEL ?= 4

# Nodes of a cluster make cluster-up and make demo bring up. The e2e suite,
# the demo test, the lifecycle test and the benches use E2E_NODES, because
# they test spreading over nodes and losing one.
NODES ?= 1
E2E_NODES := 3
# Chart values for the e2e suite's operator (two replicas on two nodes).
E2E_OPERATOR_VALUES := test/e2e/operator-values.yaml
# Extra arguments for helm upgrade in make deploy, such as --values FILE.
HELM_ARGS ?=

# Pinned tools (hack/tools/<tool>/go.mod); the go command builds each once.
CONTROLLER_GEN := $(GO) tool -modfile=hack/tools/controller-gen/go.mod controller-gen
GOLANGCI_LINT := $(GO) tool -modfile=hack/tools/golangci-lint/go.mod golangci-lint
HELM := $(GO) tool -modfile=hack/tools/helm/go.mod helm

# The operator's image. A localhost/ name is never pulled: make image imports
# it into the local cluster's containerd. A registry port in the name is fine;
# a digest is not supported.
IMG ?= localhost/quorumctl/etcd-operator:dev
IMG_NAME = $(lastword $(subst /, ,$(IMG)))
IMG_TAG = $(if $(findstring :,$(IMG_NAME)),$(lastword $(subst :, ,$(IMG_NAME))),latest)
IMG_REPOSITORY = $(if $(findstring :,$(IMG_NAME)),$(patsubst %:$(IMG_TAG),%,$(IMG)),$(IMG))

CHART := charts/etcd-operator
CRD_DIR := $(CHART)/crds
RBAC_ROLE := $(CHART)/files/rbac-role.yaml
RELEASE ?= etcd-operator
RELEASE_NAMESPACE ?= etcd-operator-system
HELM_TIMEOUT ?= 5m

# Prometheus alerting rules the chart's PrometheusRule embeds; promtool checks
# exactly this file. make prometheus builds promtool (and prometheus) from the
# pinned module into the binary cache; the path is asked of the tool, which
# knows the cache layout.
PROMETHEUS_RULES := $(CHART)/files/prometheus-rules.yaml
PROMTOOL = $$($(LOCALCLUSTER) prometheus)/promtool

# Every optional monitoring object of the chart switched on.
HELM_MONITORING_VALUES := --set monitoring.serviceMonitor.enabled=true,monitoring.podMonitor.enabled=true \
  --set monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true

# Go files of the module, for gofmt (the local cluster's state and caches excluded).
GO_FILES = $(shell find . \( -path ./.git -o -path ./.cache -o -path ./bin \) -prune -o -name '*.go' -print)

##@ Local cluster

.PHONY: $(LOCALCLUSTER)
$(LOCALCLUSTER): ## Build the local cluster tool.
	$(GO) build -o $@ ./test/localcluster/cmd/localcluster

.PHONY: cluster-up
cluster-up: $(LOCALCLUSTER) ## Bring the local cluster up with NODES nodes (default 1; idempotent).
	$(LOCALCLUSTER) up --nodes $(NODES)

.PHONY: cluster-down
cluster-down: $(LOCALCLUSTER) ## Stop the local cluster and remove everything it made (idempotent).
	$(LOCALCLUSTER) down

.PHONY: cluster-status
cluster-status: $(LOCALCLUSTER) ## Show the local cluster's components and health.
	$(LOCALCLUSTER) status

##@ Test

.PHONY: test
test: check-large-files verify-generated lint helm-lint check-rules test-unit test-integration test-envtest test-lifecycle test-e2e test-demo ## Everything CI runs: fast checks first, then the tests.

# Every file in the index counts, committed or only staged: a clone fetches
# each one forever, so a build output or a data dump must not get in. No
# tracked file needs more (the largest, the EtcdCluster CRD, is about 200 kB).
MAX_FILE_BYTES := 1048576

.PHONY: check-large-files
check-large-files: ## Fail if a tracked file is over MAX_FILE_BYTES (1 MiB).
	@large="$$(git ls-files --format='%(objectname) %(path)' | \
	  git cat-file --batch-check='%(objectsize) %(rest)' | \
	  awk -v max=$(MAX_FILE_BYTES) '$$1 > max')"; \
	if [ -n "$$large" ]; then \
	  echo "error: these tracked files are over $(MAX_FILE_BYTES) bytes (size in bytes, path);"; \
	  echo "remove them from the index (git rm --cached) and, if they are build outputs, add them to .gitignore:"; \
	  echo "$$large" | sed 's/^/  /'; \
	  exit 1; \
	fi; \
	echo "no tracked file is over $(MAX_FILE_BYTES) bytes"

.PHONY: test-unit
test-unit: ## Unit tests (no cluster), with the race detector; then the state-space test, which is too slow under it and is built without it.
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run TestStateSpace ./internal/controller/etcdcluster/

# Packages with tests that run real etcd processes on loopback; their logs and
# any linearizability visualization are kept under INTEGRATION_ARTIFACTS.
INTEGRATION_PKGS = $(sort $(patsubst %/,./%,$(dir $(shell grep -rl --include='*_test.go' '^//go:build integration' api cmd internal test))))
INTEGRATION_ARTIFACTS := $(CURDIR)/.cache/artifacts/integration

.PHONY: test-integration
test-integration: $(LOCALCLUSTER) ## Tests against real etcd processes on loopback, no cluster: the linearizability checker, the flags per etcd version, cert-manager's controller issuing against a real API server.
	rm -rf $(INTEGRATION_ARTIFACTS); mkdir -p $(INTEGRATION_ARTIFACTS)
	@# The Debian packages some tests run (busybox, iptables) and the cold
	@# builds come first, once, outside the tests' timeout: on a fresh
	@# machine nothing has installed them yet, and cluster-up finds them cached.
	$(LOCALCLUSTER) prepare
	$(GO) test -tags integration -race -count=1 -timeout 20m -artifacts -outputdir=$(INTEGRATION_ARTIFACTS) -v $(INTEGRATION_PKGS) 2>&1 | \
	  tee $(INTEGRATION_ARTIFACTS)/go-test.log || { awk -v KEEP=8 -f hack/test-failures.awk $(INTEGRATION_ARTIFACTS)/go-test.log; exit 1; }

.PHONY: test-lifecycle
test-lifecycle: $(LOCALCLUSTER) ## Up, node stop, down, up, down on 3 nodes: nothing of the cluster may remain.
	@# Cold builds (Kubernetes, cert-manager) happen here, outside the test's
	@# timeout, when this target runs on a fresh machine by itself.
	$(LOCALCLUSTER) prepare
	$(GO) test -tags lifecycle -count=1 -timeout 20m -v -run TestUpDownUpDown ./test/localcluster/

.PHONY: test-e2e
test-e2e: $(LOCALCLUSTER) prometheus monitoring-crds ## Bring a 3-node cluster up, install the chart (two replicas) into a namespace enforcing the restricted Pod Security level, run the e2e suite, bring the cluster down.
	$(LOCALCLUSTER) up --nodes $(E2E_NODES)
	rm -rf $(dir $(E2E_LOG)); mkdir -p $(dir $(E2E_LOG))
	status=0; \
	{ $(LOCAL_KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) create namespace $(RELEASE_NAMESPACE) && \
	  $(LOCAL_KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) label namespace $(RELEASE_NAMESPACE) \
	    pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted && \
	  KUBECONFIG=$(LOCAL_KUBECONFIG) $(MAKE) image deploy HELM_ARGS="--values $(E2E_OPERATOR_VALUES)" && \
	  KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -v ./test/e2e/... 2>&1 | tee $(E2E_LOG); } || status=$$?; \
	if [ $$status -ne 0 ]; then $(LOCALCLUSTER) status || true; \
	  KUBECONFIG=$(LOCAL_KUBECONFIG) $(LOCAL_KUBECTL) logs -n $(RELEASE_NAMESPACE) -l app.kubernetes.io/name=etcd-operator --tail=200 || true; fi; \
	$(LOCALCLUSTER) down || status=1; \
	if [ $$status -ne 0 ] && [ -s $(E2E_LOG) ]; then awk -v KEEP=8 -f hack/test-failures.awk $(E2E_LOG); fi; \
	exit $$status

# The long chaos run (make chaos): how long faults are started for, and the
# seed, drawn and printed when unset; a failed run's seed replays it.
CHAOS_DURATION ?= 30m
CHAOS_SEED ?=
CHAOS_MIN_FAULTS ?= 100

.PHONY: chaos
chaos: $(LOCALCLUSTER) ## The long chaos run (CHAOS_DURATION, default 30m; CHAOS_SEED to replay; at least CHAOS_MIN_FAULTS faults) on a 3-node cluster; prints the report and writes it as JSON under .cache/artifacts/chaos/.
	$(LOCALCLUSTER) up --nodes $(E2E_NODES)
	status=0; \
	{ $(LOCAL_KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) create namespace $(RELEASE_NAMESPACE) && \
	  $(LOCAL_KUBECTL) --kubeconfig $(LOCAL_KUBECONFIG) label namespace $(RELEASE_NAMESPACE) \
	    pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted && \
	  KUBECONFIG=$(LOCAL_KUBECONFIG) $(MAKE) image deploy HELM_ARGS="--values $(E2E_OPERATOR_VALUES)" && \
	  KUBECONFIG=$(LOCAL_KUBECONFIG) CHAOS_SEED=$(CHAOS_SEED) $(GO) run ./test/chaos/cmd/chaos \
	    -duration $(CHAOS_DURATION) -min-faults $(CHAOS_MIN_FAULTS); } || status=$$?; \
	$(LOCALCLUSTER) down || status=1; \
	exit $$status

.PHONY: test-demo
test-demo: $(LOCALCLUSTER) ## make demo (on 3 nodes) from a clean state dir, twice; then tear down.
	$(LOCALCLUSTER) down --purge
	status=0; \
	$(GO) test -tags demo -count=1 -timeout 20m -v ./test/demo/ || status=$$?; \
	$(LOCALCLUSTER) down || status=1; \
	exit $$status

.PHONY: test-envtest
test-envtest: $(LOCALCLUSTER) ## CRD validation (every CEL rule), and the chart's RBAC and admission policy, against the local cluster's real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$$($(LOCALCLUSTER) envtest-assets) $(GO) test -tags envtest -count=1 -v ./api/... ./internal/component/memberstatus/... ./test/rbac/...

##@ Development

.PHONY: generate
generate: ## Generate the API's DeepCopy methods (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRDs into the chart's crds/ and its ClusterRole rules from +kubebuilder:rbac markers.
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	echo "controller-gen crd -> $(CRD_DIR)/"; \
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config="$$tmp/crds"; \
	mkdir -p $(CRD_DIR); \
	rm -f $(CRD_DIR)/*.yaml; \
	cp "$$tmp"/crds/*.yaml $(CRD_DIR)/; \
	echo "controller-gen rbac:roleName=etcd-operator -> $(RBAC_ROLE)"; \
	if [ -d internal/controller ]; then \
	  $(CONTROLLER_GEN) rbac:roleName=etcd-operator paths=./internal/controller/... paths=./internal/setup/... output:rbac:artifacts:config="$$tmp/rbac"; \
	fi; \
	mkdir -p $(dir $(RBAC_ROLE)); \
	{ \
	  echo "# Generated by make manifests from the +kubebuilder:rbac markers in"; \
	  echo "# internal/controller and internal/setup; do not edit. The chart's ClusterRole"; \
	  echo "# and Roles read their rules from this file."; \
	  if [ -s "$$tmp/rbac/role.yaml" ]; then \
	    cat "$$tmp/rbac/role.yaml"; \
	  else \
	    printf '%s\n' '# No markers were found, so the role grants nothing.' '---' \
	      'apiVersion: rbac.authorization.k8s.io/v1' 'kind: ClusterRole' 'metadata:' '  name: etcd-operator' 'rules: []'; \
	  fi; \
	} > $(RBAC_ROLE)

.PHONY: verify-generated
verify-generated: generate manifests ## Fail if generated files are stale (uncommitted changes under api/ or charts/) or Go files are not gofmt-ed.
	@status=0; \
	changed="$$(git status --porcelain --untracked-files=all -- api charts)"; \
	if [ -n "$$changed" ]; then \
	  echo "error: api/ or charts/ differ from the commit after make generate manifests."; \
	  echo "Run make generate manifests and commit the result. Changed files:"; \
	  echo "$$changed" | sed 's/^/  /'; \
	  status=1; \
	fi; \
	unformatted="$$(gofmt -l $(GO_FILES))"; \
	if [ -n "$$unformatted" ]; then \
	  echo "error: these files are not gofmt-ed (run gofmt -w on them):"; \
	  echo "$$unformatted" | sed 's/^/  /'; \
	  status=1; \
	fi; \
	if [ "$$status" -eq 0 ]; then echo "generated files are up to date and Go files are formatted"; fi; \
	exit $$status

.PHONY: lint
lint: ## Run golangci-lint with .golangci.yml (linters and gofmt/goimports checks).
	@# Another checkout's lint (a second worktree) waits for this one rather
	@# than failing it with "parallel golangci-lint is running".
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: helm-lint
helm-lint: ## Lint the chart and render it with its default values and with every monitoring object enabled.
	$(HELM) lint $(CHART)
	$(HELM) lint $(CHART) $(HELM_MONITORING_VALUES)
	$(HELM) template $(RELEASE) $(CHART) --namespace $(RELEASE_NAMESPACE) > /dev/null
	$(HELM) template $(RELEASE) $(CHART) --namespace $(RELEASE_NAMESPACE) $(HELM_MONITORING_VALUES) > /dev/null

.PHONY: check-rules
check-rules: prometheus ## Check the chart's Prometheus alerting rules, and run their unit tests, with promtool.
	$(PROMTOOL) check rules $(PROMETHEUS_RULES)
	$(PROMTOOL) test rules $(PROMETHEUS_RULES:.yaml=_test.yaml)

# The Prometheus Operator's CRDs, generated from its API module at the pinned
# version; test/e2e checks the chart's ServiceMonitor, PodMonitor and
# PrometheusRule against them on the live API server.
MONITORING_CRDS_DIR := .cache/monitoring-crds/$(PROMETHEUS_OPERATOR_APIS_VERSION)

.PHONY: monitoring-crds
monitoring-crds: ## Generate the Prometheus Operator's CRDs (PROMETHEUS_OPERATOR_APIS_VERSION) into .cache/monitoring-crds/.
	@if [ -f $(MONITORING_CRDS_DIR)/.complete ]; then exit 0; fi; \
	echo "controller-gen crd (monitoring.coreos.com $(PROMETHEUS_OPERATOR_APIS_VERSION)) -> $(MONITORING_CRDS_DIR)/"; \
	src="$$(cd hack/tools/controller-gen && $(GO) mod download -json github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$(PROMETHEUS_OPERATOR_APIS_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p')"; \
	test -n "$$src"; \
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	cp -r "$$src" "$$tmp/src"; chmod -R u+w "$$tmp/src"; \
	$(GO) build -modfile=hack/tools/controller-gen/go.mod -o "$$tmp/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen; \
	(cd "$$tmp/src" && GOWORK=off GOFLAGS=-mod=mod "$$tmp/controller-gen" crd paths=./v1 output:crd:artifacts:config="$$tmp/out"); \
	rm -rf $(MONITORING_CRDS_DIR); mkdir -p $(MONITORING_CRDS_DIR); \
	for kind in servicemonitors podmonitors prometheusrules; do cp "$$tmp/out/monitoring.coreos.com_$$kind.yaml" $(MONITORING_CRDS_DIR)/; done; \
	touch $(MONITORING_CRDS_DIR)/.complete; \
	ls $(MONITORING_CRDS_DIR)

.PHONY: prometheus
prometheus: $(LOCALCLUSTER) ## Build upstream prometheus and promtool (PROMETHEUS_VERSION, with Kubernetes discovery) once into the binary cache.
	@$(LOCALCLUSTER) prometheus >/dev/null

##@ Build

.PHONY: build
build: ## Build static binaries into bin/ (the manager, and kubectl-etcd once it exists).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/manager ./cmd/manager
	$(if $(wildcard cmd/kubectl-etcd/*.go),CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/kubectl-etcd ./cmd/kubectl-etcd)

.PHONY: image
image: build ## Build the operator image (IMG) without Docker and import it into the running local cluster.
	$(GO) run ./hack/image --image $(IMG) --binary bin/manager

##@ Deploy

.PHONY: deploy
deploy: ## Install or upgrade the chart with image IMG into the current kubeconfig's cluster.
	$(HELM) upgrade --install $(RELEASE) $(CHART) \
	  --namespace $(RELEASE_NAMESPACE) --create-namespace \
	  --set image.repository=$(IMG_REPOSITORY),image.tag=$(IMG_TAG),image.pullPolicy=IfNotPresent \
	  --set etcdImage.repository=$(ETCD_IMAGE_REPOSITORY) $(HELM_ARGS) \
	  $(if $(wildcard bin/operator-image.id),--set-string 'podAnnotations.etcd\.quorumctl\.io/image-id=$(strip $(file <bin/operator-image.id))') \
	  --wait --timeout $(HELM_TIMEOUT)

.PHONY: undeploy
undeploy: ## Uninstall the chart (the CRDs and their objects stay).
	$(HELM) uninstall $(RELEASE) --namespace $(RELEASE_NAMESPACE) --ignore-not-found --wait --timeout $(HELM_TIMEOUT)

##@ Demo

.PHONY: demo
demo: $(LOCALCLUSTER) build ## From a fresh clone to a healthy 3-member etcd cluster, with the commands to use it.
	$(GO) run ./hack/demo --image $(IMG) --localcluster $(LOCALCLUSTER) --nodes $(NODES)

##@ Measure

# How long make bench watches an idle 3-member cluster for API writes, and
# how many times it bootstraps and scales.
BENCH_IDLE ?= 5m
BENCH_RUNS ?= 3

.PHONY: bench
bench: ## Time apply->Ready (1 and 3 members) and 3->5 BENCH_RUNS times with a timeline of each wait, and count idle API writes for BENCH_IDLE (needs cluster-up NODES=3 and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -runs $(BENCH_RUNS) -idle $(BENCH_IDLE)

.PHONY: bench-selfheal
bench-selfheal: ## Time fault -> healed for a wiped seed, a corrupt member and a lost Memory Pod (needs cluster-up NODES=3 and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -selfheal

NODE_LOSS_BOUND ?= 60

.PHONY: bench-nodeloss
bench-nodeloss: ## Time node stop -> Ready with 3 voters, with selfHeal.nodeLostAfterSeconds NODE_LOSS_BOUND (needs a 3-node cluster-up and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -nodeloss $(NODE_LOSS_BOUND)

SCALE_ONES ?= 100
SCALE_THREES ?= 20
# Three-member clusters put out of the operator's reach (a drop-all NetworkPolicy) while edit latency is timed again; 0 skips it.
SCALE_STARVE ?= 5

.PHONY: bench-scale
bench-scale: ## Create SCALE_ONES one-member and SCALE_THREES three-member clusters; report time to Ready, the operator's memory and CPU, edit latency and idle API writes, and edit latency again with SCALE_STARVE clusters out of reach (needs cluster-up and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -scale-ones $(SCALE_ONES) -scale-threes $(SCALE_THREES) -idle 2m -starve $(SCALE_STARVE)

.PHONY: bench-backup
bench-backup: ## Snapshot throughput to S3 (compression None and Zstd, three runs) vs etcdctl snapshot save, and restore time to a Ready 3-member cluster, for about 1 GiB; BENCH_BACKUP_ARGS passes flags (needs cluster-up, image and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/benchbackup $(BENCH_BACKUP_ARGS)

.PHONY: bench-rollout
bench-rollout: ## Time rolling a 3-member cluster (every member restarted; a minor upgrade) under a writer at 20 writes/s (needs cluster-up and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -rollout

.PHONY: bench-tls
bench-tls: ## Time three requested CA rotations of a 3-member TLS cluster under a writer at 20 writes/s, and the longest write outage of each (needs cluster-up and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -ca-rotation -runs 3

.PHONY: bench-nospace
bench-nospace: ## Time NOSPACE alarm -> writable for a 256 MiB quota, a third of the data deleted, three runs (needs cluster-up and deploy).
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(GO) run ./hack/bench -nospace

.PHONY: bench-cluster-up
bench-cluster-up: ## Time three warm cluster-up runs of a 3-node cluster.
	NODES=$(E2E_NODES) hack/bench/cluster-up.sh

##@ Help

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_\/.-]+:.*##/ {printf "  %-22s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)
