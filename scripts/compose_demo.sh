#!/usr/bin/env bash
# The docker-compose environment, end to end: what the outbox does, as an
# operator sees it in Prometheus and Alertmanager.
#
#   1. up       makes the local stand-in images when ../shared/docker/local-images.sh
#               exists (a machine without Docker Hub), a fresh throwaway CA, server
#               certificate and API/ops tokens in certs/compose/ (git-ignored; mounted
#               read-only: gRPC runs with TLS and tokens), then `docker-compose up -d --build`
#               (RabbitMQ 4.0, the three services, the console, Prometheus, Alertmanager;
#               the images on Debian DEBIAN_RELEASE) and waits until every container's
#               healthcheck passes. The operator's console answers at CONSOLE (HTTPS,
#               the compose CA): a GetStats through it with the ops token, and refused
#               without one.
#   2. healthy  build/bin/outbox_demo (built on the host with scripts/build.sh if
#               missing) creates DEMO_PAYMENTS payments through the published loopback
#               ports and waits until all are SENT with one voucher each.
#   3. outage   accounting_service's container is stopped for DEMO_OUTAGE, far longer
#               than the retry budget (RETRY_BASE_DELAY=1s, RETRY_MAX_ATTEMPTS=3 here),
#               while DEMO_OUTAGE_PAYMENTS payments wait as SENDING. recovery_service
#               holds re-publishing (no attempt spent) and raises OutboxConsumerDown at
#               Alertmanager; Prometheus's rule OutboxServiceDown fires too (the
#               accounting target is down). The outage lasts until both have been seen at
#               Alertmanager's API (at most DEMO_OUTAGE_MAX). Headless Chromium takes a
#               screenshot of Alertmanager's page and checks it names the alert, and one
#               of Prometheus's alerts page. The console's overview, signed in with the
#               ops token in headless Chromium (selenium), must show the outage's rows
#               SENDING: console-outage.png.
#   4. back     accounting_service is started again: every payment turns SENT, the
#               alerts resolve; a screenshot of Prometheus's graph of the payment rate;
#               outbox_check reads both databases from their volumes. The SLO's
#               burn-rate alert (OutboxSentLatencyBudgetBurn) fires too, rightly: the
#               outage's payments took far over 5 s to turn SENT. It fires a scrape and
#               an evaluation after the drain, often once the others have resolved, so
#               the script waits for it (at most 90 s). It is a lasting alert: it stays
#               while its short window holds those payments, 5 min after the drain for
#               the critical one and 30 min for the warning one, so it is reported
#               apart, with when each will resolve, and its end is not waited for.
#   5. report   payments, SENT, vouchers, duplicates, lost, alerts fired and resolved,
#               the checker's verdict; then `docker-compose down -v`.
#
#   scripts/compose_demo.sh        DEMO_OUTAGE=90s KEEP_UP=1 scripts/compose_demo.sh
#
# Env: DEMO_PAYMENTS (300), DEMO_OUTAGE_PAYMENTS (200), DEMO_OUTAGE (45s: whole
# seconds, the least time accounting stays down), DEMO_OUTAGE_MAX (180s),
# DEMO_OUT (a new /tmp/outbox-compose-demo.XXXXXX: screenshots, alert JSON, logs),
# KEEP_UP=1 leaves the containers and volumes up, COMPOSE_PROJECT_NAME (outboxdemo),
# RABBITMQ_PASSWORD and the three *_BROKER_PASSWORD (random), RETRY_BASE_DELAY (1s),
# RETRY_MAX_ATTEMPTS (3), BUILD_DIR (build), DEBIAN_RELEASE (12: the services' and the
# console's images on Debian 12; 13 builds them on Debian 13). The published ports
# (docker-compose.yml) must be free.
# Exit status 0 only if every payment is SENT with one voucher, none lost or
# duplicated, nothing FAILED, both alerts fired and resolved, the SLO's alert
# fired (when the outage's payments are over 6 % of all), the console
# answered, the screenshots show what they should, and outbox_check is OK.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=compose_demo
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"  # seconds, message_keys

PAYMENTS=${DEMO_PAYMENTS:-300}
OUTAGE_PAYMENTS=${DEMO_OUTAGE_PAYMENTS:-200}
OUTAGE=$(seconds "${DEMO_OUTAGE:-45s}" DEMO_OUTAGE 45s)
OUTAGE_MAX=$(seconds "${DEMO_OUTAGE_MAX:-180s}" DEMO_OUTAGE_MAX 180s)
OUT=${DEMO_OUT:-$(mktemp -d -t outbox-compose-demo.XXXXXX)}
mkdir -p "$OUT"
BIN=$ROOT/${BUILD_DIR:-build}/bin
AM=http://127.0.0.1:9093
PROM=http://127.0.0.1:9090
RECOVERY_METRICS=http://127.0.0.1:9103/metrics
CONSOLE=https://127.0.0.1:8443/
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-outboxdemo}
export RABBITMQ_PASSWORD=${RABBITMQ_PASSWORD:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
for p in PAYMENT_BROKER_PASSWORD ACCOUNTING_BROKER_PASSWORD RECOVERY_BROKER_PASSWORD; do
  [[ -n ${!p:-} ]] || export "$p=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
done
export RETRY_BASE_DELAY=${RETRY_BASE_DELAY:-1s} RETRY_MAX_ATTEMPTS=${RETRY_MAX_ATTEMPTS:-3}
export RECOVERY_HOUSEKEEPING_EVERY=${RECOVERY_HOUSEKEEPING_EVERY:-1s}
export DEBIAN_RELEASE=${DEBIAN_RELEASE:-12}
[[ $DEBIAN_RELEASE == 12 || $DEBIAN_RELEASE == 13 ]] || { echo "DEBIAN_RELEASE is 12 or 13, not $DEBIAN_RELEASE" >&2; exit 2; }

say() { echo "$SCRIPT: $*"; }
die() { echo "$SCRIPT: $*" >&2; exit 1; }

# --- tools: the stand-in images, docker-compose, Chromium, jq, curl, the host client ---
if [[ -e $ROOT/../shared/docker/local-images.sh ]]; then
  say "making the local images (../shared/docker/local-images.sh)"
  bash "$ROOT/../shared/docker/local-images.sh"
fi
command -v docker-compose >/dev/null || die "docker-compose is not installed"
docker info >/dev/null 2>&1 || die "no Docker daemon answers"
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v jq >/dev/null || missing+=(jq)
command -v curl >/dev/null || missing+=(curl)
# the console's screenshot signs in through Debian's chromedriver and python3-selenium
[[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
/usr/bin/python3 -c 'import selenium' 2>/dev/null || missing+=(python3-selenium)
if ((${#missing[@]} > 0)); then
  say "installing ${missing[*]}"
  SUDO=()
  [[ $(id -u) == 0 ]] || SUDO=(sudo)
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}" >"$OUT/apt.log" 2>&1 || die "apt-get install ${missing[*]} failed: $OUT/apt.log"
fi
if [[ ! -x $BIN/outbox_demo ]]; then
  say "building the host client (scripts/build.sh)"
  BUILD_DIR=${BUILD_DIR:-build} bash scripts/build.sh
fi
[[ -x $BIN/outbox_demo ]] || die "$BIN/outbox_demo is missing"

busy=()
for port in 5672 15672 50051 50052 50053 9101 9102 9103 9090 9093 8443; do
  (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && busy+=("$port")
done
((${#busy[@]} == 0)) || die "ports already in use on 127.0.0.1: ${busy[*]} (another docker-compose up?)"

# --- helpers ---
dc() { docker-compose "$@"; }
# shellcheck source=SCRIPTDIR/lib/compose.sh
source "$ROOT/scripts/lib/compose.sh"  # container_secrets, health, await_healthy (through dc)
CERTS=$ROOT/certs/compose
demo() {
  "$BIN/outbox_demo" --payment_addr=127.0.0.1:50051 --accounting_addr=127.0.0.1:50052 \
    --tls_ca_file="$CERTS/ca.pem" --token_file="$CERTS/api.token" "$@"
}
# metric SERIES: recovery_service's current value of a series, 0 if absent.
metric() {
  curl -s "$RECOVERY_METRICS" |
    awk -v n="$1" '!found && index($0, n " ") == 1 { print $NF + 0; found = 1 } END { if (!found) print 0 }'
}
# am_alerts: active alerts at Alertmanager as "name (from)" lines, sorted.
am_alerts() {
  curl -s "$AM/api/v2/alerts?active=true&silenced=false&inhibited=false" |
    jq -r '.[] | "\(.labels.alertname) (\(.labels.service // .labels.source // "?"))"' | sort
}
am_has() { am_alerts | grep "^$1 ($2)$" >/dev/null; }  # no -q: an early exit would fail the pipe (pipefail)
# The SLO's burn-rate alert outlives the incident by design (its short window,
# rules.yml); the others must resolve once accounting is back.
LASTING_ALERT=OutboxSentLatencyBudgetBurn
am_transient() { am_alerts | { grep -v "^$LASTING_ALERT (" || true; }; }
# am_lasting: the lasting alert's active severities with when each ends, if firing.
am_lasting() {
  curl -s "$AM/api/v2/alerts?active=true&silenced=false&inhibited=false" |
    jq -r --arg name "$LASTING_ALERT" '[.[] | select(.labels.alertname == $name) |
      "\(.labels.severity) (window \(.labels.window // "?"): resolves once its short window, " +
      (if .labels.severity == "critical" then "5 min" else "30 min" end) +
      ", no longer holds the outage'"'"'s slow payments)"] | unique | join("; ")'
}
chrome() {
  local profile
  profile=$(mktemp -d)
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --virtual-time-budget=5000 --window-size=1400,900 "$@" \
    2>>"$OUT/chromium.log"
  rm -rf "$profile"
}
# screenshot FILE URL: a PNG of the page after its scripts ran.
# Chromium can exit non-zero after writing the picture: the file decides.
screenshot() { rm -f "$OUT/$1"; chrome --screenshot="$OUT/$1" "$2" >/dev/null || true; [[ -s $OUT/$1 ]]; }
# console_stats [CURL FLAG...]: GetStats through the console (HTTPS, checked against
# the compose CA) as "HTTP-STATUS BODY" (status 000: no answer).
console_stats() {
  local out
  out=$(curl -s --cacert "$CERTS/ca.pem" -w '\n%{http_code}' -H 'Content-Type: application/json' \
    "$@" -d '{}' "${CONSOLE}ops.v1.OutboxOps/GetStats") || true
  printf '%s %s\n' "${out##*$'\n'}" "$(sed '$d' <<<"$out" | tr -d '\n')"
}
# ops_token_header: the ops token's header line, for curl -H @<(...) (never in ps).
ops_token_header() { printf 'Authorization: Bearer %s\n' "$(<"$CERTS/ops.token")"; }
# console_shot NAME: the console's overview signed in with the ops token (console/
# screenshots.py's steps in console/headless.py's chromium) as $OUT/console-NAME.png;
# prints its cards as "label: value" lines. The browser trusts the console's own
# key only (its SPKI), whose chain curl has checked against the compose CA.
console_shot() {
  local spki
  spki=$(openssl x509 -in "$CERTS/server.pem" -pubkey -noout | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64)
  /usr/bin/python3 - "$CONSOLE" "$CERTS/ops.token" "$OUT" "$1" "$spki" 2>>"$OUT/chromium.log" <<'PY'
import sys
sys.path.insert(0, "console")
import headless  # noqa: E402
import screenshots  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

url, token_file, outdir, name, spki = sys.argv[1:]


class PinnedOptions(headless.Options):
    def __init__(self):
        super().__init__()
        self.add_argument("--ignore-certificate-errors-spki-list=" + spki)


headless.Options = PinnedOptions
with open(token_file) as f:
    token = f.read().strip()
driver = headless.chrome()
try:
    screenshots.sign_in(driver, url, token)
    screenshots.wait(driver, lambda: "SENDING" in driver.find_element(By.ID, "cards").text)
    screenshots.wait(driver, lambda: "…" not in driver.find_element(By.ID, "cards").text, 15)
    screenshots.shoot(driver, outdir, name)
    for card in driver.find_elements(By.CSS_SELECTOR, "#cards .card"):
        print("%s: %s" % (card.find_element(By.CLASS_NAME, "label").text,
                          card.find_element(By.CLASS_NAME, "value").text))
finally:
    driver.quit()
PY
}
dom() { chrome --dump-dom "$1"; }
field() { awk -v l="$2" 'index($0, l " ") == 1 { sub("^" l " +", ""); print $1 + 0; exit }' "$1"; }

result=1
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  dc logs --no-color >"$OUT/compose.log" 2>&1 || true
  if [[ ${KEEP_UP:-0} == 1 ]]; then
    say "KEEP_UP=1: still up (project $COMPOSE_PROJECT_NAME); stop with: COMPOSE_PROJECT_NAME=$COMPOSE_PROJECT_NAME RABBITMQ_PASSWORD=x PAYMENT_BROKER_PASSWORD=x ACCOUNTING_BROKER_PASSWORD=x RECOVERY_BROKER_PASSWORD=x docker-compose down -v"
  else
    dc down -v >>"$OUT/compose-down.log" 2>&1 || true
    say "docker-compose down -v done"
  fi
  say "screenshots, alert JSON and logs in $OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. up ---
# gRPC TLS, tokens and the message signing key: new ones every run.
# The server certificate also names `recovery`, the console's name for recovery_service.
DEV_CERT_NAMES=recovery container_secrets "$CERTS"  # scripts/lib/compose.sh
say "gRPC TLS certificates, tokens and the message key in $CERTS"
echo "=== up: docker-compose up -d --build (project $COMPOSE_PROJECT_NAME) ==="
build_start=$SECONDS
dc build >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log" >&2; die "docker-compose build failed ($OUT/build.log)"; }
build_s=$((SECONDS - build_start))
say "images built in ${build_s}s (log $OUT/build.log)"
dc up -d --build >"$OUT/up.log" 2>&1 || { tail -n 30 "$OUT/up.log" >&2; die "docker-compose up failed"; }
services=(rabbitmq payment_service accounting_service recovery_service console prometheus alertmanager)
await_healthy 300 "${services[@]}" || {
  for s in "${services[@]}"; do echo "  $s: $(health "$s")" >&2; done
  die "not every container became healthy within 300 s"
}
say "every container is healthy after $((SECONDS - build_start - build_s))s:"
dc ps
images="Debian $(docker run --rm outbox-services:local cat /etc/debian_version) (DEBIAN_RELEASE=$DEBIAN_RELEASE), console's Debian $(docker run --rm --entrypoint cat outbox-console:local /etc/debian_version), RabbitMQ $(dc exec -T rabbitmq rabbitmqctl -q version | tr -d '\r')"
say "images: $images"

# The console: a GetStats through it with the ops token, and refused without one.
console_with=$(console_stats -H @<(ops_token_header))
console_without=$(console_stats)
jq . <<<"${console_with#* }" >"$OUT/console-stats.json" 2>/dev/null || true
console_ok=0
[[ ${console_with%% *} == 200 && ${console_without%% *} == 401 ]] &&
  jq -e 'has("sending") and has("sent")' <<<"${console_with#* }" >/dev/null 2>&1 &&
  jq -e '.code == "unauthenticated"' <<<"${console_without#* }" >/dev/null 2>&1 &&
  console_ok=1
console_answer="GetStats with the ops token: HTTP ${console_with%% *} ($(jq -r '"lease holder \(.leaseHolder), \(.payQueueConsumers) PAY_QUEUE consumers"' <<<"${console_with#* }" 2>/dev/null || echo 'no JSON')); without: HTTP ${console_without%% *} ($(jq -r .code <<<"${console_without#* }" 2>/dev/null || echo 'no JSON'))"
say "console at $CONSOLE (sign in with $CERTS/ops.token): $console_answer"

# --- 2. healthy run ---
echo
echo "=== healthy run ($PAYMENTS payments) ==="
set +e
demo --wait_healthy=60 --count="$PAYMENTS" --timeout=60s | tee "$OUT/phase1.report"
phase1=${PIPESTATUS[0]}
set -e

# --- 3. outage ---
echo
echo "=== outage: accounting_service stopped for at least ${OUTAGE}s, $OUTAGE_PAYMENTS payments meanwhile ==="
republished_before=$(metric outbox_republished_total)
raised_before=$(metric 'outbox_alert_events_total{event="raised"}')
dc stop accounting_service
down_at=$SECONDS
say "stopped accounting_service (retry budget: RETRY_BASE_DELAY=$RETRY_BASE_DELAY x RETRY_MAX_ATTEMPTS=$RETRY_MAX_ATTEMPTS)"
set +e
demo --count="$OUTAGE_PAYMENTS" --skip_checks --wait_sent=false --write_ids="$OUT/phase2.ids"
phase2_create=$?
set -e
max_depth=0 outage_failed=0 seen_recovery=0 seen_prometheus=0 fired=''
while :; do
  sleep 5
  elapsed=$((SECONDS - down_at))
  snapshot=$(demo --count=0 --wait_sent=false --expect_ids="$OUT/phase2.ids" || true)
  depth=$(metric 'outbox_queue_ready{queue="PAY_QUEUE"}')
  ((depth > max_depth)) && max_depth=$depth
  failed_now=$(metric 'outbox_rows{status="FAILED"}')
  ((failed_now > outage_failed)) && outage_failed=$failed_now
  alerts=$(am_alerts | paste -sd, - | sed 's/,/, /g')
  printf '%s t+%3ds  %s; PAY_QUEUE %s ready, %s consumers; held %s; re-published %s; FAILED %s; Alertmanager: %s\n' \
    "$SCRIPT" "$elapsed" "${snapshot/#outbox_demo: payments of --expect_ids/outage payments}" "$depth" \
    "$(metric 'outbox_queue_consumers{queue="PAY_QUEUE"}')" "$(metric outbox_delivery_held)" \
    "$(($(metric outbox_republished_total) - republished_before))" "$failed_now" "${alerts:-none}"
  am_has OutboxConsumerDown recovery_service && seen_recovery=1
  am_has OutboxServiceDown prometheus && seen_prometheus=1
  if ((seen_recovery && seen_prometheus)) && [[ -z $fired ]]; then
    fired=$alerts
    curl -s "$AM/api/v2/alerts?active=true" | jq . >"$OUT/alerts-firing.json"
  fi
  ((elapsed >= OUTAGE && seen_recovery && seen_prometheus)) && break
  ((elapsed < OUTAGE_MAX)) || break
done
if [[ -z $fired ]]; then
  curl -s "$AM/api/v2/alerts?active=true" | jq . >"$OUT/alerts-firing.json"
fi

echo
echo "--- Alertmanager /api/v2/alerts during the outage ($OUT/alerts-firing.json) ---"
jq -c '.[] | {alertname: .labels.alertname, from: (.labels.service // .labels.source),
              severity: .labels.severity, queue: .labels.queue, job: .labels.job,
              state: .status.state, startsAt, summary: .annotations.summary}
            | with_entries(select(.value != null))' "$OUT/alerts-firing.json"

# Alertmanager's own page: the official image serves its web UI; Debian's
# package (the local stand-in image) ships none and says so, and then the
# alerts Alertmanager serves at its API are what a browser shows.
am_page="$AM/#/alerts"
dom "$am_page" >"$OUT/alertmanager.html" || true
if grep -q 'does not include a web' "$OUT/alertmanager.html"; then
  say "this Alertmanager has no web UI (Debian's package); showing its /api/v2/alerts page instead"
  am_page="$AM/api/v2/alerts?active=true"
  dom "$am_page" >"$OUT/alertmanager.html" || true
fi
am_shot=0
screenshot alertmanager-firing.png "$am_page" && grep -q OutboxConsumerDown "$OUT/alertmanager.html" && am_shot=1
say "screenshot of $am_page: $OUT/alertmanager-firing.png, names OutboxConsumerDown: $( ((am_shot)) && echo yes || echo NO)"
# Prometheus's alerts page lists every rule; a firing one reads "Name (1 active)".
# Debian's build (the stand-in image) serves its classic UI under /classic/.
prom_alerts=$PROM/alerts
[[ $(curl -s -o /dev/null -w '%{http_code}' "$prom_alerts") == 200 ]] || prom_alerts=$PROM/classic/alerts
prom_alerts_shot=0
dom "$prom_alerts" >"$OUT/prometheus-alerts.html" || true
screenshot prometheus-alerts.png "$prom_alerts" &&
  sed 's/<[^>]*>//g' "$OUT/prometheus-alerts.html" | grep -E 'OutboxServiceDown \([1-9][0-9]* active\)' >/dev/null &&
  prom_alerts_shot=1
say "screenshot of $prom_alerts: $OUT/prometheus-alerts.png, shows OutboxServiceDown active: $( ((prom_alerts_shot)) && echo yes || echo NO)"
# The console's overview during the outage: the payments made meanwhile SENDING.
console_cards=$(console_shot outage || true)
console_sending=$(awk -F': ' '$1 == "SENDING" { gsub(/[^0-9]/, "", $2); print $2 + 0; exit }' <<<"$console_cards")
console_hold=$(awk -F': ' '$1 == "delivery hold" { print $2; exit }' <<<"$console_cards")
console_shot_ok=0
[[ -s $OUT/console-outage.png && ${console_sending:-0} -gt 0 ]] && console_shot_ok=1
say "screenshot of the console's overview: $OUT/console-outage.png, SENDING ${console_sending:-?}, delivery hold: ${console_hold:-?}"

# --- 4. accounting back ---
echo
outage_s=$((SECONDS - down_at))
dc start accounting_service
up_at=$SECONDS
say "accounting_service started again after ${outage_s}s; waiting for the backlog to drain"
set +e
demo --count=0 --expect_ids="$OUT/phase2.ids" --wait_healthy=60 --timeout=60s | tee "$OUT/phase2.report"
phase2=${PIPESTATUS[0]}
set -e
republished=$(($(metric outbox_republished_total) - republished_before))
# Recovery resolves at its next round; Prometheus once its rules stop matching
# (a scrape and an evaluation, 5 s each, after accounting is healthy again).
resolved_after=''
for _ in $(seq 60); do
  if [[ -z $(am_transient) ]]; then resolved_after=$((SECONDS - up_at)); break; fi
  sleep 2
done
am_after=$(am_transient | paste -sd, - | sed 's/,/, /g')
say "Alertmanager after the outage: ${am_after:-no active alert}${resolved_after:+ (all resolved ${resolved_after}s after accounting was started)}"
# The SLO's burn-rate alert follows the drain, often after the others resolved:
# its rates hold the outage's slow payments once a scrape and an evaluation
# (5 s each) have seen them SENT. It must fire when they are over 6 % of the
# payments (the warning's burn rate; the healthy ones take far under 5 s).
p2_total=$(wc -l <"$OUT/phase2.ids")
slo_expected=$((p2_total * 100 > 6 * (PAYMENTS + p2_total)))
lasting_after=''
if ((slo_expected)); then
  for _ in $(seq 45); do
    if [[ -n $(am_lasting) ]]; then lasting_after=$((SECONDS - up_at)); break; fi
    sleep 2
  done
fi
am_lasting_now=$(am_lasting)
curl -s "$AM/api/v2/alerts?active=true" | jq . >"$OUT/alerts-after.json"
say "the SLO's burn-rate alert: ${am_lasting_now:-not active}${lasting_after:+ (firing ${lasting_after}s after accounting was started)}"
raised=$(($(metric 'outbox_alert_events_total{event="raised"}') - raised_before))
recovery_resolved=$(metric 'outbox_alert_events_total{event="resolved"}')
# Which of Prometheus's rules fired during the run, and which fire now.
prom_query() { curl -s --get "$PROM/api/v1/query" --data-urlencode "query=$1" | jq -r '[.data.result[].metric.alertname] | unique | join(", ")'; }
prom_fired=$(prom_query 'max_over_time(ALERTS{alertstate="firing"}[15m])')
prom_firing=$(prom_query 'ALERTS{alertstate="firing"}')

sleep 5  # one more scrape so the graph ends after the drain
graph="$PROM/graph?g0.expr=rate(outbox_payments_created_total%5B1m%5D)&g0.tab=0&g0.range_input=5m"
graph_shot=0
screenshot prometheus-payments-rate.png "$graph" && graph_shot=1
say "screenshot of $graph: $OUT/prometheus-payments-rate.png"

echo
echo "=== every payment (outbox_demo --report_all) ==="
set +e
demo --count=0 --report_all --timeout=30s | tee "$OUT/all.report"
all=${PIPESTATUS[0]}
set -e

echo
echo "=== outbox_check (both databases, read from their volumes) ==="
check=0
docker run --rm -v "${COMPOSE_PROJECT_NAME}_payment_data:/data/payment" \
  -v "${COMPOSE_PROJECT_NAME}_accounting_data:/data/accounting" outbox-services:local \
  outbox_check --payment_db=/data/payment/payment.db --accounting_db=/data/accounting/accounting.db |
  tee "$OUT/outbox_check.txt" || check=$?

# --- 5. report ---
verdict() { if [[ $1 == 0 ]]; then echo OK; else echo "FAILED (exit $1)"; fi; }
yes_no() { if (($1)); then echo yes; else echo NO; fi; }
total=$(field "$OUT/all.report" "payments checked")
sent=$(field "$OUT/all.report" "outbox SENT")
sending=$(field "$OUT/all.report" "outbox SENDING")
failed=$(field "$OUT/all.report" "outbox FAILED")
vouchers=$(field "$OUT/all.report" "vouchers")
dups=$(field "$OUT/all.report" "duplicates")
lost=$(field "$OUT/all.report" "lost")
ok=1
[[ $phase1 == 0 && $phase2_create == 0 && $phase2 == 0 && $all == 0 && $check == 0 ]] || ok=0
((seen_recovery && seen_prometheus && am_shot && prom_alerts_shot && graph_shot)) || ok=0
((console_ok && console_shot_ok)) || ok=0
((!slo_expected)) || [[ -n $lasting_after ]] || ok=0
[[ -z $am_after && ${failed:-1} == 0 && $outage_failed == 0 && ${lost:-1} == 0 && ${dups:-1} == 0 ]] || ok=0
[[ -n $sent && $sent == "$total" && $vouchers == "$total" ]] || ok=0

echo
echo "=== compose demo report ==="
printf '%-30s %s\n' "docker-compose build" "${build_s}s"
printf '%-30s %s\n' "images" "$images"
printf '%-30s %s\n' "payments" "${total:-?} ($PAYMENTS healthy, $p2_total during the outage)"
printf '%-30s %s\n' "SENT / SENDING / FAILED" "${sent:-?} / ${sending:-?} / ${failed:-?}"
printf '%-30s %s\n' "vouchers" "${vouchers:-?}"
printf '%-30s %s\n' "duplicates" "${dups:-?}"
printf '%-30s %s\n' "lost" "${lost:-?}"
printf '%-30s %s\n' "outage" "accounting_service down ${outage_s}s; PAY_QUEUE at most $max_depth ready ($(awk -v d="$max_depth" -v p="$p2_total" 'BEGIN { printf "%.2f", p ? d / p : 0 }') per payment); re-published $republished; FAILED during it $outage_failed"
printf '%-30s %s\n' "alerts fired" "${fired:-not both seen}"
printf '%-30s %s\n' "  recovery_service" "raised $raised (OutboxConsumerDown seen: $(yes_no "$seen_recovery")), resolved $recovery_resolved in all"
printf '%-30s %s\n' "  Prometheus rules" "fired: ${prom_fired:-none}; firing now: ${prom_firing:-none}"
printf '%-30s %s\n' "alerts resolved" "$( [[ -z $am_after ]] && echo "all but the SLO's (${resolved_after}s after accounting's start)" || echo "NO, still active: $am_after")"
if [[ -n $lasting_after ]]; then
  lasting_line="$am_lasting_now; firing ${lasting_after}s after accounting's start"
elif ((slo_expected)); then
  lasting_line="NOT firing 90 s after accounting's start, though the outage's $p2_total payments took over 5 s"
else
  lasting_line="${am_lasting_now:-not active} (not expected: the outage's payments are 6 % of all or less)"
fi
printf '%-30s %s\n' "  lasting SLO alert" "$lasting_line"
printf '%-30s %s\n' "console" "$CONSOLE: $console_answer; overview during the outage: SENDING ${console_sending:-?}, delivery hold ${console_hold:-?} ($(yes_no "$console_shot_ok"))"
printf '%-30s %s\n' "screenshots" "$OUT/alertmanager-firing.png (names the alert: $(yes_no "$am_shot")), prometheus-alerts.png (rule active: $(yes_no "$prom_alerts_shot")), prometheus-payments-rate.png ($(yes_no "$graph_shot")), console-outage.png ($(yes_no "$console_shot_ok"))"
printf '%-30s %s\n' "outbox_check" "$(verdict "$check") ($(grep '^result:' "$OUT/outbox_check.txt" || echo 'no result'))"
if ((ok)); then result=0; fi
printf '%-30s %s\n' "RESULT" "$([[ $result == 0 ]] && echo OK || echo FAILED)"
exit "$result"
