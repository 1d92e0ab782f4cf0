// Unit tests of src/server.ts (compiled to out/server.js by `npm run compile`):
// how the client finds and describes the wfc binary. Plain Node, no VS Code.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const server = require('../../out/server.js');

// Every temporary folder is removed when the tests end (ci.sh checks that
// none is left behind).
const temps = [];
test.after(() => {
  for (const d of temps) fs.rmSync(d, { recursive: true, force: true });
});
function tempDir() {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'wfc-vscode-'));
  temps.push(d);
  return d;
}
function executable(dir, name, body = '#!/bin/sh\necho "wfc v1.2.3 (go1.26)"\n') {
  const p = path.join(dir, name);
  fs.writeFileSync(p, body);
  fs.chmodSync(p, 0o755);
  return p;
}

test('defaults: wfc lsp', () => {
  assert.deepEqual(server.normalizeSettings(undefined, undefined), { path: 'wfc', args: ['lsp'] });
  assert.deepEqual(server.normalizeSettings('', null), { path: 'wfc', args: ['lsp'] });
  assert.deepEqual(server.normalizeSettings(42, [1, 2]), { path: 'wfc', args: ['lsp'] });
  assert.deepEqual(server.normalizeSettings('/opt/wfc', ['lsp', '--log-level=debug']), { path: '/opt/wfc', args: ['lsp', '--log-level=debug'] });
});

test('variables: ~, ${workspaceFolder}, ${userHome}, ${env:NAME}', () => {
  assert.equal(server.expandVariables('~/bin/wfc', undefined), path.join(os.homedir(), 'bin/wfc'));
  assert.equal(server.expandVariables('${workspaceFolder}/bin/wfc', '/ws'), '/ws/bin/wfc');
  assert.equal(server.expandVariables('${workspaceFolder}/wfc', undefined), '${workspaceFolder}/wfc');
  assert.equal(server.expandVariables('${userHome}/wfc', undefined), `${os.homedir()}/wfc`);
  assert.equal(server.expandVariables('${env:WFC_TEST_DIR}/wfc', undefined, { WFC_TEST_DIR: '/x' }), '/x/wfc');
  assert.equal(server.expandVariables('  wfc  ', undefined), 'wfc');
});

test('a bare name is looked up on PATH; non-executables and directories are skipped', { skip: process.platform === 'win32' }, () => {
  const a = tempDir();
  const b = tempDir();
  fs.writeFileSync(path.join(a, 'wfc'), 'not executable');
  fs.mkdirSync(path.join(b, 'sub'));
  const want = executable(b, 'wfc');
  const env = { PATH: [a, path.join(b, 'sub'), b].join(':') };
  assert.equal(server.resolveServerPath('wfc', { env }), want);
  assert.equal(server.resolveServerPath('nope', { env }), undefined);
  assert.equal(server.resolveServerPath('wfc', { env: { PATH: '' } }), undefined);
});

test('a path is taken as is, relative to the workspace folder', { skip: process.platform === 'win32' }, () => {
  const ws = tempDir();
  fs.mkdirSync(path.join(ws, 'bin'));
  const want = executable(path.join(ws, 'bin'), 'wfc');
  assert.equal(server.resolveServerPath(want, {}), want);
  assert.equal(server.resolveServerPath('./bin/wfc', { workspaceFolder: ws }), want);
  assert.equal(server.resolveServerPath('bin/wfc', { workspaceFolder: ws }), want);
  assert.equal(server.resolveServerPath(path.join(ws, 'missing'), {}), undefined);
  assert.equal(server.resolveServerPath(path.join(ws, 'bin'), {}), undefined, 'a directory is not a server');
});

test('Windows: PATHEXT is tried', () => {
  const dir = tempDir();
  const want = path.join(dir, 'wfc.EXE');
  fs.writeFileSync(want, '');
  assert.equal(server.resolveServerPath('wfc', { env: { PATH: dir, PATHEXT: '.COM;.EXE' }, platform: 'win32' }), want);
});

test('the missing-binary message says what to do', () => {
  const m = server.missingServerMessage('wfc');
  assert.match(m, /"wfc" on PATH, in GOBIN or in GOPATH\/bin/);
  assert.match(m, /wfc\.server\.path/);
  assert.match(m, /go install \.\/cmd\/wfc` in a clone of the wfc repository/);
  assert.match(server.missingServerMessage('/opt/wfc'), /at "\/opt\/wfc"/);
});

test('serverVersion runs `<binary> version`', { skip: process.platform === 'win32' }, async () => {
  const dir = tempDir();
  const ok = executable(dir, 'wfc', '#!/bin/sh\n[ "$1" = version ] && echo "wfc v9.9.9" && exit 0\nexit 2\n');
  assert.equal(await server.serverVersion(ok), 'wfc v9.9.9');
  const bad = executable(dir, 'bad', '#!/bin/sh\necho boom >&2\nexit 3\n');
  await assert.rejects(server.serverVersion(bad), /Command failed/);
  await assert.rejects(server.serverVersion(path.join(dir, 'missing')), /ENOENT/);
});

test('a bare name not on PATH is found where `go install` puts it, and the log says where', { skip: process.platform === 'win32' }, () => {
  const gopath = tempDir();
  const other = tempDir();
  fs.mkdirSync(path.join(gopath, 'bin'));
  const inGopath = executable(path.join(gopath, 'bin'), 'wfc');
  const noGo = () => undefined;
  // $GOPATH (a list) from the environment.
  let found = server.findServer('wfc', { env: { PATH: other, GOPATH: `${other}:${gopath}` }, goEnvFn: noGo });
  assert.deepEqual(found, { path: inGopath, source: 'GOPATH/bin' });
  assert.equal(server.foundServerMessage(found, 'wfc v1'), `using ${inGopath} (found in GOPATH/bin, not on PATH): wfc v1`);
  // `go env GOPATH` when the environment has none.
  const asked = [];
  found = server.findServer('wfc', { env: { PATH: other }, goEnvFn: (n) => (asked.push(n), n === 'GOPATH' ? gopath : undefined) });
  assert.deepEqual(found, { path: inGopath, source: 'GOPATH/bin' });
  assert.deepEqual(asked, ['GOBIN', 'GOPATH']);
  // No go at all: ~/go/bin.
  const home = tempDir();
  fs.mkdirSync(path.join(home, 'go', 'bin'), { recursive: true });
  const inHome = executable(path.join(home, 'go', 'bin'), 'wfc');
  assert.deepEqual(server.findServer('wfc', { env: { PATH: '' }, home, goEnvFn: noGo }), { path: inHome, source: 'GOPATH/bin' });
  // GOBIN comes first.
  const gobin = tempDir();
  const inGobin = executable(gobin, 'wfc');
  assert.deepEqual(server.findServer('wfc', { env: { PATH: other, GOBIN: gobin, GOPATH: gopath }, goEnvFn: noGo }), { path: inGobin, source: 'GOBIN' });
  // PATH wins over all of them.
  const onPath = executable(other, 'wfc');
  found = server.findServer('wfc', { env: { PATH: other, GOPATH: gopath }, goEnvFn: noGo });
  assert.deepEqual(found, { path: onPath, source: 'PATH' });
  assert.equal(server.foundServerMessage(found, ''), `using ${onPath} (found on PATH)`);
  // A path is never looked for elsewhere.
  assert.equal(server.findServer('./nope/wfc', { workspaceFolder: other, env: { GOPATH: gopath }, goEnvFn: noGo }), undefined);
  found = server.findServer(inGopath, { env: { PATH: '' }, goEnvFn: noGo });
  assert.deepEqual(found, { path: inGopath, source: 'wfc.server.path' });
  assert.equal(server.findServer('wfc', { env: { PATH: '' }, home: other, goEnvFn: noGo }), undefined);
});

test('server log lines keep their level (not every stderr line is an error)', () => {
  assert.deepEqual(server.serverLogLine('time=2026-11-26T12:00:00.000Z level=INFO msg="wfc language server starting" version=(devel) pid=7'), {
    level: 'info',
    text: 'msg="wfc language server starting" version=(devel) pid=7',
  });
  assert.equal(server.serverLogLine('time=x level=DEBUG msg=a').level, 'debug');
  assert.equal(server.serverLogLine('time=x level=WARN msg=a').level, 'warn');
  assert.equal(server.serverLogLine('time=x level=ERROR msg=a').level, 'error');
  assert.equal(server.serverLogLine('time=x level=INFO+2 msg=a').level, 'info');
  assert.deepEqual(server.serverLogLine('panic: runtime error: index out of range'), { level: 'error', text: 'panic: runtime error: index out of range' });
});

test('pipeServerLog splits chunks into lines and logs each at its level', async () => {
  const { PassThrough } = require('stream');
  const input = new PassThrough();
  const logs = [];
  const channel = Object.fromEntries(['trace', 'debug', 'info', 'warn', 'error'].map((l) => [l, (m) => logs.push([l, m])]));
  server.pipeServerLog(input, channel);
  input.write('time=t level=INFO msg=one\ntime=t level=WA');
  input.write('RN msg=two\r\n\ngoroutine 1 [running]:\n');
  input.end('time=t level=ERROR msg=three');
  await new Promise((r) => input.on('end', r));
  assert.deepEqual(logs, [
    ['info', 'msg=one'],
    ['warn', 'msg=two'],
    ['error', 'goroutine 1 [running]:'],
    ['error', 'msg=three'],
  ]);
});
