#!/usr/bin/env bash
# Compares two builds of the services on this machine as interleaved pairs:
# old, new, old, new... each a scripts/bench.sh run (BENCH_RUNS, default
# throughput,latency) with that build's services and the NEW build's
# outbox_bench, so both sides are measured the same way. Then prints, per
# run and figure, the median of each side and new/old. Judge by the CPU
# figures; throughput on a shared machine swings with the neighbours.
#
# Usage: scripts/bench_compare.sh OLD_BIN NEW_BIN [ROUNDS (3)]
#   OLD_BIN, NEW_BIN: bin/ directories of two builds (payment_service,
#   accounting_service, recovery_service; NEW_BIN also outbox_bench).
#        scripts/bench_compare.sh --summary FIGURES.jsonl
#   prints the table again from a kept run's figures.
#        BENCH_RUNS=curve scripts/bench_compare.sh OLD_BIN NEW_BIN [ROUNDS (3)]
#   the load curve instead (scripts/lib/bench_curve.sh): one bench.sh run,
#   one broker, each point ROUNDS times old, new, old, new... on fresh
#   services; both rows per point, then new/old of the system CPU per
#   payment (medians); the CSV and a PNG with both builds in BENCH_OUT.
# Env: as scripts/bench.sh (BENCH_DURATION, BENCH_CONCURRENCY, BENCH_RATE,
#   CURVE_RATES, CURVE_DURATION...);
#   BENCH_COMPARE_KEEP=1 keeps the temp dir with every run's report.
set -euo pipefail

# summarize FIGURES.jsonl: per run and figure, each side's median and new/old.
summarize() {
  local label key
  local KEYS='cpu_us_per_payment_system cpu_us_per_payment_payment cpu_us_per_payment_accounting
    cpu_us_per_payment_broker cpu_us_per_payment_client switches_per_payment_payment
    switches_per_payment_accounting switches_per_payment_broker broker_messages_per_payment
    drain_backlog drain_per_s drain_last_sent_ms
    cpu_floor_us_per_payment ratio_floor_to_actual sustained_sent_per_s create_per_s
    create_p99_ms to_sent_p50_ms to_sent_p99_ms payment_peak_rss_mib accounting_peak_rss_mib'
  for label in $(jq -r .label "$1" | sort -u); do
    echo
    printf '%-32s %12s %12s %8s\n' "$label" old new new/old
    for key in $KEYS; do
      jq -rs --arg run "$label" --arg key "$key" '
        def median: sort | if length == 0 then null
          else (if length % 2 == 1 then .[(length / 2 | floor)]
                else (.[length / 2 - 1] + .[length / 2]) / 2 end) end;
        def side($s): [.[] | select(.label == $run and .side == $s) | .[$key]
                       | select(. != null)] | median;
        [side("old"), side("new")] as [$o, $n]
        | if $o == null and $n == null then empty else
          [$key, ($o // "n/a"), ($n // "n/a"),
           (if ($o | type) == "number" and ($n | type) == "number" and $o != 0
            then (($n / $o * 100 | round) / 100) else "n/a" end)] | @tsv end' \
        "$1" | awk -F'\t' '{ printf "  %-30s %12s %12s %8s\n", $1, $2, $3, $4 }'
    done
  done
}

if [[ ${1:-} == --summary ]]; then
  summarize "$2"
  exit
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($# >= 2)) || { sed -n '2,22p' "$0" >&2; exit 2; }
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd) ROUNDS=${3:-3}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bench_compare: ROUNDS must be a positive number" >&2; exit 2; }
for b in payment_service accounting_service recovery_service; do
  [[ -x $OLD/$b && -x $NEW/$b ]] || { echo "bench_compare: $b missing in $OLD or $NEW" >&2; exit 2; }
done
[[ -x $NEW/outbox_bench ]] || { echo "bench_compare: $NEW/outbox_bench is missing" >&2; exit 2; }
RUNS=${BENCH_RUNS:-throughput,latency}
if [[ ,$RUNS, == *,curve,* && $RUNS != curve ]]; then
  echo "bench_compare: the curve is compared alone (BENCH_RUNS=curve)" >&2
  exit 2
fi
command -v jq >/dev/null || bash "$ROOT/scripts/install_deps.sh"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench_compare.XXXXXX")
cleanup() { [[ ${BENCH_COMPARE_KEEP:-0} == 1 ]] && echo "kept $WORK" >&2 || rm -rf "$WORK"; }
trap cleanup EXIT

# A build dir per side: its services, the new outbox_bench.
for side in old new; do
  mkdir -p "$WORK/$side/bin"
  src=$OLD
  [[ $side == new ]] && src=$NEW
  for b in payment_service accounting_service recovery_service; do ln -s "$src/$b" "$WORK/$side/bin/$b"; done
  ln -s "$NEW/outbox_bench" "$WORK/$side/bin/outbox_bench"
done

if [[ $RUNS == curve ]]; then
  # Interleaved point by point inside one bench.sh run (CURVE_BUILDS).
  echo "old: $OLD"
  echo "new: $NEW"
  BENCH_SKIP_BUILD=1 BENCH_BUILD_DIR="$WORK/new" BENCH_RUNS=curve CURVE_ROUNDS="$ROUNDS" \
    CURVE_BUILDS="old=$WORK/old/bin,new=$WORK/new/bin" "$ROOT/scripts/bench.sh"
  exit
fi

: >"$WORK/figures.jsonl"
for ((round = 1; round <= ROUNDS; round++)); do
  for side in old new; do
    echo "bench_compare: round $round/$ROUNDS, $side" >&2
    BENCH_SKIP_BUILD=1 BENCH_BUILD_DIR="$WORK/$side" BENCH_JSON=1 \
      BENCH_RUNS="$RUNS" \
      "$ROOT/scripts/bench.sh" >"$WORK/$side.$round.txt"
    grep '^{' "$WORK/$side.$round.txt" | jq -c --arg side "$side" '. + {side: $side}' \
      >>"$WORK/figures.jsonl"
  done
done
echo "old: $OLD"
echo "new: $NEW"
echo "$ROUNDS interleaved rounds; median of each side"
summarize "$WORK/figures.jsonl"
