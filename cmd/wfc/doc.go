// Command wfc compiles, checks, formats and runs .wf workflows, and serves
// editors as a language server.
//
// Usage:
//
//	wfc <command> [flags] [arguments]
//
// The commands are:
//
//	build    compile a workflow to IR (JSON or YAML)
//	check    report the diagnostics of workflows
//	fmt      format .wf files in the canonical layout
//	run      run a workflow (embedded Redis unless --redis)
//	worker   serve the runs of a shared Redis
//	submit   start a run in a shared Redis
//	status   show a run's state, nodes and result
//	cancel   cancel a run
//	retry    re-run the failed part of a failed run
//	events   print a run's event log
//	approvals list the approvals human nodes wait for
//	approve  approve or reject an approval of a run
//	fakemodel serve canned model answers, to try agent nodes without a key
//	lsp      run the language server (LSP over standard input and output)
//	version  print the wfc, Go and IR versions
//	help     show help for a command
//
// Every command takes -h or --help, as does `wfc help COMMAND`. Flags may
// be written -name or --name, before or after the file arguments; `--` ends
// the flags. A file argument of - reads standard input, which diagnostics
// call <stdin>.
//
// # Build
//
//	wfc build [-o OUT] [--format json|yaml] [--goal NODE]... [--no-optimize]
//	          [--dump-after PASS] [--json] FILE.wf
//
// Build compiles FILE.wf and writes its IR to standard output or OUT (which
// is replaced atomically, and only when the build succeeds). Imports and
// child flows are read relative to FILE.wf. Diagnostics go to standard
// error, as text or, with --json, as one JSON document. --goal keeps only the
// named nodes and what they depend on, and lists the inputs they read.
// --dump-after stops after a compiler pass (compiler.Passes lists them) and
// writes what exists by then.
//
// # Run, worker and the run commands
//
//	wfc run [--redis URL] [--input NAME=VALUE]... [--input-file F.json]
//	        [--concurrency N] [--max-concurrency N] [--allow-exec] [--http-allow HOSTS] [--http-deny HOSTS]
//	        [--secrets-file F] [MODEL FLAGS] [--json] [-q] FILE
//	wfc worker --redis URL [--queues Q,...] [--concurrency N] [--max-concurrency N] [--allow-exec]
//	        [--http-allow HOSTS] [--http-deny HOSTS] [--secrets-file F]
//	        [MODEL FLAGS] [--dead-after D] [--handler NAME=URL]...
//	MODEL FLAGS: [--model-base-url URL] [--model-api-key-file F]
//	        [--model-timeout D] [--model-retries N]
//	wfc fakemodel [--listen ADDR] [--answers FILE]
//	wfc submit --redis URL [--input ...] [--wait [-q]] FILE
//	wfc status|cancel|retry|events --redis URL [--json] RUN
//	wfc events --redis URL --children RUN
//	wfc approvals --redis URL [--run RUN] [--wait] [--json]
//	wfc approve --redis URL [--reject] [--by WHO] [--comment T]
//	        [--input NAME=VALUE]... RUN NODE
//
// Run executes a workflow (a .wf file, or compiled IR in .json or .yaml;
// on standard input, FILE "-", either, as in 'wfc build x.wf | wfc run -')
// and waits for it, printing node progress to standard error and the run's
// result to standard output; it exits 0 when the run completed and 1 when
// it failed or was cancelled. Without --redis (or $WFC_REDIS) it uses an
// embedded in-memory Redis and in-process workers. Worker serves the runs
// stored in a shared Redis; submit, status, cancel, retry and events act on
// runs there. --redis defaults to $WFC_REDIS; wfc never prints the
// password of a Redis URL. --shards N (at least 1) must be the same for
// every command. The http handler of run and worker connects to no
// loopback, private, link-local or other special address unless
// --http-allow ($WFC_HTTP_ALLOW) lists it; --http-deny ($WFC_HTTP_DENY)
// refuses hosts over it. Workers resolve secret inputs from --secrets-file
// and $WFC_SECRET_<name> and mask their values in all they write
// (docs/security.md). Approvals lists the approvals of human nodes (open
// ones, or with --run every one of a run) and approve decides one
// (docs/waiting.md); a run with human nodes needs --redis. The model flags
// point the workers of run and worker at the OpenAI-compatible server
// agent nodes ask ($OPENAI_BASE_URL and $OPENAI_API_KEY by default; the
// key only from a file or the environment); fakemodel serves canned
// answers for trying agents without one (docs/agents.md). See
// docs/runtime.md.
//
// # Fmt
//
//	wfc fmt [-l] [-w] [-d] [--check] [FILE.wf | DIR]...
//
// Fmt formats files in the canonical layout of docs/formatting.md, with
// gofmt's contract: no file means standard input to standard output; -l
// lists files that differ, -w rewrites them in place, -d prints a diff,
// --check exits 1 when anything would change; directories are walked. A
// file with syntax errors is not rewritten and the exit code is 2.
//
// # Check
//
//	wfc check [--json] [-v] FILE.wf...
//
// Check compiles every file without optimising it and prints all
// diagnostics, sorted, to standard error:
//
//	flow.wf:3:20: error[WF1001]: unknown node `enrch`
//	 3 |   task score after enrch { run "noop" }
//	   |                    ^~~~~
//	  = hint: did you mean `enrich`?
//
// It prints nothing when there are none, unless -v is given. With --json it
// writes one document to standard output instead:
//
//	{"files": [{"file": "flow.wf", "diagnostics": [...]}], "errors": 1, "warnings": 0}
//
// # Exit codes
//
//	0  success (warnings allowed)
//	1  the input has errors, or a file cannot be read or written
//	2  bad command line: unknown command or flag, missing argument, bad value
//	3  internal error: a bug in wfc (a crash, or diagnostic WF9001);
//	   WFC_TRACEBACK=1 prints the stack of a crash
//
// # Adding a command
//
// A command is a function func(ctx context.Context, env *Env, args []string) int
// plus one line in the commands table (cli.go). It parses its flags with
// newFlags, which gives it --help, usage errors and flags after arguments,
// and touches the world only through env. main wires env to the process and
// cancels ctx on SIGINT and SIGTERM. The logic belongs in the packages
// (compiler, ir, lang, ...); commands are glue.
package main
