#!/usr/bin/env bash
# Regenerates docs/report-screenshot.png: `strata plan`'s report of the README's default job
# (Llama-3.1-70B on eight DGX H100 nodes, global batch 256 × 8192 tokens), rendered by headless
# Chromium (Debian's chromium, installed by ./setup.sh --tests).
#   scripts/make_report_screenshot.sh [STRATA]   (default: build/default/strata, else build/test/strata)
set -euo pipefail
cd "$(dirname "$0")/.."

strata="${1:-}"
if [ -z "$strata" ]; then
  for candidate in build/default/strata build/test/strata; do
    if [ -x "$candidate" ]; then strata="$candidate"; break; fi
  done
fi
[ -n "$strata" ] && [ -x "$strata" ] || { echo "make_report_screenshot.sh: build strata first" >&2; exit 1; }
chromium="$(command -v chromium || true)"
[ -n "$chromium" ] || { echo "make_report_screenshot.sh: needs chromium (./setup.sh --tests)" >&2; exit 1; }

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$strata" plan --quiet --report "$scratch/report.html" >/dev/null
# The top of the page: headline numbers, the timeline, memory and where the time goes.
HOME="$scratch" "$chromium" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$scratch/profile" --window-size=1280,1500 \
  --screenshot="$scratch/report.png" "file://$scratch/report.html" 2>/dev/null
mv "$scratch/report.png" docs/report-screenshot.png
echo "wrote docs/report-screenshot.png"
