#!/usr/bin/env bash
# Debian's Chromium and its chromedriver, for the page's browser tests (tests/page/): installed
# once with apt (CI runs as root), skipped where both are already there. Nothing is downloaded
# at test time: the tests drive /usr/bin/chromium through /usr/bin/chromedriver.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ops/chromium/install.sh: Chromium is missing; as root run" \
    "apt-get install -y chromium chromium-driver" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
/usr/bin/chromium --version
