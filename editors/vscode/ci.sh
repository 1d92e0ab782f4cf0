#!/usr/bin/env bash
# CI for the VS Code extension in editors/vscode: installs the pinned npm
# packages, compiles the client, runs the manifest check, the grammar unit
# and snapshot tests, the client tests and the Go keyword check, and
# packages the .vsix, then runs the end-to-end test in a real VS Code
# (e2e/run.sh: code-server from npm, Debian's chromium). Needs Node >= 20
# and the npm registry (the e2e test also Node 20 and Go). Runs from any
# directory and may be run again (npm ci reinstalls node_modules, the .vsix
# is rewritten). Exits non-zero if any step fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false
begin=$SECONDS
passed=0
failed=0
failures=()

step() {
  local name=$1
  shift
  local t=$SECONDS
  echo "== $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "-- ok: $name ($((SECONDS - t))s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "-- FAILED: $name ($((SECONDS - t))s)"
  fi
}

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ci.sh: $tool is not installed (Node >= 20 is needed)"
    exit 1
  fi
done
echo "node $(node --version), npm $(npm --version 2>/dev/null)"

step "npm ci" npm ci --no-audit --no-fund
if [ "$failed" -ne 0 ]; then
  echo "vscode extension: $passed passed, $failed failed: npm ci failed, nothing else can run"
  exit 1
fi
install_time=$((SECONDS - begin))

step "compile (tsc -p .)" npm run --silent compile
step "manifest and keyword check" node scripts/check-manifest.js
step "grammar unit tests (tests/unit)" npx --no-install vscode-tmgrammar-test -g syntaxes/wf.tmLanguage.json "tests/unit/*.test.wf"
step "grammar snapshot tests (tests/snap)" npx --no-install vscode-tmgrammar-snap -g syntaxes/wf.tmLanguage.json "tests/snap/*.wf"
version=$(node -p "require('./package.json').version")
rm -f wfc-*.vsix
step "package (vsce package)" npx --no-install vsce package --no-dependencies --skip-license -o "wfc-$version.vsix"
step "manifest check of the build" node scripts/check-manifest.js --require-build
# The client tests run with a TMPDIR of their own, which they must leave
# empty: no wfc-vscode-* or wfc-bundle-* folders left behind.
client_tests() {
  local tmp status
  tmp=$(mktemp -d)
  TMPDIR=$tmp node --test tests/client/*.test.js
  status=$?
  if [ -n "$(ls -A "$tmp")" ]; then
    echo "client tests left temporary files behind:" && ls -A "$tmp"
    status=1
  fi
  rm -rf "$tmp"
  return $status
}
step "client tests (tests/client, on the bundle)" client_tests
step "vsix contents" node scripts/check-vsix.js "wfc-$version.vsix"
# The end-to-end test in a real VS Code (e2e/): code-server with the .vsix,
# driven by Debian's headless chromium. CI always runs it (.ci/run installs
# chromium, ripgrep and libkrb5-dev); elsewhere it runs when those are here
# and WFC_E2E is not 0.
e2e_wanted() {
  [ "${WFC_E2E:-}" = 0 ] && return 1
  [ -n "${CI:-}" ] && return 0
  [ "${WFC_E2E:-}" = 1 ] && return 0
  command -v chromium >/dev/null 2>&1 && command -v rg >/dev/null 2>&1 && command -v go >/dev/null 2>&1 &&
    [ -e /usr/include/gssapi/gssapi.h ] && [ "$(node -p 'process.versions.node.split(".")[0]')" = 20 ]
}
if e2e_wanted; then
  t=$SECONDS
  step "e2e: npm ci in e2e/ (code-server, playwright-core)" bash e2e/run.sh install
  if [ -d e2e/node_modules/code-server/lib/vscode/node_modules ]; then
    step "e2e: the .vsix in code-server + headless chromium (e2e/test.js)" bash e2e/run.sh test "wfc-$version.vsix"
  fi
  e2e_time=$((SECONDS - t))
else
  echo "== e2e skipped: needs Node 20, go, chromium, ripgrep and libkrb5-dev (WFC_E2E=1 forces it, CI always runs it)"
fi
if command -v go >/dev/null 2>&1; then
  step "keywords.json vs the Go compiler and docs (go test ./keywordcheck)" go test -count=1 ./keywordcheck
else
  echo "== go not installed: keywordcheck skipped (go test ./... runs it)"
fi

echo
echo "npm ci: ${install_time}s; e2e (install and test): ${e2e_time:-0}s; the rest: $((SECONDS - begin - install_time - ${e2e_time:-0}))s"
if [ "$failed" -ne 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
fi
echo "vscode extension: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
