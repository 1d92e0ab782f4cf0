// End-to-end test of the wfc extension in a real VS Code: code-server (VS
// Code's workbench served over HTTP) with the packaged .vsix installed, driven
// by headless Chromium through playwright-core. Each test acts as a user
// would (quick open, typing, keyboard shortcuts) and waits for what the
// editor shows; nothing here sleeps for a fixed time.
//
// Run by ../ci.sh (e2e step); by hand:
//   WFC_E2E_VSIX=../wfc-0.1.0.vsix WFC_E2E_WFC=/path/to/wfc node --test test.js
// Environment: WFC_E2E_VSIX (the .vsix), WFC_E2E_WFC (the wfc binary),
// WFC_E2E_CHROMIUM (default /usr/bin/chromium), WFC_E2E_ARTIFACTS (where the
// screenshots and logs go; default ./artifacts).
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const here = __dirname;
const vsix = path.resolve(requiredEnv('WFC_E2E_VSIX'));
const wfc = path.resolve(requiredEnv('WFC_E2E_WFC'));
const chromiumPath = process.env.WFC_E2E_CHROMIUM || '/usr/bin/chromium';
const artifacts = path.resolve(process.env.WFC_E2E_ARTIFACTS || path.join(here, 'artifacts'));
const codeServerBin = path.join(here, 'node_modules', 'code-server', 'out', 'node', 'entry.js');

// How long one condition may take before the test fails with what it saw.
const WAIT_MS = 45_000;

/** @type {import('playwright-core').Browser} */
let browser;
/** @type {import('playwright-core').Page} */
let page;
let server; // the code-server process (leader of its own process group)
let root; // temp folder: workspace, user data, extensions, TMPDIR
let workspace;
let userData;
let serverTmp;
let serverLog = '';

function requiredEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (see the head of e2e/test.js)`);
  return v;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Polls fn until it returns a truthy value; fails with what() after ms. */
async function waitFor(what, fn, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const detail = typeof what === 'function' ? await what() : what;
      throw new Error(`timed out after ${ms / 1000}s waiting for ${detail}${last ? ` (last error: ${last.message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

const t0 = Date.now();
/** Logs a step with the seconds since the start, for the CI log. */
function note(msg) {
  console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
}

async function shot(name) {
  if (!page) return;
  try {
    await page.screenshot({ path: path.join(artifacts, `${name}.png`) });
  } catch (err) {
    console.error(`screenshot ${name}: ${err.message}`);
  }
}

/** Runs body; the screenshot is taken whether it passes or fails. */
function e2e(name, body) {
  test(name, { timeout: 120_000 }, async () => {
    try {
      await body();
      await shot(`${name}-end`);
    } catch (err) {
      await shot(`${name}-FAILED`);
      throw err;
    }
  });
}

function findFiles(dir, pred, out = []) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) findFiles(p, pred, out);
    else if (pred(e.name)) out.push(p);
  }
  return out;
}

/** The log file of the extension's "wfc language server" output channel. */
function channelLog() {
  const files = findFiles(path.join(userData, 'logs'), (n) => n.includes('wfc language server') && !n.includes('trace'));
  return files.length ? fs.readFileSync(files[0], 'utf8') : '';
}

/** The text of the active editor's visible lines, as the DOM renders them. */
async function editorText() {
  return page.evaluate(() => {
    const ed = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
    if (!ed) return '';
    const lines = [...ed.querySelectorAll('.view-line')];
    lines.sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top));
    return lines.map((l) => l.textContent.replace(/\u00a0/g, ' ')).join('\n');
  });
}

/** Opens a workspace file with Quick Open (Ctrl+P) and waits until its text shows. */
async function openFile(name, expectText) {
  note(`open ${name}`);
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: WAIT_MS });
  await input.fill(name);
  await waitFor(`"${name}" in Quick Open`, async () => (await page.locator('.quick-input-list .monaco-list-row').first().textContent())?.includes(name));
  note(`quick open lists ${name}`);
  await page.keyboard.press('Enter');
  await waitFor(
    async () => `the editor to show ${name} (it shows: ${JSON.stringify((await editorText()).slice(0, 200))})`,
    async () => (await page.locator('.tab.active').textContent())?.includes(name) && (await editorText()).includes(expectText),
  );
  await page.locator('.editor-group-container.active .monaco-editor textarea, .editor-group-container.active .monaco-editor .native-edit-context').first().focus();
}

/** Moves the cursor with Go to Line/Column (Ctrl+G), 1-based. */
async function goTo(line, col) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: WAIT_MS });
  // Ctrl+G opens Quick Open with the ":" (go to line) prefix; fill replaces it.
  await input.fill(`:${line}:${col}`);
  await page.keyboard.press('Enter');
  await input.waitFor({ state: 'hidden', timeout: WAIT_MS });
  await waitFor(`the cursor at ${line}:${col}`, async () =>
    ((await page.locator('.statusbar-item[id="status.editor.selection"]').textContent()) || '').includes(`Ln ${line}, Col ${col}`),
  );
}

/** Runs a command by its title from the command palette (F1). */
async function runCommand(title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: WAIT_MS });
  await input.fill(`>${title}`);
  await waitFor(`"${title}" in the command palette`, async () => (await page.locator('.quick-input-list .monaco-list-row').first().textContent())?.includes(title));
  await page.keyboard.press('Enter');
  await input.waitFor({ state: 'hidden', timeout: WAIT_MS });
}

const sample = fs.readFileSync(path.join(here, 'fixture', 'sample.wf'), 'utf8');
const sampleLines = sample.split('\n');
/** 1-based line and column of the first `text` on a line that contains `lineHas`. */
function where(lineHas, text) {
  const i = sampleLines.findIndex((l) => l.includes(lineHas));
  assert.ok(i >= 0, `fixture/sample.wf has no line with ${JSON.stringify(lineHas)}`);
  const c = sampleLines[i].indexOf(text, sampleLines[i].indexOf(lineHas));
  assert.ok(c >= 0);
  return { line: i + 1, col: c + 1 };
}

before(async () => {
  for (const p of [vsix, wfc, chromiumPath, codeServerBin]) {
    assert.ok(fs.existsSync(p), `${p} does not exist`);
  }
  fs.rmSync(artifacts, { recursive: true, force: true });
  fs.mkdirSync(artifacts, { recursive: true });
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'wfc-e2e-'));
  workspace = path.join(root, 'workspace');
  userData = path.join(root, 'user-data');
  serverTmp = path.join(root, 'tmp');
  const extensions = path.join(root, 'extensions');
  for (const d of [workspace, userData, serverTmp, extensions, path.join(userData, 'User')]) fs.mkdirSync(d, { recursive: true });
  for (const f of fs.readdirSync(path.join(here, 'fixture'))) fs.copyFileSync(path.join(here, 'fixture', f), path.join(workspace, f));
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify(
      {
        'wfc.server.path': wfc,
        'files.autoSave': 'off',
        '[wf]': { 'editor.formatOnSave': true },
        'security.workspace.trust.enabled': false,
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.enableExperiments': false,
        'workbench.colorTheme': 'Default Dark Modern',
        'editor.accessibilitySupport': 'off',
        'editor.minimap.enabled': false,
        'editor.quickSuggestions': { other: false, comments: false, strings: false },
        'editor.suggestOnTriggerCharacters': false,
        'editor.hover.enabled': true,
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'extensions.ignoreRecommendations': true,
        'git.enabled': false,
        'telemetry.telemetryLevel': 'off',
        'update.mode': 'none',
        'chat.disableAIFeatures': true,
      },
      null,
      2,
    ),
  );

  const common = ['--user-data-dir', userData, '--extensions-dir', extensions];
  // code-server writes its config.yaml under XDG_CONFIG_HOME: keep it in root too.
  const env = { ...process.env, TMPDIR: serverTmp, XDG_CONFIG_HOME: path.join(root, 'config'), XDG_DATA_HOME: path.join(root, 'data') };
  note(`installing ${path.basename(vsix)}`);
  execFileSync(process.execPath, [codeServerBin, ...common, '--install-extension', vsix], { env, stdio: 'pipe', timeout: 120_000 });
  const installed = fs.readdirSync(extensions);
  assert.ok(installed.some((d) => d.startsWith('wfc-lang.wfc-')), `the .vsix did not install: ${extensions} has ${installed.join(', ')}`);

  const port = await freePort();
  note(`starting code-server on 127.0.0.1:${port}`);
  server = spawn(
    process.execPath,
    [
      codeServerBin,
      ...common,
      '--bind-addr',
      `127.0.0.1:${port}`,
      '--auth',
      'none',
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      workspace,
    ],
    { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const keep = (chunk) => {
    serverLog += chunk;
    if (serverLog.length > 1 << 20) serverLog = serverLog.slice(-(1 << 19));
  };
  server.stdout.on('data', keep);
  server.stderr.on('data', keep);
  let exited = null;
  server.on('exit', (code, signal) => (exited = `code-server exited (${code ?? signal})`));
  const base = `http://127.0.0.1:${port}`;
  await waitFor(
    () => `code-server to answer on ${base}/healthz${exited ? `: ${exited}` : ''}; its output:\n${serverLog}`,
    async () => {
      if (exited) throw new Error(exited);
      const r = await fetch(`${base}/healthz`);
      return r.ok;
    },
    60_000,
  );

  note('code-server is up; starting chromium');
  const { chromium } = require('playwright-core');
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    timeout: 60_000,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(WAIT_MS);
  await page.goto(`${base}/?folder=${encodeURIComponent(workspace)}`);
  note('page loaded; waiting for the workbench');
  await waitFor('the workbench and its explorer listing sample.wf', async () =>
    (await page.locator('.explorer-folders-view').textContent().catch(() => ''))?.includes('sample.wf'),
  );
  note('workbench ready');
});

after(async () => {
  await shot('zz-final');
  if (browser) await browser.close().catch(() => {});
  if (server && server.exitCode === null) {
    const gone = new Promise((r) => server.once('exit', r));
    try {
      process.kill(-server.pid, 'SIGTERM');
    } catch {}
    const t = setTimeout(() => {
      try {
        process.kill(-server.pid, 'SIGKILL');
      } catch {}
    }, 5000);
    await gone;
    clearTimeout(t);
  }
  if (userData) {
    const log = channelLog();
    if (log) fs.writeFileSync(path.join(artifacts, 'wfc-language-server.log'), log);
  }
  fs.writeFileSync(path.join(artifacts, 'code-server.log'), serverLog);
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

e2e('01-grammar-colours', async () => {
  await openFile('sample.wf', 'e2e_sample');
  // Default Dark Modern colours: a keyword, a string and a comment differ
  // from each other and from plain text only if the grammar tokenized them.
  note('sample.wf shown; waiting for its colours');
  const colours = await waitFor('the sample to be tokenized by the wf grammar', async () => {
    const c = await page.evaluate(() => {
      const spans = [...document.querySelectorAll('.editor-group-container.active .view-lines .view-line span span')];
      const colourOf = (pred) => {
        const s = spans.find((x) => pred(x.textContent));
        return s ? getComputedStyle(s).color : null;
      };
      const lines = document.querySelector('.editor-group-container.active .view-lines');
      return {
        plain: getComputedStyle(lines).color,
        keyword: colourOf((t) => t === 'workflow'),
        string: colourOf((t) => t.includes('shop.charge')),
        comment: colourOf((t) => t.includes('end-to-end')),
        handlerKw: colourOf((t) => t === 'handler'),
      };
    });
    const set = new Set([c.plain, c.keyword, c.string, c.comment]);
    return c.keyword && c.string && c.comment && set.size === 4 ? c : null;
  });
  fs.writeFileSync(path.join(artifacts, 'colours.json'), JSON.stringify(colours, null, 2));
});

e2e('02-language-server-starts', async () => {
  await waitFor(
    () => `"language server running" in the wfc output channel; it has:\n${channelLog()}`,
    () => channelLog().includes('language server running'),
  );
});

e2e('03-hover', async () => {
  const { line, col } = where('task notify after charge', 'charge');
  await goTo(line, col + 1);
  const hover = page.locator('.monaco-hover:not(.hidden) .monaco-hover-content');
  // Show Hover (Ctrl+K Ctrl+I), again every 5s while no hover is shown.
  let asked = 0;
  const text = await waitFor(
    async () => `a hover on "charge" (hover shows: ${JSON.stringify(await hover.first().textContent().catch(() => null))})`,
    async () => {
      if ((await hover.count()) === 0 && Date.now() - asked > 5000) {
        asked = Date.now();
        await page.keyboard.press('Control+K');
        await page.keyboard.press('Control+I');
      }
      const t = await hover.first().textContent({ timeout: 1000 });
      return t && /task charge/.test(t) && /shop\.charge/.test(t) ? t : null;
    },
  );
  fs.writeFileSync(path.join(artifacts, 'hover.txt'), text);
  await shot('03-hover');
  await page.keyboard.press('Escape');
});

e2e('04-diagnostic-after-typo', async () => {
  const { line, col } = where('task notify after charge', 'charge');
  await goTo(line, col);
  await page.keyboard.type('x');
  const problems = page.locator('.markers-panel .monaco-list-row');
  await waitFor('an error squiggle after typing "xcharge"', async () => (await page.locator('.editor-group-container.active .squiggly-error').count()) > 0);
  await page.keyboard.press('Control+Shift+M');
  const text = await waitFor(
    async () => `the Problems panel to list "xcharge" (it shows: ${JSON.stringify(await problems.allTextContents().catch(() => []))})`,
    async () => {
      const rows = await problems.allTextContents();
      return rows.find((r) => r.includes('xcharge'));
    },
  );
  fs.writeFileSync(path.join(artifacts, 'diagnostic.txt'), text);
  assert.match(text, /WF\d{4}/, 'the diagnostic carries its WF code');
  await shot('04-diagnostic-after-typo');
  // Undo the typo: the diagnostic must go away again.
  await page.locator('.editor-group-container.active .monaco-editor .view-lines').click();
  await goTo(line, col + 1);
  await page.keyboard.press('Control+Z');
  await waitFor(
    async () => `the squiggle to clear after undo (line ${line}: ${JSON.stringify((await editorText()).split('\n')[line - 1])})`,
    async () => (await page.locator('.editor-group-container.active .squiggly-error').count()) === 0,
  );
});

e2e('05-completion-after-after', async () => {
  const close = where('task notify after charge', 'task');
  // The line after the notify task's closing brace.
  const endOfNotify = sampleLines.findIndex((l, i) => i > close.line - 1 && l === '  }') + 1;
  await goTo(endOfNotify, 4);
  await page.keyboard.press('End');
  await page.keyboard.press('Enter');
  await page.keyboard.type('task ship after ');
  const rows = page.locator('.suggest-widget.visible .monaco-list-row');
  // Trigger Suggest (Ctrl+Space), again every 5s while it lists nothing.
  let asked = 0;
  const labels = await waitFor(
    async () => `completion after "after " to offer charge and notify (it offers: ${JSON.stringify(await rows.allTextContents().catch(() => []))})`,
    async () => {
      if ((await rows.count()) === 0 && Date.now() - asked > 5000) {
        asked = Date.now();
        await page.keyboard.press('Control+Space');
      }
      const t = await page.locator('.suggest-widget.visible .monaco-list-row .label-name').allTextContents();
      return t.includes('charge') && t.includes('notify') ? t : null;
    },
  );
  fs.writeFileSync(path.join(artifacts, 'completion.json'), JSON.stringify(labels));
  assert.ok(!labels.includes('ship'), `completion offers the node itself (a cycle): ${labels}`);
  await shot('05-completion-after-after');
  await page.keyboard.press('Escape');
});

e2e('06-format-on-save', async () => {
  const file = path.join(workspace, 'messy.wf');
  const want = execFileSync(wfc, ['fmt', file], { encoding: 'utf8' });
  assert.notEqual(fs.readFileSync(file, 'utf8'), want, 'fixture/messy.wf must need formatting');
  await openFile('messy.wf', 'workflow messy');
  await page.keyboard.press('Control+S');
  await waitFor(
    () => `messy.wf to be formatted on save; on disk it is:\n${fs.readFileSync(file, 'utf8')}\nwant:\n${want}`,
    () => fs.readFileSync(file, 'utf8') === want,
  );
  await waitFor('the editor to show the formatted text', async () => (await editorText()).includes('task second after first {'));
});

e2e('07-output-channel-levels', async () => {
  await runCommand('wfc: Show Language Server Output');
  const shown = await waitFor('the output view to show the server log', async () => {
    const lines = (await page.locator('.panel .monaco-editor .view-line').allTextContents()).map((l) => l.replace(/\u00a0/g, ' '));
    return lines.find((l) => l.includes('wfc language server starting'));
  });
  assert.match(shown, /\[info\]/, `the output view shows the server's info line at another level: ${shown}`);
  const log = channelLog();
  const start = log.split('\n').find((l) => l.includes('wfc language server starting'));
  assert.ok(start, `the server's start line is not in the channel:\n${log}`);
  assert.match(start, /\[info\]/, `the server's info line is not logged at info: ${start}`);
  const errors = log.split('\n').filter((l) => l.includes('[error]'));
  assert.deepEqual(errors, [], `the wfc output channel has error lines:\n${log}`);
});

test('08-no-temp-folders-left', { timeout: 30_000 }, () => {
  const left = fs.readdirSync(serverTmp).filter((n) => n.startsWith('wfc-'));
  assert.deepEqual(left, [], `the extension left temporary folders in its TMPDIR: ${left}`);
});
