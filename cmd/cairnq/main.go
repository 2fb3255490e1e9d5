// Command cairnq inspects and drives a cairnq database from the shell, and
// runs a demo of the whole system on the embedded SQLite default.
//
//	cairnq demo [--db cairnq-demo.db] [--n 300] [--concurrency 8]
//	cairnq stats  [--db tasks.db] [--queue q]
//	cairnq list   [--db tasks.db] [--status s] [--queue q] [--name n] [--limit 20]
//	cairnq get    [--db tasks.db] ID
//	cairnq submit [--db tasks.db] [--queue q] [--key k] NAME [JSON]
//	cairnq cancel [--db tasks.db] ID
//	cairnq retry  [--db tasks.db] ID
//	cairnq purge  [--db tasks.db] [--older-than 24h] [--status s] [--queue q]
//	cairnq watch  [--db tasks.db] [--queue q] [--poll 1s] [--for 0]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cairnq:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

const usage = `usage: cairnq <command> [flags]

commands:
  demo     submit sample tasks to a fresh SQLite file and run a worker on them
  stats    task counts per queue and status
  list     list tasks, newest first
  get      show one task
  submit   submit a task (payload as JSON)
  cancel   cancel a task
  retry    re-queue a failed or canceled task
  purge    delete finished tasks past a cutoff
  watch    print the counts whenever they may have changed

Run 'cairnq <command> -h' for a command's flags.
`

func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(errOut, usage)
		return errUsage
	}
	cmds := map[string]func(context.Context, []string, io.Writer) error{
		"demo":   cmdDemo,
		"stats":  cmdStats,
		"list":   cmdList,
		"get":    cmdGet,
		"submit": cmdSubmit,
		"cancel": cmdCancel,
		"retry":  cmdRetry,
		"purge":  cmdPurge,
		"watch":  cmdWatch,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprint(errOut, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	return cmd(ctx, args[1:], out)
}

// newFlags makes a command's flag set; parse errors are returned, not fatal.
func newFlags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}
