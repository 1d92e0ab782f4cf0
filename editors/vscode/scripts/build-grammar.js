#!/usr/bin/env node
// Builds syntaxes/wf.tmLanguage.json from the rules below and the keyword
// lists in keywords.json (the one list of wf keywords; keywordcheck/ checks
// it against the Go compiler). Regexes are written here with String.raw so
// that they read as Oniguruma sees them, not double-escaped JSON.
//
//   node scripts/build-grammar.js          write the grammar
//   node scripts/build-grammar.js --check  exit 1 if the committed grammar differs
//
// The grammar is lexical: wf reserves no word (docs/language.md §2.5), so a
// keyword is highlighted only where it starts an item — never after `.`
// (`output.retry`) and never as a field or parameter name (`timeout: int`,
// `timeout = 5`). Words with a meaning in one place only (join modes,
// backoff kinds, on_timeout values, types, built-in handler names) are
// highlighted only there.
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const out = path.join(root, 'syntaxes', 'wf.tmLanguage.json');
const kw = JSON.parse(fs.readFileSync(path.join(root, 'keywords.json'), 'utf8'));

// ---------------------------------------------------------------------------
// Keyword groups -> scopes. Every word of keywords.json must land in exactly
// the rules below (scripts/check-manifest.js checks both directions).

const union = (...lists) => [...new Set(lists.flat())];
const minus = (list, ...drop) => list.filter((w) => !drop.flat().includes(w));
// Longest first, so no alternative is a prefix of a later one.
const alt = (words) => [...new Set(words)].sort((a, b) => b.length - a.length || a.localeCompare(b)).join('|');

// Words that start items, by scope. nodeItems, workflowItems, handlerItems,
// retryItems, loopItems, compensateItems, forEach and branchRules together
// must be covered by these (checked below).
const itemScopes = {
  'keyword.control.conditional.wf': ['when', 'else', 'branch', 'dispatch'],
  'keyword.control.loop.wf': ['loop', 'while', 'for_each', 'parallel', 'tolerate', 'max', 'back_to', 'exhausted'],
  'keyword.control.flow.wf': ['routes', 'default', 'on_error', 'on_reject', 'retry', 'compensate', 'finally'],
  'keyword.other.block.wf': ['with', 'config'],
  'keyword.other.item.wf': [
    'run', 'timeout', 'description', 'model', 'temperature', 'prompt', 'approvers', 'on_timeout', 'uses', 'escalate_to', 'escalate_after',
    'max_routes', 'tools', 'max_tool_calls', 'max_tokens',
    'version', 'deadline', 'max_hops', 'max_fanout', 'max_input_bytes', 'max_output_bytes', 'max_state_bytes', 'attempts', 'backoff', 'delay', 'max_delay', 'on', 'except',
  ],
};
// Item words handled by their own rules.
const specialItems = union(kw.nodeKinds, kw.declarations, kw.scopeNames, ['in', 'handler']);
{
  const items = union(kw.nodeItems, kw.workflowItems, kw.handlerItems, kw.retryItems, kw.loopItems,
    kw.compensateItems, kw.forEach, kw.branchRules);
  const scoped = Object.values(itemScopes).flat();
  const missing = minus(items, scoped, specialItems);
  const extra = minus(scoped, items);
  if (missing.length || extra.length) {
    console.error(`build-grammar: item words without a scope: [${missing}], scoped but not in keywords.json: [${extra}]`);
    process.exit(1);
  }
}

const ID = String.raw`[A-Za-z_][A-Za-z0-9_]*`;
const B = String.raw`(?<![A-Za-z0-9_.])`; // not inside a word, not after `.`
const E = String.raw`(?![A-Za-z0-9_])`; // end of word
// A word followed by one of these is a name (field, parameter, member,
// function), not an item keyword: `timeout: duration`, `timeout = 5`,
// `retry.x`, `max(…)`. `=>` is allowed (`default => x`).
const NOT_NAME = String.raw`(?!\s*(?:=(?![=>])|\?|:|\.|\())`;
const RESERVED = alt(kw.reservedNames);
const SCALARS = alt(minus(kw.types, ['list', 'map']));
const GENERICS = alt(['list', 'map']);
const UNIT = String.raw`(?:ns|us|µs|ms|s|m|h)`;
const STRING_START = String.raw`[rRbB]{0,2}["']`;

// ---------------------------------------------------------------------------
// Strings. CEL's forms: "…" '…' """…""" '''…''', prefixes r/R (raw) and b/B
// (bytes), combined (rb"…", Br'…'). Non-raw strings have escapes. Any string
// containing {{ is a template; the template expression ends at the first }}
// (or where the enclosing string ends).

const RAW_PREFIX = String.raw`(?:[rR][rRbB]?|[bB][rR])`;
const BYTES_PREFIX = String.raw`(?:[bB]{1,2})`;

const quoteForms = [
  { key: 'tdq', open: '"""', q: '"', triple: true, name: 'string.quoted.triple.double' },
  { key: 'tsq', open: "'''", q: "'", triple: true, name: 'string.quoted.triple.single' },
  { key: 'dq', open: '"', q: '"', triple: false, name: 'string.quoted.double' },
  { key: 'sq', open: "'", q: "'", triple: false, name: 'string.quoted.single' },
];

function stringRule(f, raw, withTemplates) {
  // A prefix must not be glued to a name (`xr"a"` is the name xr and a string).
  const prefix = raw ? `(?<![A-Za-z0-9_])(${RAW_PREFIX})` : `(?:(?<![A-Za-z0-9_])(${BYTES_PREFIX}))?`;
  const patterns = [];
  if (!raw) patterns.push({ include: '#string-escapes' });
  if (withTemplates) patterns.push({ include: `#template-${f.key}` });
  return {
    name: `${f.name}${raw ? '.raw' : ''}.wf`,
    begin: `${prefix}(${f.open})`,
    beginCaptures: {
      1: { name: 'storage.type.string.wf' },
      2: { name: 'punctuation.definition.string.begin.wf' },
    },
    // A one-line string ends at the end of the line (unterminated: WF0003).
    end: f.triple ? `(${f.open})` : `(${f.open})|$`,
    endCaptures: { 1: { name: 'punctuation.definition.string.end.wf' } },
    patterns,
  };
}

// Strings inside a template expression: they end early where the enclosing
// string ends, as in the lexer (`"{{ 'a" }}"` ends the outer string at `"`).
function nestedStringRule(f, raw, outer) {
  const r = stringRule(f, raw, false);
  const stop = outer.triple ? `(?=${outer.open})` : `(?=${outer.q})`;
  r.end = f.triple ? `(${f.open})|${stop}` : `(${f.open})|${stop}|$`;
  return r;
}

function templateRule(outer) {
  // Strings of the other quote kind may appear inside; in a triple-quoted
  // string, one-line strings of the same kind may too.
  const nested = [];
  for (const f of quoteForms) {
    const ok = outer.triple ? !(f.triple && f.q === outer.q) : f.q !== outer.q;
    if (!ok) continue;
    nested.push(nestedStringRule(f, true, outer), nestedStringRule(f, false, outer));
  }
  const stop = outer.triple ? `(?=${outer.open})` : `(?=${outer.q})|$`;
  return {
    name: 'meta.template.expression.wf',
    contentName: 'meta.embedded.expression.wf',
    begin: String.raw`\{\{`,
    beginCaptures: { 0: { name: 'punctuation.section.embedded.begin.wf' } },
    end: String.raw`(\}\})|${stop}`,
    endCaptures: { 1: { name: 'punctuation.section.embedded.end.wf' } },
    patterns: [...nested, { include: '#expression' }],
  };
}

// Handler names: `handler "x"`, `run "x"`. Built-in handlers get their own scope.
function handlerNameRule(q) {
  const f = quoteForms.find((x) => x.key === (q === '"' ? 'dq' : 'sq'));
  return {
    name: `${f.name}.wf`,
    contentName: 'entity.name.function.handler.wf',
    begin: String.raw`(?:(?<![A-Za-z0-9_])([rRbB]{1,2}))?(${q})`,
    beginCaptures: {
      1: { name: 'storage.type.string.wf' },
      2: { name: 'punctuation.definition.string.begin.wf' },
    },
    end: `(${q})|$`,
    endCaptures: { 1: { name: 'punctuation.definition.string.end.wf' } },
    patterns: [
      { match: String.raw`\G(?:${alt(kw.builtinHandlers)})(?=${q})`, name: 'support.function.builtin.wf' },
      { include: '#string-escapes' },
    ],
  };
}

// `KEYWORD "handler name"`, possibly with the name on the next line.
function handlerNameAfter(word, scope) {
  return {
    begin: String.raw`${B}(${word})${E}${NOT_NAME}`,
    beginCaptures: { 1: { name: scope } },
    end: String.raw`(?<=["'])|(?=(?!${STRING_START}|//|/\*)\S)`,
    patterns: [
      { include: '#comments' },
      { include: '#string-triple' },
      handlerNameRule('"'),
      handlerNameRule("'"),
    ],
  };
}

// A comma-separated list of node ids: `routes a, b`, `=> a, b`.
const targetPatterns = [
  { include: '#comments' },
  { match: ',', name: 'punctuation.separator.comma.wf' },
  { match: ID, name: 'variable.other.node.wf' },
];
const TARGETS_END = String.raw`(?<=[A-Za-z0-9_])(?!\s*,)|(?=[^\s\w,/])`;

// ---------------------------------------------------------------------------

const repository = {
  comments: {
    patterns: [
      {
        name: 'comment.block.wf',
        begin: String.raw`/\*`,
        beginCaptures: { 0: { name: 'punctuation.definition.comment.begin.wf' } },
        end: String.raw`\*/`,
        endCaptures: { 0: { name: 'punctuation.definition.comment.end.wf' } },
      },
      {
        name: 'comment.line.double-slash.wf',
        begin: '//',
        beginCaptures: { 0: { name: 'punctuation.definition.comment.wf' } },
        end: '$',
      },
    ],
  },

  strings: {
    patterns: [{ include: '#string-triple' }, { include: '#string-single-line' }],
  },
  'string-triple': {
    patterns: quoteForms.filter((f) => f.triple).flatMap((f) => [stringRule(f, true, true), stringRule(f, false, true)]),
  },
  'string-single-line': {
    patterns: quoteForms.filter((f) => !f.triple).flatMap((f) => [stringRule(f, true, true), stringRule(f, false, true)]),
  },
  'string-escapes': {
    patterns: [
      {
        name: 'constant.character.escape.wf',
        match: String.raw`\\(?:[abfnrtv\\'"` + '`' + String.raw`?]|x[0-9A-Fa-f]{2}|[0-3][0-7]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8})`,
      },
      { name: 'invalid.illegal.escape.wf', match: String.raw`\\.?` },
    ],
  },
  ...Object.fromEntries(quoteForms.map((f) => [`template-${f.key}`, templateRule(f)])),

  numbers: {
    patterns: [
      {
        // 250ms, 1h30m, 1.5h, .5s, 10µs
        name: 'constant.numeric.duration.wf',
        match: String.raw`(?<![A-Za-z0-9_.])(?:\d+(?:\.\d+)?|\.\d+)${UNIT}(?:(?:\d+(?:\.\d*)?|\.\d+)${UNIT})*(?![A-Za-z0-9_.µ])`,
      },
      {
        name: 'constant.numeric.float.wf',
        match: String.raw`(?<![A-Za-z0-9_.])(?:(?:\d+\.\d+|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![A-Za-z0-9_µ])`,
      },
      {
        name: 'constant.numeric.integer.hexadecimal.wf',
        match: String.raw`(?<![A-Za-z0-9_.])0[xX][0-9A-Fa-f]+([uU])?(?![A-Za-z0-9_µ])`,
        captures: { 1: { name: 'storage.type.numeric.unsigned.wf' } },
      },
      {
        name: 'constant.numeric.integer.decimal.wf',
        match: String.raw`(?<![A-Za-z0-9_.])\d+([uU])?(?![A-Za-z0-9_µ])`,
        captures: { 1: { name: 'storage.type.numeric.unsigned.wf' } },
      },
      {
        // 5x, 1h5, 1d, 1e, 0x, 0xg: WF0005
        name: 'invalid.illegal.numeric.wf',
        match: String.raw`(?<![A-Za-z0-9_.])(?:(?:0[xX][0-9A-Fa-f]*|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[A-Za-z_µ][A-Za-z0-9_.µ]*|0[xX](?![0-9A-Fa-f]))`,
      },
    ],
  },

  literals: {
    patterns: [
      { name: 'constant.language.boolean.wf', match: String.raw`${B}(?:true|false)${E}` },
      { name: 'constant.language.null.wf', match: String.raw`${B}null${E}` },
    ],
  },

  // ---- declarations ----
  import: {
    match: String.raw`${B}(import)${E}${NOT_NAME}`,
    captures: { 1: { name: 'keyword.control.import.wf' } },
  },
  'handler-declaration': handlerNameAfter('handler', 'storage.type.handler.wf'),
  'workflow-declaration': {
    match: String.raw`${B}(workflow)${E}${NOT_NAME}(?:\s+(${ID}))?`,
    captures: { 1: { name: 'storage.type.workflow.wf' }, 2: { name: 'entity.name.type.workflow.wf' } },
  },
  'node-header': {
    // task enrich after a, b join any {
    name: 'meta.node.header.wf',
    begin: String.raw`${B}(${alt(kw.nodeKinds)})\s+(?:(${RESERVED})${E}|(${ID}))(?=\s*(?:$|\{|//|/\*|(?:after|join)${E}))`,
    beginCaptures: {
      1: { name: 'storage.type.node.wf' },
      2: { name: 'invalid.illegal.reserved-name.wf' },
      3: { name: 'entity.name.function.node.wf' },
    },
    end: String.raw`(?=[{};=])`,
    patterns: [
      { include: '#comments' },
      { match: String.raw`${B}after${E}`, name: 'keyword.other.node-header.wf' },
      { include: '#join' },
      ...targetPatterns.slice(1),
    ],
  },
  join: {
    match: String.raw`${B}(join)${E}${NOT_NAME}(?:\s+(?:(${alt(kw.joinModes)})|(${ID}))${E})?`,
    captures: {
      1: { name: 'keyword.other.node-header.wf' },
      2: { name: 'constant.language.join-mode.wf' },
      3: { name: 'invalid.illegal.join-mode.wf' },
    },
  },

  // ---- items with a special value ----
  run: handlerNameAfter('run', 'keyword.other.item.wf'),
  'for-each': {
    // for_each [i,] user in input.users parallel 10 tolerate 5%
    match: String.raw`${B}(for_each)\s+(?:(${ID})\s*(,)\s*)?(?:(${RESERVED})${E}|(${ID}))\s+(in)${E}`,
    captures: {
      1: { name: 'keyword.control.loop.wf' },
      2: { name: 'variable.parameter.for-each.wf' },
      3: { name: 'punctuation.separator.comma.wf' },
      4: { name: 'invalid.illegal.reserved-name.wf' },
      5: { name: 'variable.parameter.for-each.wf' },
      6: { name: 'keyword.operator.in.wf' },
    },
  },
  backoff: {
    match: String.raw`${B}(backoff)\s+(?:(${alt(kw.backoff)})|(${ID}))${E}`,
    captures: {
      1: { name: 'keyword.other.item.wf' },
      2: { name: 'constant.language.backoff.wf' },
      3: { name: 'invalid.illegal.backoff.wf' },
    },
  },
  'on-timeout': {
    match: String.raw`${B}(on_timeout)\s+(?:(${alt(kw.onTimeout)})|(${ID}))${E}`,
    captures: {
      1: { name: 'keyword.other.item.wf' },
      2: { name: 'constant.language.on-timeout.wf' },
      3: { name: 'invalid.illegal.on-timeout.wf' },
    },
  },
  'back-to': {
    match: String.raw`${B}(back_to)\s+(${ID})${E}`,
    captures: { 1: { name: 'keyword.control.loop.wf' }, 2: { name: 'variable.other.node.wf' } },
  },
  routes: {
    name: 'meta.routes.wf',
    begin: String.raw`${B}(routes)\s+(?=[A-Za-z_])`,
    beginCaptures: { 1: { name: 'keyword.control.flow.wf' } },
    end: TARGETS_END,
    patterns: targetPatterns,
  },
  arrow: {
    // when c => a, b   else => a   on_error => a   exhausted => a
    name: 'meta.targets.wf',
    begin: '=>',
    beginCaptures: { 0: { name: 'keyword.operator.arrow.wf' } },
    end: TARGETS_END,
    patterns: targetPatterns,
  },

  // ---- types, fields, parameters ----
  field: {
    // name?: type   (input, output, config blocks and object types)
    match: String.raw`${B}(${ID})\s*(\?)?\s*(:)\s*(?:(${SCALARS})${E}|(?=(?:${GENERICS})\s*<|\{)|$)`,
    captures: {
      1: { name: 'variable.other.property.wf' },
      2: { name: 'keyword.operator.optional.wf' },
      3: { name: 'punctuation.separator.key-value.wf' },
      4: { name: 'support.type.wf' },
    },
  },
  'generic-type': {
    // list<T>, map<T>, map<string, T>
    begin: String.raw`${B}(${GENERICS})\s*(<)`,
    beginCaptures: { 1: { name: 'support.type.wf' }, 2: { name: 'punctuation.definition.typeparameters.begin.wf' } },
    end: '>',
    endCaptures: { 0: { name: 'punctuation.definition.typeparameters.end.wf' } },
    patterns: [
      { include: '#comments' },
      { include: '#generic-type' },
      { include: '#field' },
      { match: String.raw`${B}(?:${SCALARS})${E}`, name: 'support.type.wf' },
      { match: ',', name: 'punctuation.separator.comma.wf' },
      { match: String.raw`[{}]`, name: 'punctuation.section.braces.wf' },
      { match: '[;?]', name: 'punctuation.separator.wf' },
    ],
  },
  param: {
    // name = expr   (with, workflow output)
    match: String.raw`${B}(${ID})\s*(=)(?![=>])`,
    captures: { 1: { name: 'variable.parameter.wf' }, 2: { name: 'keyword.operator.assignment.wf' } },
  },

  // ---- keywords ----
  'block-keywords': {
    match: String.raw`${B}(${alt(union(kw.scopeNames, ['config', 'with']))})(?=\s*\{)`,
    captures: { 1: { name: 'keyword.other.block.wf' } },
  },
  keywords: {
    patterns: [
      { name: 'storage.type.node.wf', match: String.raw`${B}(?:${alt(kw.nodeKinds)})${E}${NOT_NAME}` },
      { name: 'storage.type.handler.wf', match: String.raw`${B}handler${E}${NOT_NAME}` },
      { name: 'keyword.other.node-header.wf', match: String.raw`${B}after${E}${NOT_NAME}` },
      ...Object.entries(itemScopes).map(([scope, words]) => ({
        name: scope,
        match: String.raw`${B}(?:${alt(words)})${E}${NOT_NAME}`,
      })),
    ],
  },

  // ---- expressions (CEL) ----
  expression: {
    patterns: [
      { include: '#comments' },
      { include: '#numbers' },
      { include: '#literals' },
      { include: '#macros' },
      { include: '#scope-names' },
      { include: '#run-metadata' },
      { include: '#node-output' },
      { include: '#function-call' },
      { include: '#member' },
      { include: '#operators' },
      { include: '#punctuation' },
      { include: '#identifier' },
    ],
  },
  macros: {
    // has(x.f), list.all(x, p), exists, exists_one, map, filter
    match: String.raw`(?<![A-Za-z0-9_])(${alt(kw.celMacros)})(?=\s*\()`,
    captures: { 1: { name: 'support.function.macro.wf' } },
  },
  'scope-names': {
    match: String.raw`${B}(${alt(kw.scopeNames)})${E}`,
    captures: { 1: { name: 'variable.language.wf' } },
  },
  'run-metadata': {
    // run.id, and run.status … in finally: `run` before a dot is the run,
    // not the `run "handler"` item.
    match: String.raw`${B}(run)(?=\s*\.)`,
    captures: { 1: { name: 'variable.language.wf' } },
  },
  'node-output': {
    // enrich.output.name: `enrich` is a node id
    match: String.raw`${B}(${ID})(?=\s*\.\s*output${E})`,
    captures: { 1: { name: 'variable.other.node.wf' } },
  },
  'function-call': {
    match: String.raw`(?<![A-Za-z0-9_])(${ID})(?=\s*\()`,
    captures: { 1: { name: 'variable.function.wf' } },
  },
  member: {
    match: String.raw`(?<=\.)\s*(${ID})`,
    captures: { 1: { name: 'variable.other.member.wf' } },
  },
  operators: {
    patterns: [
      { name: 'keyword.operator.in.wf', match: String.raw`${B}in${E}` },
      { name: 'keyword.operator.logical.wf', match: String.raw`&&|\|\||!(?!=)` },
      { name: 'keyword.operator.comparison.wf', match: String.raw`==|!=|<=|>=|<|>` },
      { name: 'keyword.operator.assignment.wf', match: String.raw`=` },
      { name: 'keyword.operator.arithmetic.wf', match: String.raw`[-+*/%]` },
      { name: 'keyword.operator.ternary.wf', match: String.raw`\?` },
      { name: 'punctuation.separator.colon.wf', match: ':' },
    ],
  },
  punctuation: {
    patterns: [
      { name: 'punctuation.section.block.begin.wf', match: String.raw`\{` },
      { name: 'punctuation.section.block.end.wf', match: String.raw`\}` },
      { name: 'punctuation.section.parens.begin.wf', match: String.raw`\(` },
      { name: 'punctuation.section.parens.end.wf', match: String.raw`\)` },
      { name: 'punctuation.section.brackets.begin.wf', match: String.raw`\[` },
      { name: 'punctuation.section.brackets.end.wf', match: String.raw`\]` },
      { name: 'punctuation.separator.comma.wf', match: ',' },
      { name: 'punctuation.terminator.wf', match: ';' },
      { name: 'punctuation.accessor.wf', match: String.raw`\.` },
      // Characters that start no token (WF0002): # @ $ ` \ lone & or |, non-ASCII.
      { name: 'invalid.illegal.character.wf', match: String.raw`[#@$` + '`' + String.raw`\\]|(?<!&)&(?!&)|(?<!\|)\|(?!\|)|[^\x00-\x7F]` },
    ],
  },
  identifier: {
    match: ID,
    name: 'variable.other.wf',
  },
};

const grammar = {
  $schema: 'https://raw.githubusercontent.com/martinring/tmlanguage/master/tmlanguage.json',
  name: 'wf',
  scopeName: 'source.wf',
  fileTypes: ['wf'],
  comment: 'GENERATED by scripts/build-grammar.js from keywords.json: edit those, then run `npm run build:grammar`.',
  patterns: [
    { include: '#comments' },
    { include: '#strings' },
    { include: '#numbers' },
    { include: '#import' },
    { include: '#handler-declaration' },
    { include: '#workflow-declaration' },
    { include: '#node-header' },
    { include: '#run' },
    { include: '#for-each' },
    { include: '#join' },
    { include: '#backoff' },
    { include: '#on-timeout' },
    { include: '#back-to' },
    { include: '#routes' },
    { include: '#arrow' },
    { include: '#field' },
    { include: '#generic-type' },
    { include: '#param' },
    { include: '#block-keywords' },
    { include: '#keywords' },
    { include: '#expression' },
  ],
  repository,
};

const text = JSON.stringify(grammar, null, 2) + '\n';

if (process.argv.includes('--check')) {
  const have = fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : '';
  if (have !== text) {
    console.error('syntaxes/wf.tmLanguage.json is out of date: run `npm run build:grammar` and commit it');
    process.exit(1);
  }
  console.log('ok: syntaxes/wf.tmLanguage.json is up to date with scripts/build-grammar.js and keywords.json');
} else {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, text);
  console.log(`wrote ${path.relative(process.cwd(), out)}`);
}
