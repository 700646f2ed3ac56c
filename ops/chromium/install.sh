#!/usr/bin/env bash
# Debian's Chromium and its chromedriver, for the page's browser tests (tests/page/): installed
# once with apt (CI runs as root), skipped where both are already there. Nothing is downloaded
# at test time: the tests drive /usr/bin/chromium through /usr/bin/chromedriver.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  # Not root: say what to run. The page's tests then skip, or fail where $CI is set.
  echo "ops/chromium/install.sh: Chromium is missing; as root run" \
    "apt-get install -y chromium chromium-driver" >&2
  [ -z "${CI:-}" ]
  exit
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# DejaVu: the page's font (its marks ✓ ↻ ✎ among its glyphs), on images that have no font at all.
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
/usr/bin/chromium --version
