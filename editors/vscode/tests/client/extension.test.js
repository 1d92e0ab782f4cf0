// Loads out/extension.js (the tsc output, or the esbuild bundle that goes
// into the .vsix) against a stub of the `vscode` module and checks the
// client glue that needs no running editor: commands, the error shown when
// the wfc binary is missing, restart on a settings change.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const Module = require('module');
const fs = require('fs');
const os = require('os');
const path = require('path');

function fakeVscode(settings) {
  const calls = { errors: [], commands: new Map(), configListeners: [], logs: [] };
  const channel = (name) => ({
    name,
    logLevel: 2,
    info: (m) => calls.logs.push(['info', m]),
    warn: (m) => calls.logs.push(['warn', m]),
    error: (m) => calls.logs.push(['error', m]),
    trace: () => {},
    debug: () => {},
    show: () => {},
    dispose: () => {},
    onDidChangeLogLevel: () => ({ dispose() {} }),
  });
  const vscode = {
    LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
    window: {
      createOutputChannel: (name) => channel(name),
      showErrorMessage: async (msg, ...actions) => {
        calls.errors.push({ msg, actions });
        return undefined;
      },
    },
    commands: {
      registerCommand: (id, fn) => {
        calls.commands.set(id, fn);
        return { dispose() {} };
      },
      executeCommand: async () => undefined,
    },
    workspace: {
      workspaceFolders: undefined,
      getConfiguration: (section) => ({
        get: (key, dflt) => {
          const v = settings[`${section}.${key}`];
          return v === undefined ? dflt : v;
        },
      }),
      createFileSystemWatcher: () => ({ dispose() {} }),
      onDidChangeConfiguration: (fn) => {
        calls.configListeners.push(fn);
        return { dispose() {} };
      },
      onDidGrantWorkspaceTrust: () => ({ dispose() {} }),
    },
  };
  // vscode-languageclient extends a few vscode classes when it loads; any
  // API the test does not model is an empty class.
  const stubbed = new Proxy(vscode, {
    get: (t, k) => (k in t ? t[k] : (t[k] = class Stub {})),
  });
  return { vscode: stubbed, calls };
}

const OUT = path.join(__dirname, '../../out/extension.js');
const isBundle = () => !/require\("vscode-languageclient/.test(fs.readFileSync(OUT, 'utf8'));

function loadExtension(vscode, file = OUT) {
  const orig = Module._load;
  Module._load = function (request, parent, isMain) {
    if (request === 'vscode') return vscode;
    return orig.call(this, request, parent, isMain);
  };
  try {
    delete require.cache[require.resolve(file)];
    return require(file);
  } finally {
    Module._load = orig;
  }
}

test('missing binary: a helpful error, commands registered, restart on settings change', async () => {
  const settings = { 'wfc.server.path': '/nonexistent/dir/wfc', 'wfc.server.args': ['lsp'] };
  const { vscode, calls } = fakeVscode(settings);
  const ext = loadExtension(vscode);
  const subscriptions = [];
  ext.activate({ subscriptions });
  await ext.deactivate(); // runs after the first start attempt

  assert.deepEqual([...calls.commands.keys()].sort(), ['wfc.restartServer', 'wfc.showOutput']);
  assert.equal(calls.errors.length, 1);
  assert.match(calls.errors[0].msg, /no executable at "\/nonexistent\/dir\/wfc"/);
  assert.match(calls.errors[0].msg, /wfc\.server\.path/);
  assert.deepEqual(calls.errors[0].actions, ['Open Settings', 'Show Output']);
  assert.ok(subscriptions.length >= 5, 'disposables are registered');

  // Changing an unrelated setting does nothing; a wfc.server one restarts.
  settings['wfc.server.path'] = 'wfc-definitely-not-on-path';
  for (const fn of calls.configListeners) fn({ affectsConfiguration: (s) => s === 'editor' });
  await ext.deactivate();
  assert.equal(calls.errors.length, 1);
  for (const fn of calls.configListeners) fn({ affectsConfiguration: (s) => s === 'wfc.server' || s === 'wfc' });
  await ext.deactivate(); // waits for the queued restart
  assert.equal(calls.errors.length, 2);
  assert.match(calls.errors[1].msg, /"wfc-definitely-not-on-path" on PATH/);

  // The restart command goes through the same path.
  await calls.commands.get('wfc.restartServer')();
  assert.equal(calls.errors.length, 3);
  await ext.deactivate();
});

test('the bundle (npm run bundle, what the .vsix ships) needs nothing but vscode', { skip: !isBundle() && 'out/extension.js is the tsc output; run npm run bundle' }, async (t) => {
  // Copied away from node_modules: any require other than `vscode` and
  // Node's own modules would fail.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wfc-bundle-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const copy = path.join(dir, 'extension.js');
  fs.copyFileSync(OUT, copy);
  const { vscode, calls } = fakeVscode({ 'wfc.server.path': path.join(dir, 'no-wfc-here') });
  const ext = loadExtension(vscode, copy);
  ext.activate({ subscriptions: [] });
  await ext.deactivate();
  assert.equal(calls.errors.length, 1);
  assert.match(calls.errors[0].msg, /cannot start the language server/);
  await ext.deactivate();
});
