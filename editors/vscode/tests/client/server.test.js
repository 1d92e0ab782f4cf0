// Unit tests of src/server.ts (compiled to out/server.js by `npm run compile`):
// how the client finds and describes the wfc binary. Plain Node, no VS Code.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const server = require('../../out/server.js');

function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'wfc-vscode-'));
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
  assert.match(m, /"wfc" on PATH/);
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
