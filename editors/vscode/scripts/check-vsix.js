#!/usr/bin/env node
// Lists a .vsix (a zip file) and checks that it holds what the extension
// needs at run time and nothing it should not ship.
//
//   node scripts/check-vsix.js wfc-0.1.0.vsix
'use strict';

const fs = require('fs');

function zipEntries(buf) {
  // End of central directory: signature 0x06054b50, within the last 64 KiB + 22 bytes.
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 65557); i--) {
    if (buf.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('not a zip file');
  const count = buf.readUInt16LE(eocd + 10);
  let p = buf.readUInt32LE(eocd + 16);
  const out = [];
  for (let i = 0; i < count; i++) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Error('bad central directory');
    const size = buf.readUInt32LE(p + 24);
    const nameLen = buf.readUInt16LE(p + 28);
    const extraLen = buf.readUInt16LE(p + 30);
    const commentLen = buf.readUInt16LE(p + 32);
    out.push({ name: buf.toString('utf8', p + 46, p + 46 + nameLen), size });
    p += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

const file = process.argv[2];
if (!file) {
  console.error('usage: check-vsix.js FILE.vsix');
  process.exit(2);
}
const entries = zipEntries(fs.readFileSync(file));
const names = entries.map((e) => e.name);
const problems = [];
for (const need of [
  'extension.vsixmanifest',
  'extension/package.json',
  'extension/out/extension.js',
  'extension/syntaxes/wf.tmLanguage.json',
  'extension/language-configuration.json',
  'extension/readme.md',
]) {
  if (!names.includes(need)) problems.push(`missing ${need}`);
}
for (const n of names) {
  if (/(^|\/)(node_modules|src|tests|scripts|keywordcheck|e2e)\//.test(n) || /\.(map|ts|vsix)$/.test(n) || n.endsWith('keywords.json')) {
    problems.push(`should not ship ${n}`);
  }
}
for (const e of entries) console.log(`  ${String(e.size).padStart(8)}  ${e.name}`);
if (problems.length) {
  console.error(`${file}:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`ok: ${file} (${entries.length} files)`);
