// How the extension finds and starts `wfc lsp`. Nothing here imports
// `vscode`, so tests/client/*.test.js runs it under plain Node.

import { execFile, execFileSync } from 'child_process';
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

/** Where the server binary was found, for the log. */
export type ServerSource = 'wfc.server.path' | 'PATH' | 'GOBIN' | 'GOPATH/bin';

export interface FoundServer {
  path: string;
  source: ServerSource;
}

/** Runs `go env NAME`; undefined when go is missing or fails. */
export function goEnv(name: string): string | undefined {
  try {
    const v = execFileSync('go', ['env', name], { timeout: 10_000, windowsHide: true, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return v.trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The directories `go install` puts binaries in: $GOBIN, else the bin
 * directory of each $GOPATH entry, else of `go env GOPATH`, else ~/go/bin
 * (Go's default GOPATH). `goEnvFn` is asked only when the environment says
 * nothing, so a machine without Go costs one failed spawn at most.
 */
export function goBinDirs(
  opts: { env?: NodeJS.ProcessEnv; platform?: NodeJS.Platform; home?: string; goEnvFn?: (name: string) => string | undefined } = {},
): { dir: string; source: ServerSource }[] {
  const env = opts.env ?? process.env;
  const platform = opts.platform ?? process.platform;
  const lookup = opts.goEnvFn ?? goEnv;
  const sep = platform === 'win32' ? ';' : ':';
  const join = platform === 'win32' ? path.win32.join : path.posix.join;
  const out: { dir: string; source: ServerSource }[] = [];
  const gobin = env.GOBIN || (env.GOPATH ? undefined : lookup('GOBIN'));
  if (gobin) out.push({ dir: gobin, source: 'GOBIN' });
  const gopath = env.GOPATH || lookup('GOPATH') || join(opts.home ?? os.homedir(), 'go');
  for (const entry of gopath.split(sep)) {
    if (entry) out.push({ dir: join(entry, 'bin'), source: 'GOPATH/bin' });
  }
  return out;
}

/**
 * Finds the server binary: a path in wfc.server.path is used as is; a bare
 * name is searched on PATH and then where `go install` puts binaries
 * (GOBIN, GOPATH/bin, ~/go/bin), which editors started from a desktop
 * launcher often lack on their PATH. Says where it was found.
 */
export function findServer(
  command: string,
  opts: {
    workspaceFolder?: string;
    env?: NodeJS.ProcessEnv;
    platform?: NodeJS.Platform;
    home?: string;
    goEnvFn?: (name: string) => string | undefined;
  } = {},
): FoundServer | undefined {
  const platform = opts.platform ?? process.platform;
  const hasSep = command.includes('/') || (platform === 'win32' && command.includes('\\'));
  const onPath = resolveServerPath(command, opts);
  if (onPath) return { path: onPath, source: hasSep ? 'wfc.server.path' : 'PATH' };
  if (hasSep) return undefined;
  for (const { dir, source } of goBinDirs(opts)) {
    const found = resolveServerPath(command, { ...opts, env: { ...(opts.env ?? process.env), PATH: dir, Path: undefined } });
    if (found) return { path: found, source };
  }
  return undefined;
}

/** The log line that says which binary runs the server and why. */
export function foundServerMessage(found: FoundServer, version: string): string {
  const where =
    found.source === 'wfc.server.path'
      ? 'from wfc.server.path'
      : found.source === 'PATH'
        ? 'found on PATH'
        : `found in ${found.source}, not on PATH`;
  return `using ${found.path} (${where})${version ? `: ${version}` : ''}`;
}

/** The message shown when the wfc binary cannot be found. */
export function missingServerMessage(command: string): string {
  const where =
    command.includes('/') || command.includes('\\') ? `at "${command}"` : `"${command}" on PATH, in GOBIN or in GOPATH/bin (~/go/bin)`;
  return (
    `wfc: cannot start the language server: no executable ${where}. ` +
    'Install wfc (`go install ./cmd/wfc` in a clone of the wfc repository) or set "wfc.server.path" to the wfc binary. ' +
    'Syntax highlighting works without it.'
  );
}

/** The log levels of a LogOutputChannel that server lines are written at. */
export type LogLevelName = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** The part of a LogOutputChannel that pipeServerLog writes to. */
export interface LineLogger {
  trace(m: string): void;
  debug(m: string): void;
  info(m: string): void;
  warn(m: string): void;
  error(m: string): void;
}

const SLOG_TEXT = /^time=\S+ level=([A-Z]+)(?:[+-]\d+)? (.*)$/;

/**
 * Reads the level of a line of the server's log (slog text format, what
 * `wfc lsp` writes to stderr): `time=... level=INFO msg=...` is logged at
 * info, without the time and level the output channel shows itself. A line
 * in no known format (a Go panic, say) is an error.
 */
export function serverLogLine(line: string): { level: LogLevelName; text: string } {
  const m = SLOG_TEXT.exec(line);
  if (!m) return { level: 'error', text: line };
  const level: LogLevelName = m[1] === 'DEBUG' ? 'debug' : m[1] === 'INFO' ? 'info' : m[1] === 'WARN' ? 'warn' : 'error';
  return { level, text: m[2] };
}

/** Logs the server's stderr line by line at the level each line carries. */
export function pipeServerLog(input: NodeJS.ReadableStream, channel: LineLogger): void {
  let rest = '';
  input.on('data', (chunk: Buffer | string) => {
    const lines = (rest + chunk.toString()).split(/\r?\n/);
    rest = lines.pop() ?? '';
    for (const l of lines) if (l !== '') log(l);
  });
  input.on('end', () => {
    if (rest !== '') log(rest);
    rest = '';
  });
  function log(l: string): void {
    const { level, text } = serverLogLine(l);
    channel[level](text);
  }
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
