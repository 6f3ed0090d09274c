#!/usr/bin/env bash
# Checks the monitoring configuration docker-compose.yml mounts: Prometheus's
# config and alert rules (promtool check, plus the rules' own unit tests in
# rules_test.yml) and Alertmanager's config (amtool). Fails, never skips,
# when the tools are missing: scripts/install_deps.sh installs them
# (Debian's prometheus and prometheus-alertmanager).
#   bash tests/prometheus_config_test.sh [path/to/docker]
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)/docker}
for tool in promtool amtool; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not installed (scripts/install_deps.sh)" >&2; exit 1; }
done
promtool check config "$dir/prometheus/prometheus.yml" || { echo "FAIL: prometheus.yml" >&2; exit 1; }
promtool check rules "$dir/prometheus/rules.yml" || { echo "FAIL: rules.yml" >&2; exit 1; }
(cd "$dir/prometheus" && promtool test rules rules_test.yml) || { echo "FAIL: rules_test.yml" >&2; exit 1; }
# Every rule points at its runbook entry: runbook_url <runbook_base, or
# docs/operations.md>#<alert in lower case> (that the anchor exists is
# checked by docs.links).
missing=$(awk '
  /^ *- alert: / { if (alert != "" && !seen) print alert; alert = $3; seen = 0 }
  /^ *runbook_url: / {
    want = "{{ else }}docs/operations.md{{ end }}#" tolower(alert) "\x27"
    if (index($0, want) > 0) seen = 1
  }
  END { if (alert != "" && !seen) print alert }' "$dir/prometheus/rules.yml")
[[ -z $missing ]] || { echo "FAIL: rules without runbook_url <base or docs/operations.md>#<alert>: $missing" >&2; exit 1; }
amtool check-config "$dir/alertmanager/alertmanager.yml" || { echo "FAIL: alertmanager.yml" >&2; exit 1; }
echo "PASS: $dir/prometheus, $dir/alertmanager"
