// How the extension finds and starts `wfc lsp`. Nothing here imports
// `vscode`, so tests/client/*.test.js runs it under plain Node.

import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

/** The settings this module reads, as declared in package.json. */
export interface ServerSettings {
  /** `wfc.server.path`: a bare command name (looked up on PATH) or a path. */
  path: string;
  /** `wfc.server.args`: the arguments that start the server, default `["lsp"]`. */
  args: string[];
}

export const DEFAULT_SETTINGS: ServerSettings = { path: 'wfc', args: ['lsp'] };

/** Replaces a leading `~` and `${workspaceFolder}`, `${userHome}`, `${env:NAME}`. */
export function expandVariables(value: string, workspaceFolder: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  let v = value.trim();
  if (v === '~' || v.startsWith('~/') || v.startsWith('~\\')) {
    v = path.join(os.homedir(), v.slice(1));
  }
  return v.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (m, name: string, envName?: string) => {
    if (name === 'workspaceFolder') return workspaceFolder ?? m;
    if (name === 'userHome') return os.homedir();
    return env[envName ?? ''] ?? '';
  });
}

/** Normalises raw setting values (wrong types fall back to the defaults). */
export function normalizeSettings(rawPath: unknown, rawArgs: unknown, workspaceFolder?: string): ServerSettings {
  const p = typeof rawPath === 'string' && rawPath.trim() !== '' ? rawPath : DEFAULT_SETTINGS.path;
  const args = Array.isArray(rawArgs) && rawArgs.every((a) => typeof a === 'string') ? (rawArgs as string[]) : DEFAULT_SETTINGS.args;
  return {
    path: expandVariables(p, workspaceFolder),
    args: args.map((a) => expandVariables(a, workspaceFolder)),
  };
}

function isExecutableFile(p: string, platform: NodeJS.Platform): boolean {
  try {
    if (!fs.statSync(p).isFile()) return false;
    if (platform !== 'win32') fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolves the server command to an absolute executable path, or undefined
 * when there is none. A value containing a path separator is taken as a
 * path (relative ones against `workspaceFolder`); a bare name is searched
 * on PATH (with PATHEXT on Windows), as the shell would.
 */
export function resolveServerPath(
  command: string,
  opts: { workspaceFolder?: string; env?: NodeJS.ProcessEnv; platform?: NodeJS.Platform } = {},
): string | undefined {
  const env = opts.env ?? process.env;
  const platform = opts.platform ?? process.platform;
  const exts = platform === 'win32' ? ['', ...(env.PATHEXT ?? '.EXE;.CMD;.BAT;.COM').split(';').filter(Boolean)] : [''];
  const hasSep = command.includes('/') || (platform === 'win32' && command.includes('\\'));
  const candidates: string[] = [];
  if (hasSep) {
    const abs = path.isAbsolute(command) ? command : path.resolve(opts.workspaceFolder ?? process.cwd(), command);
    candidates.push(abs);
  } else {
    const sep = platform === 'win32' ? ';' : ':';
    for (const dir of (env.PATH ?? env.Path ?? '').split(sep)) {
      if (dir) candidates.push(path.join(dir, command));
    }
  }
  for (const c of candidates) {
    for (const ext of exts) {
      if (isExecutableFile(c + ext, platform)) return c + ext;
    }
  }
  return undefined;
}

/** The message shown when the wfc binary cannot be found. */
export function missingServerMessage(command: string): string {
  const where = command.includes('/') || command.includes('\\') ? `at "${command}"` : `"${command}" on PATH`;
  return (
    `wfc: cannot start the language server: no executable ${where}. ` +
    'Install wfc (`go install ./cmd/wfc` in a clone of the wfc repository) or set "wfc.server.path" to the wfc binary. ' +
    'Syntax highlighting works without it.'
  );
}

/** Runs `<binary> version` and returns its first output line (for the log). */
export function serverVersion(binary: string, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(binary, ['version'], { timeout: timeoutMs, windowsHide: true }, (err, stdout, stderr) => {
      if (err) {
        reject(Object.assign(err, { stderr: String(stderr) }));
        return;
      }
      resolve(String(stdout).split(/\r?\n/)[0]?.trim() ?? '');
    });
  });
}
