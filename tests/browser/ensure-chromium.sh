#!/usr/bin/env bash
# Make sure Debian's chromium is there for the browser test (tests/test_web_browser.py), which
# drives it with Playwright (the pip package; its own browser download is never used).
# As root with apt-get it installs the package when missing; elsewhere it only says what to do,
# and the browser test skips (or fails, under GPUPLAN_REQUIRE_BROWSER=1 as in CI).
set -euo pipefail

if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "browser test: no chromium; install Debian's (apt-get install chromium) to run it" >&2
  exit 0
fi
log=$(mktemp)
pkgs=(chromium fonts-dejavu-core)
apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1; }
if ! { apt_install || { apt-get update -qq >>"$log" 2>&1 && apt_install; }; }; then
  tail -20 "$log" >&2
  echo "browser test: apt-get install ${pkgs[*]} failed" >&2
  exit 1
fi
rm -f "$log"
echo "browser test: installed $(chromium --version 2>/dev/null || echo chromium)" >&2
