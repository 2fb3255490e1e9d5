package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/conformance/pgserver"
)

// helpFlag is a flag as a command's help lists it: its name, and the
// word naming its value ("" for a boolean flag).
type helpFlag struct{ name, value string }

var (
	// defaultsLine is a flag's first line as flag.PrintDefaults writes it.
	defaultsLine = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)(?: (\S+))?(?:\t|$)`)
	// flagMention is a flag named in prose: --name.
	flagMention = regexp.MustCompile(`(?:^|[^-\w])--([a-z][a-z0-9-]*[a-z0-9])`)
	// commandMention is another command named in prose: 'cairnq NAME.
	commandMention = regexp.MustCompile(`'cairnq ([a-z]+)`)
)

// commandHelp is what `cairnq NAME -h` printed: the text above the flags
// and the flags listed below it.
type commandHelp struct {
	prose, defaults string
	flags           []helpFlag
}

func (h commandHelp) has(name string) bool {
	return slices.ContainsFunc(h.flags, func(f helpFlag) bool { return f.name == name })
}

func readHelp(t *testing.T, name string) commandHelp {
	t.Helper()
	r := ok(t, name, "-h")
	prose, defaults, found := strings.Cut(r.stdout, "\nflags:\n")
	if !found {
		t.Fatalf("cairnq %s -h lists no flags:\n%s", name, r.stdout)
	}
	h := commandHelp{prose: prose, defaults: defaults}
	for _, m := range defaultsLine.FindAllStringSubmatch(defaults, -1) {
		h.flags = append(h.flags, helpFlag{m[1], m[2]})
	}
	return h
}

// helpValue is a value each flag accepts, for the command to get past
// its flags to the database.
func helpValue(f helpFlag) string {
	switch f.name {
	case "status":
		return "failed"
	case "addr":
		return "127.0.0.1:0"
	case "basic-auth":
		return "CAIRNQ_HELP_AUTH"
	case "n":
		return "2"
	case "poll", "for":
		return "20ms"
	}
	switch f.value {
	case "duration":
		return "1m"
	case "int":
		return "1"
	}
	return "x"
}

// Every command's help is true: each flag it names, in its text or in its
// list of flags, is one the command has, and the command accepts each
// flag listed (no flag listed then refused, as ui did --json); it refers
// to no shape that is not there and to no command that does not exist.
// Before, `help ui` listed -json, which ui refused, and `cancel -h` and
// `retry -h` said "(shape above)" with no shape above.
func TestHelpIsTrue(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	vars := map[string]string{"CAIRNQ_HELP_AUTH": "u:p"}
	// base is a command line that gets past the flags to the database (or
	// runs, for demo, migrate and version), whatever flag is added.
	base := func(c *command) []string {
		switch c.name {
		case "demo":
			return []string{"demo", "--db", filepath.Join(dir, "demo.db"), "--n", "2"}
		case "version":
			return []string{"version"}
		case "migrate":
			return []string{"migrate", "--db", filepath.Join(dir, "migrated.db")}
		}
		args := []string{c.name, "--db", missing}
		switch c.name {
		case "workflow":
			args = append(args, "get", "task_x") // the verb and the id (list: see below)
		case "event":
			args = append(args, "send") // the verb, then the task and the event below
		}
		for range c.args.min - len(args) + 3 {
			args = append(args, "task_x")
		}
		switch c.name {
		case "submit":
			args = append(args, "task_x") // NAME, or --from: see lines
		case "cancel", "retry", "delete":
			args = append(args, "task_x") // the ID, or a filter flag instead: see byFilter
		}
		return args
	}
	// lines is an empty file for submit --from, which takes no NAME.
	lines := filepath.Join(dir, "lines.jsonl")
	if err := os.WriteFile(lines, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// byFilter are the commands that take a filter instead of an ID.
	byFilter := map[string]bool{"cancel": true, "retry": true, "delete": true}
	helps := map[string]commandHelp{}
	for _, c := range commands() {
		h := readHelp(t, c.name)
		helps[c.name] = h
		for _, m := range flagMention.FindAllStringSubmatch(c.synopsis+"\n"+h.prose+"\n"+h.defaults, -1) {
			if !h.has(m[1]) {
				t.Errorf("cairnq %s -h names --%s, which %s does not have", c.name, m[1], c.name)
			}
		}
		for _, m := range commandMention.FindAllStringSubmatch(h.prose+h.defaults, -1) {
			if lookup(m[1]) == nil {
				t.Errorf("cairnq %s -h refers to cairnq %s, which does not exist", c.name, m[1])
			}
		}
		if strings.Contains(h.defaults, "shape above") &&
			(!strings.Contains(h.prose, "--json") || !strings.Contains(h.prose, "{") && !strings.Contains(h.prose, "task object")) {
			t.Errorf("cairnq %s -h says \"shape above\" with no JSON shape above:\n%s", c.name, h.prose)
		}
		for _, f := range h.flags {
			if f.name == "schema" {
				continue // Postgres only: below
			}
			args := base(c)
			arg := "--" + f.name
			switch {
			case f.name == "db":
				arg += "=" + args[2] // the base's own, which every base but version's names
			case f.value != "":
				arg += "=" + helpValue(f)
			}
			switch {
			case byFilter[c.name] && (f.name == "status" || f.name == "queue" || f.name == "name"):
				args = args[:3] // the filter instead of the ID
			case c.name == "workflow" && (f.name == "status" || f.name == "limit"):
				args = append(args[:3], "list") // list's flags
			case c.name == "submit" && f.name == "from":
				args, arg = args[:3], "--from="+lines
			case c.name == "submit" && f.name == "batch":
				args = append(args[:3], "--from", lines)
			}
			args = append(args, arg)
			if r := cliEnv(t, vars, args...); r.code == exitUsage {
				t.Errorf("cairnq %s -h lists --%s, which cairnq %s refuses:\n%s", c.name, f.name, strings.Join(args, " "), r)
			}
		}
	}

	// The usage says which commands take the shared flags.
	for _, c := range commands() {
		h := helps[c.name]
		// demo's --db is its own: the SQLite file it makes.
		if wantDB := c.name != "demo" && c.name != "version"; h.has("db") != (wantDB || c.name == "demo") || h.has("schema") != wantDB {
			t.Errorf("cairnq %s: --db %v, --schema %v; the usage says every command but demo and version takes them", c.name, h.has("db"), h.has("schema"))
		}
		if wantJSON := c.name != "demo" && c.name != "ui"; h.has("json") != wantJSON {
			t.Errorf("cairnq %s: --json %v; the usage says every command but demo and ui takes it", c.name, h.has("json"))
		}
	}
	usage := ok(t, "help").stdout
	for _, m := range flagMention.FindAllStringSubmatch(usage, -1) {
		if !slices.ContainsFunc(commands(), func(c *command) bool { return helps[c.name].has(m[1]) }) {
			t.Errorf("cairnq help names --%s, which no command has", m[1])
		}
	}

	// --schema, on Postgres, by every command that lists it.
	t.Run("schema", func(t *testing.T) {
		dsn := pgserver.DSN(t)
		for _, c := range commands() {
			if !helps[c.name].has("schema") {
				continue
			}
			args := base(c)
			args[2] = dsn // every command listing --schema starts NAME --db DB
			// A schema of its own, absent but for migrate, which creates it.
			args = append(args, "--schema", "help_"+c.name)
			if r := cliEnv(t, vars, args...); r.code == exitUsage {
				t.Errorf("cairnq %s -h lists --schema, which cairnq %s refuses:\n%s", c.name, strings.Join(args, " "), r)
			}
		}
	})
}
