#!/usr/bin/env bash
# The end-to-end test of the extension in a real VS Code (see README.md
# here): `run.sh install` installs code-server and playwright-core from the
# lockfile, `run.sh test VSIX` builds wfc and runs test.js against VSIX.
# Needs Node 20 (code-server 4.100 refuses any other), Debian's chromium,
# ripgrep and libkrb5-dev, a C/C++ toolchain, Go, and the npm registry only.
set -uo pipefail
caller_dir=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")"

export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

# @vscode/ripgrep (a dependency of code-server's VS Code) downloads rg from
# GitHub in its postinstall unless the archive is already in its cache,
# $TMPDIR/vscode-ripgrep-cache-<its npm version>/ripgrep-<asset>-<target>.tar.gz
# (lib/download.js). Both versions are pinned by code-server's
# lib/vscode/npm-shrinkwrap.json and @vscode/ripgrep's lib/postinstall.js:
# update them together with code-server in package.json.
RIPGREP_NPM_VERSION=1.15.11
RIPGREP_ASSET_VERSION=v13.0.0-10

die() {
  echo "e2e: $*" >&2
  exit 1
}

install() {
  [ "$(node -p 'process.versions.node.split(".")[0]')" = 20 ] ||
    die "code-server 4.100 needs Node 20; this is node $(node --version)"
  local rg
  rg=$(command -v rg) || die "ripgrep is not installed (apt-get install ripgrep): VS Code's search needs rg and its npm package would download it from GitHub"
  [ -e /usr/include/gssapi/gssapi.h ] || die "libkrb5-dev is not installed (apt-get install libkrb5-dev): code-server's kerberos module is compiled from source"
  { command -v g++ && command -v make && command -v python3; } >/dev/null 2>&1 ||
    die "g++, make and python3 are needed (apt-get install build-essential python3): code-server's native modules are compiled with node-gyp"
  local target
  case "$(uname -m)" in
    x86_64) target=x86_64-unknown-linux-musl ;;
    aarch64) target=aarch64-unknown-linux-musl ;;
    *) die "no ripgrep target for $(uname -m)" ;;
  esac
  local tmp
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" RETURN
  local cache="$tmp/vscode-ripgrep-cache-$RIPGREP_NPM_VERSION"
  mkdir -p "$cache/rg"
  cp "$rg" "$cache/rg/rg"
  tar czf "$cache/ripgrep-$RIPGREP_ASSET_VERSION-$target.tar.gz" -C "$cache/rg" rg
  rm -rf "$cache/rg"
  # npm_config_unsafe_perm: code-server's postinstall refuses to run as root
  # without it. npm_config_yes: node-pty's build may run npx, which must not
  # ask. Native modules (argon2, kerberos, spdlog, node-pty, ...) have no
  # prebuilt binary reachable here and are compiled with node-gyp.
  TMPDIR=$tmp npm_config_unsafe_perm=true npm_config_yes=true npm ci --no-audit --no-fund --foreground-scripts >install.log 2>&1
  local status=$?
  if [ $status -ne 0 ]; then
    tail -60 install.log
    die "npm ci failed (exit $status); the whole log is in e2e/install.log"
  fi
  local got=node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg
  cmp -s "$got" "$rg" || die "$got is not Debian's rg: did @vscode/ripgrep change its cache or version? (see RIPGREP_* in run.sh)"
  echo "code-server $(node -p 'require("code-server/package.json").version'), playwright-core $(node -p 'require("playwright-core/package.json").version'), rg from $rg"
}

run_test() {
  local vsix=${1:?usage: run.sh test VSIX}
  case "$vsix" in /*) ;; *) vsix=$caller_dir/$vsix ;; esac
  [ -f "$vsix" ] || die "$vsix does not exist"
  [ -d node_modules/code-server ] || die "code-server is not installed: run 'run.sh install' first"
  local chromium=${WFC_E2E_CHROMIUM:-/usr/bin/chromium}
  [ -x "$chromium" ] || die "$chromium is not installed (apt-get install chromium)"
  local bin
  bin=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$bin'" RETURN
  (cd ../../.. && go build -o "$bin/wfc" ./cmd/wfc) || die "go build ./cmd/wfc failed"
  # timeout: the test bounds each wait itself; this bounds the whole run.
  WFC_E2E_VSIX=$(realpath "$vsix") WFC_E2E_WFC=$bin/wfc WFC_E2E_CHROMIUM=$chromium \
    timeout -k 10 480 node --test --test-reporter=spec test.js
  local status=$?
  echo "screenshots and logs in $(pwd)/artifacts:" && ls artifacts 2>/dev/null | sed 's/^/  /'
  [ $status -eq 124 ] && echo "e2e: the test ran for more than 8 minutes and was stopped"
  return $status
}

case "${1:-}" in
  install) install ;;
  test) run_test "${2:-}" ;;
  *) die "usage: run.sh install | run.sh test VSIX" ;;
esac
