// The wfc extension: the TextMate grammar and language configuration are
// declarative (package.json); this file starts `wfc lsp` with
// vscode-languageclient and keeps it running.

import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, RevealOutputChannelOn, ServerOptions } from 'vscode-languageclient/node';
import { findServer, foundServerMessage, missingServerMessage, normalizeSettings, pipeServerLog, serverVersion } from './server';

/** The language id of .wf files (package.json contributes.languages). */
export const LANGUAGE_ID = 'wf';
/** The client id: vscode-languageclient reads `<id>.trace.server`, i.e. `wfc.trace.server`. */
const CLIENT_ID = 'wfc';
const CLIENT_NAME = 'wfc language server';

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let traceOutput: vscode.LogOutputChannel;
// Starts and stops run one at a time, in order.
let queue: Promise<void> = Promise.resolve();

function enqueue(step: () => Promise<void>): Promise<void> {
  queue = queue.then(step, step);
  return queue;
}

export function activate(context: vscode.ExtensionContext): void {
  output = vscode.window.createOutputChannel(CLIENT_NAME, { log: true });
  traceOutput = vscode.window.createOutputChannel(`${CLIENT_NAME} (trace)`, { log: true });
  // .wf files changing on disk (imports, `uses` children) reach the server
  // through the watcher it registers itself (workspace/didChangeWatchedFiles,
  // dynamic registration): a watcher of the extension's own would report
  // every change twice.
  context.subscriptions.push(
    output,
    traceOutput,
    vscode.commands.registerCommand('wfc.restartServer', () => restart('restart requested')),
    vscode.commands.registerCommand('wfc.showOutput', () => output.show(true)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('wfc.server')) {
        void restart('wfc.server settings changed');
      } else if (e.affectsConfiguration('wfc.trace.server')) {
        traceHint();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => restart('workspace trusted')),
  );
  // Not awaited: highlighting and the rest of the editor need not wait for
  // the server to answer `initialize`.
  void enqueue(start);
}

export function deactivate(): Promise<void> {
  return enqueue(stop);
}

function restart(reason: string): Promise<void> {
  output.info(`restarting: ${reason}`);
  return enqueue(async () => {
    await stop();
    await start();
  });
}

async function start(): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const cfg = vscode.workspace.getConfiguration('wfc');
  const settings = normalizeSettings(cfg.get('server.path'), cfg.get('server.args'), folder);
  const found = findServer(settings.path, { workspaceFolder: folder });
  if (!found) {
    const msg = missingServerMessage(settings.path);
    output.error(msg);
    void showError(msg);
    return;
  }
  const binary = found.path;
  try {
    output.info(foundServerMessage(found, await serverVersion(binary)));
  } catch (err) {
    output.info(foundServerMessage(found, ''));
    output.warn(`"${binary} version" failed (${errorText(err)}); starting the server anyway`);
  }

  // stdio transport. `transport` is left unset on purpose: with
  // TransportKind.stdio vscode-languageclient appends `--stdio` to the
  // arguments, which the server need not accept.
  const serverOptions: ServerOptions = {
    command: binary,
    args: settings.args,
    options: { cwd: folder, env: process.env },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: 'file', language: LANGUAGE_ID },
      { scheme: 'untitled', language: LANGUAGE_ID },
    ],
    outputChannel: output,
    traceOutputChannel: traceOutput,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // The server logs to stderr in slog's text format; by default the
    // client would log every stderr line as an error.
    stdioOptions: {
      stdout: (input, channel) => {
        const info = (m: string) => channel.info(m);
        pipeServerLog(input, { trace: info, debug: info, info, warn: info, error: info });
      },
      stderr: (input, channel) => pipeServerLog(input, channel),
    },
  };
  output.info(`starting: ${[binary, ...settings.args].join(' ')}`);
  const c = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  client = c;
  try {
    await c.start();
    output.info('language server running');
    traceHint();
  } catch (err) {
    const msg =
      `wfc: the language server did not start (${errorText(err)}). ` +
      `Check that "${[binary, ...settings.args].join(' ')}" runs a language server on stdin/stdout ` +
      '(wfc versions without the `lsp` command cannot), or change "wfc.server.path" / "wfc.server.args".';
    output.error(msg);
    void showError(msg);
    client = undefined;
    try {
      await c.dispose(2000);
    } catch {
      // already gone
    }
  }
}

async function stop(): Promise<void> {
  const c = client;
  client = undefined;
  if (!c) return;
  try {
    await c.stop(2000);
  } catch (err) {
    output.warn(`stopping the language server: ${errorText(err)}`);
  }
}

/** vscode-languageclient traces only when the trace channel's log level is Trace. */
function traceHint(): void {
  const level = vscode.workspace.getConfiguration('wfc').get<string>('trace.server', 'off');
  if (level !== 'off' && traceOutput.logLevel !== vscode.LogLevel.Trace) {
    output.info(
      `wfc.trace.server is "${level}": messages appear in the "${CLIENT_NAME} (trace)" output ` +
        'once its log level is Trace (the gear in the Output view, or "Developer: Set Log Level...").',
    );
  }
}

async function showError(message: string): Promise<void> {
  const choice = await vscode.window.showErrorMessage(message, 'Open Settings', 'Show Output');
  if (choice === 'Open Settings') {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'wfc.server');
  } else if (choice === 'Show Output') {
    output.show(true);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
