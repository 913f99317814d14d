#!/usr/bin/env bash
# Installs the real programs `ccvm exec` is measured on (Debian packages):
# gnuplot, ghostscript, gcc (cc1), CPython, sqlite3. Needs root.
set -euo pipefail
need=()
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v gs >/dev/null || need+=(ghostscript)
command -v gcc >/dev/null || need+=(gcc)
[ -x /usr/bin/python3 ] || need+=(python3)
command -v sqlite3 >/dev/null || need+=(sqlite3)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "programs installed: gnuplot gs gcc python3 sqlite3"
