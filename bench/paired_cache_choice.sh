#!/bin/bash
# Paired steady-state QPS: the static cache chosen from the hot-node order (A) against the one
# 164,420 sample searches at open choose (B, the open before hot.trawl), alternating A B B A A B.
cd "$(dirname "$0")/.."
D=.bench-cache/gen-1m
mkdir -p bench/out
for side in A B B A A B; do
  if [ $side = A ]; then extra=""; else extra="--cache-samples 164420"; fi
  target/release/trawl bench $D/idx-R64-L100-pq32 --queries $D/query.fbin --gt $D/gt100.bin \
    --cache-nodes 41105 $extra -L 40 --threads 2 --json bench/out/paired-$side-$RANDOM.json --quiet >/dev/null 2>&1
  echo "$side done $(date +%T)"
done
