#!/usr/bin/env bash
# Measures a warm `make cluster-up`: from a stopped cluster, with binaries and
# images already cached, until the node, CoreDNS and the default StorageClass
# are ready. Prints the wall time of three runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
make bin/localcluster >/dev/null
bin/localcluster up >/dev/null   # warm the caches first
for i in 1 2 3; do
  bin/localcluster down >/dev/null
  start=$(date +%s.%N)
  bin/localcluster up >/dev/null
  end=$(date +%s.%N)
  awk -v i="$i" -v s="$start" -v e="$end" 'BEGIN { printf "warm cluster-up run %d: %.1fs\n", i, e - s }'
done
