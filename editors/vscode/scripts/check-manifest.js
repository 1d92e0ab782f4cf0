#!/usr/bin/env node
// Checks the extension's manifest and grammar without VS Code:
//
//  * package.json: fields vsce and VS Code need, every path it names exists,
//    the language id / scope name / grammar agree, activation events, the
//    settings and commands the client code uses are declared, dependencies
//    are pinned and locked, @types/vscode is not newer than engines.vscode;
//  * language-configuration.json parses and its regexes compile;
//  * syntaxes/wf.tmLanguage.json is what scripts/build-grammar.js generates,
//    every regex compiles with Oniguruma (the engine VS Code uses);
//  * keywords: the words in the grammar's regexes are exactly the words of
//    keywords.json, and each keyword, tokenized where it has its meaning,
//    gets its scope — and is a plain name where it is used as one;
//  * every snapshot test source has a committed .snap.
//
//   node scripts/check-manifest.js [--require-build]
//
// --require-build also requires the compiled client (out/extension.js).
'use strict';

const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const root = path.join(__dirname, '..');
const rel = (p) => path.join(root, p);
const readJSON = (p) => JSON.parse(fs.readFileSync(rel(p), 'utf8'));
const requireBuild = process.argv.includes('--require-build');

let passed = 0;
const failed = [];
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (err) {
    failed.push(name);
    console.log(`FAIL ${name}\n     ${String(err && err.message ? err.message : err).split('\n').join('\n     ')}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function sameSet(a, b, what) {
  const A = new Set(a);
  const B = new Set(b);
  const onlyA = [...A].filter((x) => !B.has(x)).sort();
  const onlyB = [...B].filter((x) => !A.has(x)).sort();
  assert(onlyA.length === 0 && onlyB.length === 0, `${what}: only in the first: [${onlyA.join(', ')}]; only in the second: [${onlyB.join(', ')}]`);
}

const pkg = readJSON('package.json');
const languages = (pkg.contributes && pkg.contributes.languages) || [];
const grammars = (pkg.contributes && pkg.contributes.grammars) || [];
const LANGUAGE_ID = 'wf';
const SCOPE = 'source.wf';

// Oniguruma + vscode-textmate, loaded once.
let tm;
async function textmate() {
  if (tm) return tm;
  const vsctm = require('vscode-textmate');
  const onig = require('vscode-oniguruma');
  const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
  await onig.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const onigLib = Promise.resolve({
    createOnigScanner: (sources) => new onig.OnigScanner(sources),
    createOnigString: (s) => new onig.OnigString(s),
  });
  const registry = new vsctm.Registry({
    onigLib,
    loadGrammar: async (scopeName) => {
      const g = grammars.find((x) => x.scopeName === scopeName);
      if (!g) return null;
      return vsctm.parseRawGrammar(fs.readFileSync(rel(g.path), 'utf8'), rel(g.path));
    },
  });
  const grammar = await registry.loadGrammar(SCOPE);
  assert(grammar, `cannot load grammar ${SCOPE}`);
  tm = { vsctm, onig, grammar };
  return tm;
}

/** Tokenizes lines; returns the innermost scope of the token at [line, col), asserting it is exactly `len` long. */
async function scopeAt(lines, lineNo, col, len) {
  const { vsctm, grammar } = await textmate();
  let state = vsctm.INITIAL;
  let tokens;
  for (let i = 0; i <= lineNo; i++) {
    const r = grammar.tokenizeLine(lines[i], state);
    state = r.ruleStack;
    tokens = r.tokens;
  }
  const t = tokens.find((x) => x.startIndex <= col && col < x.endIndex);
  const text = lines[lineNo].slice(t.startIndex, t.endIndex);
  const want = lines[lineNo].slice(col, col + len);
  return { scope: t.scopes[t.scopes.length - 1], whole: t.startIndex === col && t.endIndex === col + len, text, want, scopes: t.scopes };
}

function regexesOf(node, out = [], inNumbers = false) {
  if (Array.isArray(node)) {
    node.forEach((n) => regexesOf(n, out, inNumbers));
  } else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (['match', 'begin', 'end', 'while'].includes(k) && typeof v === 'string') out.push({ re: v, inNumbers });
      else if (k === 'repository') {
        for (const [name, rule] of Object.entries(v)) regexesOf(rule, out, inNumbers || name === 'numbers' || name === 'string-escapes');
      } else if (typeof v === 'object') regexesOf(v, out, inNumbers);
    }
  }
  return out;
}

// The literal words of a regex: escapes, character classes and group
// syntax removed (`(?<![A-Za-z0-9_])(?:task|flow)\b` -> task, flow).
function wordsOfRegex(re) {
  const s = re
    .replace(/\\./g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\(\?(?:<[=!]|[=!:])/g, ' ')
    .replace(/\{\d*,?\d*\}/g, ' ');
  return s.match(/[A-Za-z_][A-Za-z0-9_]*/g) || [];
}

(async () => {
  // ------------------------------------------------------------------ package.json
  await check('package.json has the fields vsce and VS Code need', () => {
    for (const f of ['name', 'displayName', 'description', 'version', 'publisher', 'engines', 'main', 'categories', 'repository']) {
      assert(pkg[f], `missing "${f}"`);
    }
    assert(pkg.name === 'wfc', `name is ${pkg.name}, want wfc`);
    assert(/^\^?\d+\.\d+\.\d+$/.test(pkg.engines.vscode), `engines.vscode ${pkg.engines.vscode} is not ^X.Y.Z`);
    assert(pkg.categories.includes('Programming Languages'), 'categories lack "Programming Languages"');
    assert(pkg.main === './out/extension.js', `main is ${pkg.main}`);
  });

  await check(`language id is "${LANGUAGE_ID}" for .wf files, with its configuration`, () => {
    assert(languages.length === 1, `want one language, have ${languages.length}`);
    const l = languages[0];
    assert(l.id === LANGUAGE_ID, `language id ${l.id}`);
    sameSet(l.extensions, ['.wf'], 'extensions');
    assert(Array.isArray(l.aliases) && l.aliases.length > 0, 'no aliases');
    assert(l.configuration && fs.existsSync(rel(l.configuration)), `configuration ${l.configuration} does not exist`);
  });

  await check('activation events start the client for the language', () => {
    const ev = pkg.activationEvents || [];
    assert(ev.includes(`onLanguage:${LANGUAGE_ID}`), `activationEvents lack onLanguage:${LANGUAGE_ID}`);
    assert(!ev.includes('*'), 'activationEvents must not use *');
  });

  await check(`grammar contribution: language, scope name ${SCOPE}, path`, () => {
    assert(grammars.length === 1, `want one grammar, have ${grammars.length}`);
    const g = grammars[0];
    assert(g.language === LANGUAGE_ID, `grammar language ${g.language}`);
    assert(g.scopeName === SCOPE, `grammar scopeName ${g.scopeName}`);
    assert(fs.existsSync(rel(g.path)), `${g.path} does not exist`);
    const tmg = JSON.parse(fs.readFileSync(rel(g.path), 'utf8'));
    assert(tmg.scopeName === g.scopeName, `grammar file scopeName ${tmg.scopeName} != package.json ${g.scopeName}`);
    const names = JSON.stringify(tmg).match(/"(?:name|contentName)":\s*"([^"]+)"/g) || [];
    const bad = names.map((n) => n.replace(/^.*:\s*"|"$/g, '')).flatMap((n) => n.split(' ')).filter((n) => !n.endsWith('.wf') && n !== 'wf');
    assert(bad.length === 0, `scopes not ending in .wf: ${[...new Set(bad)].join(', ')}`);
  });

  await check('every path package.json names exists', () => {
    const paths = [
      ...languages.map((l) => l.configuration),
      ...grammars.map((g) => g.path),
      pkg.icon,
      'README.md',
      'CHANGELOG.md',
      'src/extension.ts',
      'tsconfig.json',
      'package-lock.json',
    ].filter(Boolean);
    if (requireBuild) paths.push(pkg.main, ...(pkg.files || []));
    else paths.push(...(pkg.files || []).filter((f) => !f.startsWith('out/')));
    const missing = [...new Set(paths)].filter((p) => !fs.existsSync(rel(p)));
    assert(missing.length === 0, `missing: ${missing.join(', ')}${requireBuild ? '' : ' (run npm run compile)'}`);
  });

  await check('settings: wfc.server.path, wfc.server.args, wfc.trace.server declared with their defaults', () => {
    const props = pkg.contributes.configuration.properties;
    sameSet(Object.keys(props), ['wfc.server.path', 'wfc.server.args', 'wfc.trace.server'], 'configuration keys');
    assert(props['wfc.server.path'].default === 'wfc', 'wfc.server.path default must be "wfc"');
    assert(JSON.stringify(props['wfc.server.args'].default) === '["lsp"]', 'wfc.server.args default must be ["lsp"]');
    sameSet(props['wfc.trace.server'].enum, ['off', 'messages', 'verbose'], 'wfc.trace.server values');
    assert(props['wfc.trace.server'].default === 'off', 'wfc.trace.server default must be off');
    const restricted = (pkg.capabilities && pkg.capabilities.untrustedWorkspaces && pkg.capabilities.untrustedWorkspaces.restrictedConfigurations) || [];
    sameSet(restricted, ['wfc.server.path', 'wfc.server.args'], 'restrictedConfigurations (settings that choose what runs)');
  });

  await check('settings and commands the client uses are declared, and only those', () => {
    const src = fs.readdirSync(rel('src')).filter((f) => f.endsWith('.ts')).map((f) => fs.readFileSync(rel(`src/${f}`), 'utf8')).join('\n');
    assert(/getConfiguration\('wfc'\)/.test(src), "client never reads getConfiguration('wfc')");
    const read = [...src.matchAll(/\.get(?:<[^>]*>)?\('([a-zA-Z.]+)'/g)].map((m) => `wfc.${m[1]}`);
    sameSet(read, Object.keys(pkg.contributes.configuration.properties).filter((k) => k !== 'wfc.trace.server').concat(['wfc.trace.server']), 'settings read by src/ vs declared');
    const registered = [...src.matchAll(/registerCommand\('([^']+)'/g)].map((m) => m[1]);
    sameSet(registered, (pkg.contributes.commands || []).map((c) => c.command), 'commands registered by src/ vs declared');
    assert(src.includes(`'${LANGUAGE_ID}'`), `client does not use the language id '${LANGUAGE_ID}'`);
  });

  await check('dependencies are pinned and locked in package-lock.json', () => {
    const lock = readJSON('package-lock.json');
    assert(lock.lockfileVersion >= 2, 'package-lock.json lockfileVersion < 2');
    const all = { ...pkg.dependencies, ...pkg.devDependencies };
    for (const [name, v] of Object.entries(all)) {
      assert(/^\d+\.\d+\.\d+$/.test(v), `${name}@${v} is not an exact version`);
      const locked = lock.packages[`node_modules/${name}`];
      assert(locked && locked.version === v, `${name}: package.json ${v}, package-lock.json ${locked && locked.version}`);
    }
    for (const need of ['typescript', '@types/vscode', '@types/node', '@vscode/vsce', 'vscode-tmgrammar-test']) {
      assert(pkg.devDependencies[need], `devDependencies lack ${need}`);
    }
    assert(pkg.dependencies['vscode-languageclient'], 'dependencies lack vscode-languageclient');
  });

  await check('@types/vscode is not newer than engines.vscode; vscode-languageclient fits engines.vscode', () => {
    const minor = (v) => v.replace(/^[\^~]/, '').split('.').map(Number);
    const [eMaj, eMin] = minor(pkg.engines.vscode);
    const [tMaj, tMin] = minor(pkg.devDependencies['@types/vscode']);
    assert(tMaj < eMaj || (tMaj === eMaj && tMin <= eMin), `@types/vscode ${pkg.devDependencies['@types/vscode']} > engines.vscode ${pkg.engines.vscode}`);
    const lc = readJSON('node_modules/vscode-languageclient/package.json');
    const [lMaj, lMin] = minor(lc.engines.vscode);
    assert(lMaj < eMaj || (lMaj === eMaj && lMin <= eMin), `vscode-languageclient needs vscode ${lc.engines.vscode}, engines.vscode is ${pkg.engines.vscode}`);
  });

  // ------------------------------------------------------------------ language configuration
  await check('language-configuration.json: comments, brackets, pairs, regexes', () => {
    const c = readJSON(languages[0].configuration);
    assert(c.comments.lineComment === '//', 'lineComment');
    sameSet(c.comments.blockComment, ['/*', '*/'], 'blockComment');
    const pairs = (list) => list.map((p) => (Array.isArray(p) ? p.join('') : p.open + p.close));
    for (const p of ['{}', '[]', '()']) {
      assert(pairs(c.brackets).includes(p), `brackets lack ${p}`);
      assert(pairs(c.autoClosingPairs).includes(p), `autoClosingPairs lack ${p}`);
      assert(pairs(c.surroundingPairs).includes(p), `surroundingPairs lack ${p}`);
    }
    for (const q of ['""', "''"]) {
      assert(pairs(c.autoClosingPairs).includes(q), `autoClosingPairs lack ${q}`);
      assert(pairs(c.surroundingPairs).includes(q), `surroundingPairs lack ${q}`);
    }
    for (const re of [c.wordPattern, c.indentationRules.increaseIndentPattern, c.indentationRules.decreaseIndentPattern, c.folding.markers.start, c.folding.markers.end]) {
      new RegExp(re); // throws on a bad pattern
    }
    const word = new RegExp(`^(?:${c.wordPattern})$`);
    for (const w of ['max_hops', 'enrich', '1h30m', 'x1']) assert(word.test(w), `wordPattern does not take ${w} as one word`);
    assert(new RegExp(c.indentationRules.increaseIndentPattern).test('  task a {'), 'increaseIndentPattern misses "task a {"');
    assert(new RegExp(c.indentationRules.decreaseIndentPattern).test('  }'), 'decreaseIndentPattern misses "}"');
  });

  // ------------------------------------------------------------------ grammar
  await check('grammar is generated from scripts/build-grammar.js and keywords.json', () => {
    execFileSync(process.execPath, [rel('scripts/build-grammar.js'), '--check'], { stdio: 'pipe' });
  });

  const grammarJSON = JSON.parse(fs.readFileSync(rel(grammars[0].path), 'utf8'));
  const regexes = regexesOf(grammarJSON);

  await check(`all ${regexes.length} grammar regexes compile with Oniguruma`, async () => {
    const { onig } = await textmate();
    const bad = [];
    for (const { re } of regexes) {
      try {
        new onig.OnigScanner([re]).dispose();
      } catch (e) {
        bad.push(`${re}: ${e.message}`);
      }
    }
    assert(bad.length === 0, bad.join('\n'));
  });

  const kw = readJSON('keywords.json');
  const groups = Object.entries(kw).filter(([k]) => !k.startsWith('$'));

  await check('keywords.json: groups of unique identifiers', () => {
    for (const [g, words] of groups) {
      assert(Array.isArray(words) && words.length > 0, `${g} is not a non-empty list`);
      assert(new Set(words).size === words.length, `${g} has duplicates`);
      for (const w of words) assert(/^[a-z_][a-z0-9_]*$/.test(w), `${g}: "${w}" is not an identifier`);
    }
  });

  await check('the words in the grammar are exactly the keywords of keywords.json', () => {
    const inGrammar = regexes.filter((r) => !r.inNumbers).flatMap((r) => wordsOfRegex(r.re));
    sameSet(inGrammar, groups.flatMap(([, w]) => w), 'grammar words vs keywords.json');
  });

  // Each keyword where it has its meaning: a line and the column of the
  // keyword in it, and the innermost scope it must get.
  const itemLine = (w) => {
    if (['input', 'output', 'config', 'with'].includes(w)) return [`  ${w} { }`];
    if (kw.nodeKinds.includes(w)) return [`  ${w} n { }`];
    if (w === 'handler') return ['  handler "h" { }'];
    if (w === 'for_each') return ['  for_each v in xs'];
    return [`  ${w} x`];
  };
  // [line, n]: the keyword is the n-th occurrence of the word in the line.
  const contexts = {
    declarations: (w) => [{ import: 'import "x.wf"', handler: 'handler "h" {', workflow: 'workflow w {' }[w]],
    nodeKinds: (w) => [`${w} n {`],
    nodeHeader: () => ['task b after a join all {'],
    joinModes: (w) => [`task b after a, c join ${w} {`],
    workflowItems: itemLine,
    handlerItems: itemLine,
    nodeItems: itemLine,
    forEach: () => ['  for_each v in xs parallel 4 tolerate 10%'],
    branchRules: (w) => [w === 'when' ? '    when x => a' : '    else => a'],
    retryItems: itemLine,
    loopItems: itemLine,
    compensateItems: itemLine,
    onTimeout: (w) => [`  on_timeout ${w}`],
    backoff: (w) => [`  backoff ${w}`],
    types: (w) => [['list', 'map'].includes(w) ? `  f: ${w}<int>` : `  f: ${w}`],
    literals: (w) => [`  when ${w}`],
    scopeNames: (w) => [`  when ${w}.x`],
    celMacros: (w) => [w === 'has' ? `  when ${w}(a.b)` : `  when xs.${w}(x, true)`],
    builtinHandlers: (w) => [`  run "${w}"`],
    reservedNames: (w) => [`  task ${w} {`, w === 'task' ? 1 : 0],
  };
  const expected = {
    declarations: /^(keyword\.control\.import|storage\.type\.(handler|workflow))\.wf$/,
    nodeKinds: /^storage\.type\.node\.wf$/,
    nodeHeader: /^keyword\.other\.node-header\.wf$/,
    joinModes: /^constant\.language\.join-mode\.wf$/,
    workflowItems: /^(keyword|storage\.type)\./,
    handlerItems: /^keyword\./,
    nodeItems: /^keyword\./,
    forEach: /^keyword\./,
    branchRules: /^keyword\.control\.conditional\.wf$/,
    retryItems: /^keyword\./,
    loopItems: /^keyword\./,
    compensateItems: /^keyword\./,
    onTimeout: /^constant\.language\.on-timeout\.wf$/,
    backoff: /^constant\.language\.backoff\.wf$/,
    types: /^support\.type\.wf$/,
    literals: /^constant\.language\./,
    scopeNames: /^variable\.language\.wf$/,
    celMacros: /^support\.function\.macro\.wf$/,
    builtinHandlers: /^support\.function\.builtin\.wf$/,
    reservedNames: /^invalid\.illegal\.reserved-name\.wf$/,
  };

  await check('every keyword gets its scope where it has its meaning', async () => {
    const problems = [];
    let n = 0;
    for (const [g, words] of groups) {
      assert(contexts[g] && expected[g], `no tokenization context for keywords.json group "${g}": add one to scripts/check-manifest.js`);
      for (const w of words) {
        const [line, nth = 0] = contexts[g](w);
        const col = [...line.matchAll(new RegExp(`(?<![A-Za-z0-9_])${w}(?![A-Za-z0-9_])`, 'g'))].map((m) => m.index)[nth];
        assert(col !== undefined, `context for ${g} "${w}" is wrong: ${line}`);
        const r = await scopeAt([line], 0, col, w.length);
        n++;
        if (!r.whole || !expected[g].test(r.scope)) problems.push(`${g}: "${w}" in \`${line.trim()}\` -> token "${r.text}" ${r.scope}`);
      }
    }
    assert(problems.length === 0, problems.join('\n'));
    console.log(`     (${n} keyword uses tokenized)`);
  });

  await check('no keyword is highlighted where it is a name (member, field, parameter)', async () => {
    const problems = [];
    for (const w of [...new Set(groups.flatMap(([, words]) => words))]) {
      const cases = [
        [`  when x.${w} > 0`, 9, /^variable\.other\.member\.wf$/],
        [`  config { ${w}: string }`, 11, /^variable\.other\.property\.wf$/],
        [`  with { ${w} = 1 }`, 9, /^variable\.parameter\.wf$/],
      ];
      for (const [line, col, want] of cases) {
        const r = await scopeAt([line], 0, col, w.length);
        if (!r.whole || !want.test(r.scope)) problems.push(`"${w}" in \`${line.trim()}\` -> token "${r.text}" ${r.scope}`);
      }
    }
    assert(problems.length === 0, problems.join('\n'));
  });

  // ------------------------------------------------------------------ tests
  await check('unit tests declare the grammar scope; snapshot sources have committed .snap files', () => {
    const unit = fs.readdirSync(rel('tests/unit')).filter((f) => f.endsWith('.test.wf'));
    assert(unit.length > 0, 'no tests/unit/*.test.wf');
    for (const f of unit) {
      const first = fs.readFileSync(rel(`tests/unit/${f}`), 'utf8').split('\n')[0];
      assert(first.startsWith(`// SYNTAX TEST "${SCOPE}"`), `${f}: first line is not // SYNTAX TEST "${SCOPE}" ...`);
    }
    const snaps = fs.readdirSync(rel('tests/snap')).filter((f) => f.endsWith('.wf'));
    assert(snaps.length > 0, 'no tests/snap/*.wf');
    const missing = snaps.filter((f) => !fs.existsSync(rel(`tests/snap/${f}.snap`)));
    assert(missing.length === 0, `no snapshot for ${missing.join(', ')}: run npm run test:snap:update and commit the .snap`);
  });

  console.log(`\nmanifest: ${passed} passed, ${failed.length} failed`);
  process.exit(failed.length ? 1 : 0);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
