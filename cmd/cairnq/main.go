// Command cairnq operates a cairnq database from the shell, on SQLite or
// Postgres, and runs a demo of the whole system on the embedded SQLite
// default.
//
//	cairnq demo    [--db cairnq-demo.db] [--n 300] [--concurrency 8]
//	cairnq stats   [--queue q] [--json]
//	cairnq list    [--status s] [--queue q] [--name n] [--limit 20] [--json]
//	cairnq get     [--json] ID
//	cairnq submit  [--queue q] [--key k] [--priority n] [--max-attempts n] [--delay d] [--json] NAME [JSON]
//	cairnq submit  --from FILE|- [--batch 1000] [--queue q] [--priority n] [--max-attempts n] [--delay d] [--json]
//	cairnq cancel  [--json] ID | [--status s] [--queue q] [--name n] [--json]
//	cairnq retry   [--reset-attempt] [--json] ID | [--status s] [--queue q] [--name n] [--json]
//	cairnq delete  [--json] ID | [--status s] [--queue q] [--name n] [--json]
//	cairnq workflow list [--status s] [--limit 20] [--json] | get|cancel|retry [--json] ID
//	cairnq purge   [--older-than 24h] [--status s] [--queue q] [--name n] [--json]
//	cairnq pause   [--reason text] [--by name] [--json] QUEUE
//	cairnq resume  [--json] QUEUE
//	cairnq workers [--json]
//	cairnq schedules [--json]
//	cairnq watch   [--queue q] [--poll 1s] [--for 0] [--json]
//	cairnq migrate [--check] [--json]
//	cairnq doctor  [--max-wait 5m] [--window 1h] [--max-failures 0] [--json]
//	cairnq ui      [--addr 127.0.0.1:8080] [--allow-writes] [--hide-payloads] [--basic-auth VAR] [--allow-host h,...]
//	cairnq version [--json]
//
// Every command but demo and version also takes --db and --schema; ui
// takes no --json. Flags may come before or after the arguments (cairnq
// get ID --db x), and --db, --schema and --json before the command too
// (cairnq --db x stats); -- ends the flags, so that an argument may start
// with a dash. A mistyped command, flag, status or workflow verb names the
// one meant when it is close.
//
// # The database
//
// --db is a SQLite file, or a Postgres URL (postgres://, postgresql://) or
// key=value DSN (host=... dbname=...). Without --db: $CAIRNQ_DB, then
// $DATABASE_URL when it is a Postgres URL, then ./tasks.db. --schema names
// the Postgres schema cairnq lives in (default: where the connection's
// search_path resolves). Postgres is reached through the pgx adapter; the
// DSN is never printed with its password.
//
// Only migrate creates a database or changes its schema: it creates the
// SQLite file (and its directories) or the Postgres schema if missing and
// applies the migrations. Every other command opens the database with
// OpenExisting: a missing file, schema or cairnq installation fails with
// "no such database" (exit 3) and nothing is created; a database behind
// this cairnq's migrations or of another protocol major is refused (exit
// 1) and left as it was. The read commands (stats, list, get, watch,
// doctor, migrate --check) change nothing: a SQLite file is left
// byte-identical.
//
// # JSON
//
// --json prints one JSON document on stdout (watch: one per line), with
// the protocol's field names. A task is the protocol's task object (id,
// name, queue, status, payload, metadata, result, error, progress,
// message, attempt, max_attempts, priority, worker_id, lease_until_ms,
// run_at_ms, cancel_requested_at_ms, parent_id, root_id, correlation_id,
// created_at_ms, updated_at_ms, completed_at_ms; times in epoch ms).
//
//	stats          {"queues": {QUEUE: {"queued", "running", "succeeded", "failed", "canceled"}}}
//	list           {"tasks": [TASK, ...]}
//	get, submit,
//	cancel, retry  TASK
//	submit --from  TASK per line
//	purge          {"purged": N}
//	watch          {"at_ms", "reason": "start"|"queued"|"done"|"changed"|"poll", "queue"?, "task_id"?, "queues": {...}} per line
//	migrate        {"applied": [NAME, ...], "status": STATUS}
//	migrate --check STATUS: {"state": "absent"|"current"|"behind"|"ahead"|"incompatible",
//	               "schema"? (Postgres), "protocol_version", "schema_version",
//	               "sdk_protocol_version", "sdk_schema_version",
//	               "migrations": [{"name", "applied_at_ms"}], "missing": [NAME], "unknown": [NAME]}
//	doctor         {"ok", "backend": "sqlite"|"postgres", "database",
//	               "checks": [{"check": "schema"|"route"|"listen"|"leases"|"queues"|"failures",
//	                           "status": "ok"|"attention"|"n/a"|"skipped", "detail"}],
//	               "schema": STATUS, "expired_leases": [{"id", "name", "queue", "worker_id",
//	               "lease_until_ms", "attempt", "max_attempts"}],
//	               "queues": [{"queue", "due", "oldest_run_at_ms", "oldest_age_ms"}],
//	               "failures": [{"name", "count", "last_failed_at_ms"}],
//	               "max_wait_ms", "failure_window_ms", "max_failures"}
//
// # submit --from
//
// submit --from FILE (- for stdin) submits a task per line of a JSON
// Lines file through Client.SubmitMany, in batches of --batch lines
// (default 1000, at most cairnq.MaxSubmitMany), each batch one
// transaction. A line is a JSON object in the protocol's names for
// submit's arguments: name (required), payload (default {}), queue, key,
// conflict (reuse, reuse-succeeded, reject, replace), priority,
// max_attempts, delay (a duration, as --delay takes), metadata,
// parent_id, root_id and correlation_id; another field is refused.
// --queue, --priority, --max-attempts and --delay give the values of a
// line that names none; --key is refused, since a key names one task.
// Blank lines are skipped (and counted). The lines apply in the file's
// order, so the tasks are what the same submits one after another would
// make, keys and conflicts included, across batches as within one.
//
// stdout holds the ids in the lines' order (--json: a task per line),
// each batch's written once it is committed. stderr holds a progress
// line, "submitted 2000 tasks, lines 1-2000": on a terminal it is
// redrawn in place, and cleared before ids printed on the same terminal
// and drawn again after them; elsewhere it is printed once a second and
// at the end. A blank input submits and prints nothing.
//
// A line that is not a task stops the command at that line: nothing of
// its batch is written, and the message says what the batches before it
// submitted, "cairnq: submit --from: lines 1-2000 submitted (2000
// tasks); line 2417: unknown field "prio"", or "nothing submitted". A
// line that is not a JSON object, an unknown field or a value of the
// wrong type, and an item SubmitMany refuses as invalid (a bad name,
// conflict or metadata) exit 2; a key taken under reject exits 1, as a
// file that cannot be read does. An interrupt (even while stdin waits
// for its writer) stops it the same way, with exit 1: "nothing
// submitted; interrupted reading line 3: context canceled".
//
// # doctor
//
// doctor shows the health of a database on one screen, changing nothing,
// and exits 4 when anything needs attention: the protocol and schema
// versions against this cairnq's (behind, ahead or another major); on
// Postgres the route (a direct connection, or a connection pooler, and so
// whether cairnq keeps its statements prepared) and whether LISTEN works
// (a notification sent and received on a channel of its own; n/a on
// SQLite); running tasks whose lease has expired (a claim recovers them,
// so they mean no worker has claimed since); per queue, the due queued
// tasks and how long the oldest has waited (over --max-wait); and the
// tasks that failed for good within --window, by name (over
// --max-failures). On a schema behind or of another protocol the task
// checks are skipped. The library's Client.ExpiredLeases,
// Client.QueueAges and Client.RecentFailures are what it reads.
//
// # ui
//
// ui serves the web console (package console) on either backend until
// interrupted, opening the database without creating or migrating
// anything. It listens on 127.0.0.1:8080 unless --addr names another
// address, and answers only for the host names a browser may rightly use
// for it (localhost, the loopback addresses, the host of --addr, each
// --allow-host), refusing others with 421 against DNS rebinding. It is
// read-only unless --allow-writes, and every write is a POST refused from
// another origin. --basic-auth VAR requires HTTP basic authentication with
// the user:password held in the environment variable VAR, never on the
// command line; --hide-payloads keeps payloads, results and metadata off
// every page.
//
// # Exit status
//
//	0  done; doctor and migrate --check found nothing needing attention
//	1  an error (cannot connect, a refused database, a task not in a state to cancel or retry)
//	2  usage: an unknown command or flag, a missing or extra argument, a
//	   value cairnq refuses (an unknown status, a bad name)
//	3  not found: no such task (get, cancel, retry), no such database
//	   (no file, schema or cairnq tables)
//	4  doctor or migrate --check found something needing attention
//
// cairnq -h, cairnq --help, cairnq help [COMMAND] and -h on any command
// print usage and exit 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	cairnq "github.com/cairnq/cairnq-go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], &env{in: os.Stdin, out: os.Stdout, errOut: os.Stderr, getenv: os.Getenv, self: invokedAs()})
	stop()
	if err != nil {
		reportError(os.Stderr, err)
	}
	os.Exit(exitCode(err))
}

// invokedAs is "go run ./cmd/cairnq" when this program is a binary go run
// built (in a go-build directory, gone once it exits: no "cairnq" is on
// the user's PATH then), and "" otherwise.
func invokedAs() string {
	exe, err := os.Executable()
	if err == nil && strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/cairnq"
	}
	return ""
}

// The exit statuses; see the package documentation.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitNotFound  = 3
	exitAttention = 4
)

var (
	// errUsage marks a command line that cannot be run as given.
	errUsage = errors.New("usage")
	// errHelp is a request for usage, which was printed: exit 0.
	errHelp = errors.New("help requested")
	// errAttention is what doctor and migrate --check return when they
	// found something needing attention (their report says what).
	errAttention = errors.New("needs attention")
)

// exitCode maps what run returned to the process's exit status.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage), errors.Is(err, cairnq.ErrInvalidArgument):
		return exitUsage
	case errors.Is(err, errAttention):
		return exitAttention
	case errors.Is(err, cairnq.ErrNotFound), errors.Is(err, cairnq.ErrNoDatabase):
		return exitNotFound
	}
	return exitError
}

// reportError prints err for a person: once prefixed, without the
// "cairnq: " every library error starts with, and with a hint where one
// helps.
func reportError(w io.Writer, err error) {
	if errors.Is(err, errHelp) {
		return
	}
	// An error may run over several lines (a connection to several hosts);
	// each is made printable, so none can carry a terminal's control
	// sequences.
	lines := strings.Split(strings.ReplaceAll(err.Error(), "cairnq: ", ""), "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	fmt.Fprintln(w, "cairnq:", strings.Join(lines, "\n"))
	var de *dbError
	if errors.Is(err, cairnq.ErrNoDatabase) && errors.As(err, &de) {
		fmt.Fprintf(w, "cairnq: the database is %s (%s); 'cairnq migrate' creates one\n", printable(de.t.String()), de.t.from)
	}
}

// env is what a command runs with: where it writes, the environment it
// reads, and which command it is. A command that runs on the database
// also finds its database flags here, and the database it connected to,
// which runCommand closes when the command returns.
type env struct {
	in          io.Reader // submit --from -; nil reads as empty
	out, errOut io.Writer
	getenv      func(string) string
	// isTerminal reports whether a writer is a terminal; nil means
	// isTerminal, which asks the operating system.
	isTerminal func(io.Writer) bool
	// self is how the user runs this program, for the commands it
	// suggests: "" for "cairnq".
	self     string
	cmd      *command
	db       *dbFlags  // set by dbFlags
	database *database // set by connect
}

// terminal reports whether w is a terminal (see env.isTerminal).
func (e *env) terminal(w io.Writer) bool {
	if e.isTerminal != nil {
		return e.isTerminal(w)
	}
	return isTerminal(w)
}

// command is one entry of the command table.
type command struct {
	name     string
	synopsis string // what follows "cairnq NAME" in the usage line
	summary  string // one line for the command list
	details  string // what -h prints above the flags
	args     arity  // the arguments after the flags; the zero value takes none
	run      func(ctx context.Context, e *env, args []string) error
}

// arity is how many arguments a command takes after its flags, and what
// to say when it is given another number.
type arity struct {
	min, max int
	what     string // "" for none
}

// oneTaskID is the argument of get.
var oneTaskID = arity{1, 1, "one task id"}

// idOrFilter is the argument of cancel, retry and delete: one task id,
// or none with the filter flags (settle checks which).
var idOrFilter = arity{0, 1, "one task id, or none with --status, --queue or --name"}

// commands is the command table, in the order the usage lists them.
func commands() []*command {
	return []*command{
		{name: "demo", synopsis: "[--db cairnq-demo.db] [--n 300] [--concurrency 8]",
			summary: "submit sample tasks to a fresh SQLite file and run a worker on them",
			details: demoHelp, run: cmdDemo},
		{name: "stats", synopsis: "[flags]", summary: "task counts per queue and status",
			details: statsHelp, run: cmdStats},
		{name: "list", synopsis: "[flags]", summary: "list tasks, newest first",
			details: listHelp, run: cmdList},
		{name: "get", synopsis: "[flags] ID", summary: "show one task",
			details: getHelp, args: oneTaskID, run: cmdGet},
		{name: "submit", synopsis: "[flags] NAME [JSON] | --from FILE [flags]", summary: "submit a task (payload as JSON), or one per line of a file",
			details: submitHelp, args: arity{0, 2, "NAME and an optional JSON payload"}, run: cmdSubmit},
		{name: "cancel", synopsis: "[flags] ID | --status S --queue Q --name N", summary: "cancel a queued or running task, or all matching",
			details: cancelHelp, args: idOrFilter, run: cmdCancel},
		{name: "retry", synopsis: "[flags] ID | --status S --queue Q --name N", summary: "queue a failed or canceled task again, or all matching",
			details: retryHelp, args: idOrFilter, run: cmdRetry},
		{name: "delete", synopsis: "[flags] ID | --status S --queue Q --name N", summary: "delete a task no worker holds, or all matching",
			details: deleteHelp, args: idOrFilter, run: cmdDelete},
		{name: "workflow", synopsis: "list [flags] | get|cancel|retry [flags] ID", summary: "list the workflows, or get (show), cancel or retry one",
			details: workflowHelp, args: arity{1, 2, "list, or get, cancel or retry and a workflow's id"}, run: cmdWorkflow},
		{name: "event", synopsis: "send [--key] [flags] ID NAME [JSON]", summary: "send an event to a task's durable handler",
			details: eventHelp, args: arity{3, 4, "send, a task's id, an event's name and an optional JSON payload"}, run: cmdEvent},
		{name: "pause", synopsis: "[--reason TEXT] [--by NAME] [flags] QUEUE", summary: "pause a queue for every Go worker on the database",
			details: pauseHelp, args: oneQueue, run: cmdPause},
		{name: "resume", synopsis: "[flags] QUEUE", summary: "resume a queue paused with pause",
			details: resumeHelp, args: oneQueue, run: cmdResume},
		{name: "workers", synopsis: "[flags]", summary: "the Go workers running on the database, idle ones too",
			details: workersHelp, run: cmdWorkers},
		{name: "schedules", synopsis: "[flags]", summary: "the periodic schedules and their next run",
			details: schedulesHelp, run: cmdSchedules},
		{name: "purge", synopsis: "[flags]", summary: "delete finished tasks past a cutoff",
			details: purgeHelp, run: cmdPurge},
		{name: "watch", synopsis: "[flags]", summary: "print the counts at the start and whenever they change",
			details: watchHelp, run: cmdWatch},
		{name: "migrate", synopsis: "[--check] [flags]", summary: "apply the migrations, or check whether any are needed",
			details: migrateHelp, run: cmdMigrate},
		{name: "doctor", synopsis: "[flags]", summary: "one screen of health; exit 4 when something needs attention",
			details: doctorHelp, run: cmdDoctor},
		{name: "ui", synopsis: "[--addr 127.0.0.1:8080] [--allow-writes] [flags]", summary: "serve the web console",
			details: uiHelp, run: cmdUI},
		{name: "version", synopsis: "[--json]", summary: "the cairnq, protocol, schema and Go versions",
			details: versionHelp, run: cmdVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: cairnq <command> [flags] [args]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, usageTail)
}

const usageTail = `
Flags may come before or after a command's arguments; -- ends the flags.

Every command but demo and version takes:
  --db DB        a SQLite file, or a Postgres URL (postgres://...) or DSN
                 (host=... dbname=...); default $CAIRNQ_DB, else $DATABASE_URL
                 when it is a Postgres URL, else ./tasks.db
  --schema NAME  the Postgres schema cairnq lives in (default: search_path)
Every command but demo and ui takes --json: one JSON document on stdout
(watch: one per line), its shape in the command's help. The read commands
(stats, list, get, watch, doctor, migrate --check) never create or change
anything; only migrate creates a database.

exit status: 0 ok, 1 error, 2 usage, 3 not found (task or database),
4 doctor or migrate --check found something needing attention.

Run 'cairnq help <command>' or 'cairnq <command> -h' for a command's flags.
`

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, e *env) error {
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	if len(args) == 0 {
		usage(e.errOut)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	args, err := leadingFlags(args)
	if err != nil {
		return err
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(e.out)
		return nil
	case "-version", "--version":
		return e.runCommand(ctx, "version", args[1:])
	case "help":
		if len(args) == 1 || args[1] == "help" {
			usage(e.out)
			return nil
		}
		if len(args) > 2 {
			return fmt.Errorf("%w: help takes one command, got %d words", errUsage, len(args)-1)
		}
		// The command defines its flags as it starts, then sees -h.
		return e.runCommand(ctx, args[1], []string{"-h"})
	}
	return e.runCommand(ctx, args[0], args[1:])
}

// leadingFlags lets the flags every command takes (--db, --schema,
// --json) come before the command: "cairnq --db x stats" is "cairnq stats
// --db x". It returns args with the word after such flags first and the
// flags after it (dropped before help, -h and --version, which take
// none), or an error when no word follows them. Args that do not start
// with one of those flags come back as they are.
func leadingFlags(args []string) ([]string, error) {
	i := 0
	for i < len(args) {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch {
		case !strings.HasPrefix(args[i], "-") || args[i] == "-" || args[i] == "--":
		case name == "json":
			i++
			continue
		case (name == "db" || name == "schema") && hasValue:
			i++
			continue
		case name == "db" || name == "schema":
			i += 2
			continue
		}
		break
	}
	if i == 0 {
		return args, nil
	}
	if i >= len(args) {
		return nil, lineError(fmt.Sprintf("no command after %s; run cairnq help", strings.Join(args, " ")))
	}
	cmd, flags, rest := args[i], args[:i], args[i+1:]
	switch cmd {
	case "help", "-h", "-help", "--help", "-version", "--version":
		return append([]string{cmd}, rest...), nil
	}
	return append(append([]string{cmd}, flags...), rest...), nil
}

// runCommand runs the command named name on args, and closes the database
// it connected to when it returns.
func (e *env) runCommand(ctx context.Context, name string, args []string) error {
	c := lookup(name)
	if c == nil {
		return unknownCommand(name)
	}
	e.cmd = c
	err := c.run(ctx, e, args)
	if e.database != nil {
		e.database.close()
		e.database = nil
	}
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// lineError is a usage error reported as its message alone, on one line:
// no usage, no "usage:" prefix.
type lineError string

func (e lineError) Error() string        { return string(e) }
func (e lineError) Is(target error) bool { return target == errUsage }

// unknownCommand is the one line for a command cairnq does not have,
// naming the command it is closest to when it is close (see suggest).
func unknownCommand(name string) error {
	if strings.HasPrefix(name, "-") {
		return lineError(fmt.Sprintf("unknown flag %s; a command comes first (cairnq <command> [flags]); run cairnq help", name))
	}
	if s := suggest(name); s != "" {
		return lineError(fmt.Sprintf("unknown command %s; did you mean %s?", name, s))
	}
	return lineError(fmt.Sprintf("unknown command %s; run cairnq help", name))
}

// suggest returns the command closest to name when it is close: at most
// two edits away (an edit inserts, deletes or replaces a letter, or swaps
// two adjacent ones) and at most a third of the command's letters (one
// for a short one), so that "lsit" suggests list but "xy" suggests
// nothing. Case does not count.
func suggest(name string) string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return nearest(name, names)
}

// nearest returns the one of options closest to name when it is close,
// by suggest's rule.
func nearest(name string, options []string) string {
	best, bestD := "", 3
	for _, o := range options {
		d := editDistance(strings.ToLower(name), o)
		if d < bestD && d <= max(1, len(o)/3) {
			best, bestD = o, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and transpositions of
// adjacent bytes.
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

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flags makes the running command's flag set. Parse errors and -h are
// handled by parse, which prints the command's usage itself.
func (e *env) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(e.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// dbFlags makes the flag set of a command that runs on the database and
// prints JSON when asked: --db, --schema and --json (see addDBFlags),
// kept as e.db, to which the command adds its own.
func (e *env) dbFlags() *flag.FlagSet {
	fs := e.flags()
	e.db = addDBFlags(fs, true)
	return fs
}

// dbFlagsNoJSON is dbFlags for a command that prints no JSON (ui): --db
// and --schema only, so that its help offers no --json it would refuse.
func (e *env) dbFlagsNoJSON() *flag.FlagSet {
	fs := e.flags()
	e.db = addDBFlags(fs, false)
	return fs
}

// parse parses args into fs: -h prints the command's usage on stdout
// (errHelp, exit 0), a bad flag prints it on stderr (a usage error), and
// so does a number of arguments the command table does not allow it.
// Flags and arguments may come in any order (see splitFlags).
func (e *env) parse(fs *flag.FlagSet, args []string) error {
	flags, positional := splitFlags(fs, args)
	err := fs.Parse(flags)
	if err == nil {
		// Every flag is parsed; this leaves the arguments as fs.Args.
		err = fs.Parse(append([]string{"--"}, positional...))
	}
	switch {
	case err == nil:
		return e.args(fs)
	case errors.Is(err, flag.ErrHelp):
		e.usage(e.out, fs)
		return errHelp
	}
	// One line, as for every other usage error: the whole help would
	// bury what was wrong; a mistyped flag names the one meant.
	if bad, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := nearest(strings.TrimLeft(bad, "-"), names); s != "" {
			return e.usageError("%v; did you mean --%s?", err, s)
		}
	}
	return e.usageError("%v", err)
}

// statusFlag is a --status flag setting *dst, which must be one of
// allowed: anything else is refused with the list, and the one meant
// when it is close.
func statusFlag(dst *cairnq.Status, allowed ...cairnq.Status) func(string) error {
	return func(s string) error {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			if string(a) == s {
				*dst = a
				return nil
			}
			names[i] = string(a)
		}
		msg := fmt.Sprintf("unknown status %q: one of %s", s, strings.Join(names, ", "))
		if n := nearest(s, names); n != "" {
			msg += "; did you mean " + n + "?"
		}
		return errors.New(msg)
	}
}

// usage prints the running command's usage with fs's flags.
func (e *env) usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: cairnq %s %s\n\n%s\n", e.cmd.name, e.cmd.synopsis, strings.TrimSpace(e.cmd.details))
	fmt.Fprint(w, "\nflags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageError reports arguments the running command cannot take.
func (e *env) usageError(format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s (see 'cairnq %s -h')", errUsage, e.cmd.name, fmt.Sprintf(format, a...), e.cmd.name)
}

// args checks the number of arguments left after the flags against the
// running command's arity.
func (e *env) args(fs *flag.FlagSet) error {
	a := e.cmd.args
	if n := fs.NArg(); n < a.min || n > a.max {
		if a.what == "" {
			return e.usageError("takes no arguments, got %q", fs.Args())
		}
		return e.usageError("takes %s", a.what)
	}
	return nil
}

// splitFlags separates args into the flags, each with its value, and the
// arguments, so that a flag may follow an argument (cairnq get ID --db x)
// as in most command lines people use. It reads args as package flag
// does: -name and --name alike, a flag of fs that is not boolean takes the
// next word as its value unless given as -name=value, and a lone "-" is an
// argument. "--" ends the flags: every word after it is an argument, even
// one starting with a dash. A word fs does not know as a flag stays a flag,
// for fs.Parse to refuse.
func splitFlags(fs *flag.FlagSet, args []string) (flags, positional []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return flags, append(positional, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimPrefix(a[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return flags, positional
}

// isBoolFlag reports whether f takes no value (as package flag decides).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
