#!/usr/bin/env bash
# Measures a warm `make cluster-up`: from a stopped cluster, with binaries and
# images already cached, until every node, CoreDNS on each and the default
# StorageClass are ready. Prints the wall time of three runs of a NODES-node
# cluster (default 3, as the e2e suite runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes="${NODES:-3}"
make bin/localcluster >/dev/null
bin/localcluster down >/dev/null        # a running cluster may have another node count
bin/localcluster up --nodes "$nodes" >/dev/null   # warm the caches first
for i in 1 2 3; do
  bin/localcluster down >/dev/null
  start=$(date +%s.%N)
  bin/localcluster up --nodes "$nodes" >/dev/null
  end=$(date +%s.%N)
  awk -v i="$i" -v n="$nodes" -v s="$start" -v e="$end" 'BEGIN { printf "warm cluster-up (%d nodes) run %d: %.1fs\n", n, i, e - s }'
done
