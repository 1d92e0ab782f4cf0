package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Exit codes.
const (
	exitOK       = 0 // success; warnings allowed
	exitFailed   = 1 // the input has errors, or a file could not be read or written
	exitUsage    = 2 // bad command line
	exitInternal = 3 // a bug in wfc
)

// An Env is the outside world a command may touch. main wires it to the
// process; tests may wire it to buffers.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// A command is one `wfc NAME` subcommand. Run parses its own flags: given
// -h it prints its help to env.Stdout and returns 0, which is also how
// `wfc help NAME` shows it.
type command struct {
	Name    string
	Summary string // one line for the command list, lower case, no period
	Run     func(ctx context.Context, env *Env, args []string) int
	Hidden  bool // left out of the command list (tests register such commands)
}

// commands is the command table, in the order `wfc help` lists it. A new
// subcommand is a file with its Run function and one line here.
var commands []*command

func init() {
	commands = []*command{
		{Name: "build", Summary: "compile a workflow to IR (JSON or YAML)", Run: runBuild},
		{Name: "check", Summary: "report the diagnostics of workflows", Run: runCheck},
		{Name: "fmt", Summary: "format .wf files in the canonical layout", Run: runFmt},
		{Name: "run", Summary: "run a workflow (embedded Redis unless --redis)", Run: runRun},
		{Name: "worker", Summary: "serve the runs of a shared Redis", Run: runWorker},
		{Name: "submit", Summary: "start a run in a shared Redis", Run: viaServer("submit", runSubmit)},
		{Name: "deploy", Summary: "store a workflow and move a tag to it", Run: runDeploy},
		{Name: "versions", Summary: "list the versions of a tag", Run: runVersions},
		{Name: "patch", Summary: "change the workflow of a running run", Run: runPatch},
		{Name: "diff", Summary: "print the JSON Patch between two workflows' IR", Run: runDiff},
		{Name: "status", Summary: "show a run's state, nodes and result", Run: viaServer("status", runOnRun("status", "Status shows a run's state, each node's state and the result.", runStatus))},
		{Name: "cancel", Summary: "cancel a run", Run: viaServer("cancel", runOnRun("cancel", "Cancel stops a run: no node starts after it, and late completions are ignored.", runCancel))},
		{Name: "retry", Summary: "re-run the failed part of a failed run", Run: viaServer("retry", runOnRun("retry", "Retry re-runs the failed part of a failed run; completed nodes keep their outputs.", runRetry))},
		{Name: "events", Summary: "print a run's event log", Run: viaServer("events", runOnRunFlags("events", "Events prints the run's event log, oldest first; with --children the events of its child runs too.", eventsCmd))},
		{Name: "approvals", Summary: "list the approvals human nodes wait for", Run: runApprovals},
		{Name: "approve", Summary: "approve or reject an approval of a run", Run: viaServer("approve", runApprove)},
		{Name: "signal", Summary: "send a signal (an external event) to a run", Run: viaServer("signal", runSignal)},
		{Name: "fakemodel", Summary: "serve canned model answers, to try agent nodes without a key", Run: runFakemodel},
		{Name: "serve", Summary: "serve the HTTP API (embedded Redis unless --redis)", Run: runServe},
		{Name: "bench", Summary: "measure the runtime on a Redis against a raw go-redis reference", Run: runBench},
		{Name: "lsp", Summary: "run the language server (LSP over standard input and output)", Run: runLSP},
		{Name: "version", Summary: "print the wfc, Go and IR versions", Run: runVersion},
		{Name: "help", Summary: "show help for a command", Run: runHelp},
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func dispatch(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 {
		writeOverview(env.Stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		writeOverview(env.Stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	if c := lookup(name); c != nil {
		return c.Run(ctx, env, args[1:])
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(env.Stderr, "wfc: unknown flag %s: flags go after the command, as in 'wfc build -o out.json flow.wf'\n", name)
	} else {
		fmt.Fprintf(env.Stderr, "wfc: unknown command %q\n", name)
		if s := suggestCommand(name); s != "" {
			fmt.Fprintf(env.Stderr, "Did you mean 'wfc %s'?\n", s)
		} else if strings.HasSuffix(name, ".wf") || name == "-" {
			fmt.Fprintf(env.Stderr, "To compile it, run 'wfc build %s'; to check it, 'wfc check %s'.\n", name, name)
		}
	}
	fmt.Fprintln(env.Stderr, "Run 'wfc help' for the list of commands.")
	return exitUsage
}

func writeOverview(w io.Writer) {
	var b strings.Builder
	b.WriteString("wfc compiles, checks, formats and runs .wf workflows.\n\nUsage:\n\n  wfc <command> [flags] [arguments]\n\nCommands:\n\n")
	width := 0
	for _, c := range commands {
		if !c.Hidden {
			width = max(width, len(c.Name))
		}
	}
	for _, c := range commands {
		if !c.Hidden {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Name, c.Summary)
		}
	}
	b.WriteString("\nRun 'wfc help <command>' for the flags and details of a command.\n")
	io.WriteString(w, b.String())
}

func runHelp(ctx context.Context, env *Env, args []string) int {
	fs := newFlags("help", "wfc help [COMMAND]", `
Help shows the list of commands, or with a command name, the usage and
flags of that command (the same as 'wfc COMMAND --help').
`)
	args, code, ok := fs.parse(env, args)
	if !ok {
		return code
	}
	switch len(args) {
	case 0:
		writeOverview(env.Stdout)
		return exitOK
	case 1:
		c := lookup(args[0])
		if c == nil {
			fmt.Fprintf(env.Stderr, "wfc help: unknown command %q\n", args[0])
			if s := suggestCommand(args[0]); s != "" {
				fmt.Fprintf(env.Stderr, "Did you mean 'wfc help %s'?\n", s)
			}
			fmt.Fprintln(env.Stderr, "Run 'wfc help' for the list of commands.")
			return exitUsage
		}
		return c.Run(ctx, env, []string{"-h"})
	}
	return fs.usageError(env, "expected at most one command name, got %d arguments", len(args))
}

// suggestCommand returns the visible command closest to name, if any is
// close enough to be a likely typo.
func suggestCommand(name string) string {
	best, bestDist := "", 3 // more than two edits is not a typo
	for _, c := range commands {
		if c.Hidden {
			continue
		}
		if d := editDistance(name, c.Name); d < bestDist && d <= len(c.Name)/2 {
			best, bestDist = c.Name, d
		}
	}
	return best
}

// editDistance is the Damerau (optimal string alignment) distance, so that
// a swapped pair of letters ("biuld") counts as one edit.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// flags is a command's flag set with the texts its help shows.
type flags struct {
	*flag.FlagSet
	cmd   string // "build"
	usage string // "wfc build [flags] FILE.wf"
	doc   string // description, shown by --help
	// metavars overrides the name of a flag's value in the help, for
	// values that are a choice ("json|yaml") rather than a name.
	metavars map[string]string
}

func newFlags(cmd, usage, doc string) *flags {
	fs := flag.NewFlagSet("wfc "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by parse
	fs.Usage = func() {}
	return &flags{FlagSet: fs, cmd: cmd, usage: usage, doc: strings.TrimSpace(doc), metavars: map[string]string{}}
}

// wrapList joins items with ", " into lines of at most width bytes, each
// starting with indent.
func wrapList(items []string, indent string, width int) string {
	var b strings.Builder
	line := indent
	for i, it := range items {
		if i < len(items)-1 {
			it += ","
		}
		if line != indent && len(line)+1+len(it) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += it
	}
	b.WriteString(line)
	return b.String()
}

// parse parses args. Flags may come before or after the arguments
// (`wfc build flow.wf -o out.json`); `--` ends the flags. Both -name and
// --name work. When ok is false the command must return code: help was
// asked for (0) or the command line is wrong (2).
func (f *flags) parse(env *Env, args []string) (pos []string, code int, ok bool) {
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.writeHelp(env.Stdout)
			return nil, exitOK, false
		}
		if err != nil {
			return nil, f.usageError(env, "%s", flagError(err)), false
		}
		rest := f.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagError rewords the flag package's messages, writing long flag names
// with two dashes as the help does.
func flagError(err error) string {
	msg := err.Error()
	if name, found := strings.CutPrefix(msg, "flag provided but not defined: "); found {
		return "unknown flag " + dashes(name)
	}
	if name, found := strings.CutPrefix(msg, "flag needs an argument: "); found {
		return "flag " + dashes(name) + " needs a value"
	}
	if m := badBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("flag %s takes no value, or true or false; not %s", dashes(m[2]), m[1])
	}
	return msg
}

var badBool = regexp.MustCompile(`^invalid boolean value (".*") for (-\S+): `)

func dashes(name string) string {
	name = strings.TrimLeft(name, "-")
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// usageError reports a bad command line and returns exitUsage.
func (f *flags) usageError(env *Env, format string, args ...any) int {
	fmt.Fprintf(env.Stderr, "wfc %s: %s\n", f.cmd, fmt.Sprintf(format, args...))
	fmt.Fprintf(env.Stderr, "usage: %s\n", f.usage)
	fmt.Fprintf(env.Stderr, "Run 'wfc help %s' for details.\n", f.cmd)
	return exitUsage
}

// writeHelp writes the usage line, the description and the flags.
func (f *flags) writeHelp(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n", f.usage)
	if f.doc != "" {
		fmt.Fprintf(&b, "\n%s\n", f.doc)
	}
	type row struct{ left, usage string }
	var rows []row
	f.VisitAll(func(fl *flag.Flag) {
		placeholder, usage := flag.UnquoteUsage(fl)
		if m, ok := f.metavars[fl.Name]; ok {
			placeholder = m
		}
		if _, isBool := fl.Value.(interface{ IsBoolFlag() bool }); isBool {
			placeholder = ""
		}
		left := "--" + fl.Name
		if len(fl.Name) == 1 {
			left = "-" + fl.Name
		}
		if placeholder != "" {
			left += " " + placeholder
		}
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "[]" {
			// --redis defaults to $WFC_REDIS: never show its password.
			usage += fmt.Sprintf(" (default %s)", redactURL(fl.DefValue))
		}
		rows = append(rows, row{left, usage})
	})
	rows = append(rows, row{"-h, --help", "show this help"})
	width := 0
	for _, r := range rows {
		width = max(width, len(r.left))
	}
	b.WriteString("\nFlags:\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r.left, r.usage)
	}
	io.WriteString(w, b.String())
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}
