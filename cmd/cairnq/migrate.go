package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const schemaJSONHelp = `STATUS is {"state": "absent" | "current" | "behind" | "ahead" |
"incompatible", "schema": "S" (Postgres only), "protocol_version": N,
"schema_version": N, "sdk_protocol_version": N, "sdk_schema_version": N,
"migrations": [{"name": "0001_init.sql", "applied_at_ms": N}, ...],
"missing": [NAME, ...], "unknown": [NAME, ...]}: the database's
cairnq_meta versions and migration ledger, this cairnq's versions, the
migrations it would apply and the ledger entries it does not know.`

const migrateHelp = `Creates the database if missing (the SQLite file and its directories, or
the Postgres schema) and applies the migrations its ledger lacks, under
the lock every SDK takes; prints what it applied (--json: {"applied":
[NAME, ...], "status": STATUS}). A database of another protocol major is
refused and left as it was.

--check changes nothing: it prints the protocol and schema versions and
the migration ledger (--json: STATUS) and exits 0 when the database is
current, 3 when there is no database or no cairnq tables, 4 when it is
behind (migrations to apply), ahead (migrated by a newer cairnq: upgrade
this one) or of another protocol major.

` + schemaJSONHelp

func cmdMigrate(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	check := fs.Bool("check", false, "change nothing: report whether the database is current (exit 0), absent (3) or needs attention (4)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	d, err := e.connect(ctx)
	if err != nil {
		return err
	}
	t := d.t
	before, err := d.inspect(ctx)
	if err != nil {
		return err
	}
	if *check {
		if e.db.json {
			if err := writeJSON(e.out, before); err != nil {
				return err
			}
		} else {
			printSchema(e.out, t, before)
		}
		return schemaVerdict(t, before)
	}
	if before.State == cairnq.SchemaIncompatible {
		return &dbError{t, &cairnq.ProtocolVersionMismatchError{Found: before.ProtocolVersion, Supported: before.SDKProtocolVersion}}
	}
	if err := migrateTarget(ctx, t); err != nil {
		return err
	}
	after, err := d.inspect(ctx)
	if err != nil {
		return err
	}
	var applied []string
	for _, m := range after.Migrations {
		if !slices.ContainsFunc(before.Migrations, func(b cairnq.AppliedMigration) bool { return b.Name == m.Name }) {
			applied = append(applied, m.Name)
		}
	}
	if e.db.json {
		if applied == nil {
			applied = []string{}
		}
		return writeJSON(e.out, struct {
			Applied []string             `json:"applied"`
			Status  *cairnq.SchemaStatus `json:"status"`
		}{applied, after})
	}
	if len(applied) == 0 {
		fmt.Fprintf(e.out, "%s: nothing to apply\n", printable(t.String()))
	} else {
		fmt.Fprintf(e.out, "%s: applied %s: %s\n", printable(t.String()), count(len(applied), "migration"), printable(strings.Join(applied, ", ")))
	}
	fmt.Fprintf(e.out, "%s\n", stateLine(after))
	return nil
}

// schemaVerdict is migrate --check's exit: nil when current, ErrNoDatabase
// when absent, errAttention otherwise.
func schemaVerdict(t target, st *cairnq.SchemaStatus) error {
	switch st.State {
	case cairnq.SchemaCurrent:
		return nil
	case cairnq.SchemaAbsent:
		return &dbError{t, fmt.Errorf("%w: %s holds no cairnq tables", cairnq.ErrNoDatabase, t)}
	}
	return fmt.Errorf("%w: the schema is %s", errAttention, st.State)
}

// stateLine says in one line where the database stands and what to do.
func stateLine(st *cairnq.SchemaStatus) string {
	switch st.State {
	case cairnq.SchemaAbsent:
		return fmt.Sprintf("absent: no cairnq tables; 'cairnq migrate' applies %s", count(len(st.Missing), "migration"))
	case cairnq.SchemaCurrent:
		return fmt.Sprintf("current: protocol %d, schema %d", st.ProtocolVersion, st.SchemaVersion)
	case cairnq.SchemaBehind:
		return fmt.Sprintf("behind: %s to apply (%s); run 'cairnq migrate'", count(len(st.Missing), "migration"), strings.Join(st.Missing, ", "))
	case cairnq.SchemaAhead:
		return fmt.Sprintf("ahead: schema %d, migrated by a newer cairnq (this one knows %d); upgrade this cairnq", st.SchemaVersion, st.SDKSchemaVersion)
	}
	return fmt.Sprintf("incompatible: protocol %d, this cairnq speaks %d; leave it to an SDK of that protocol", st.ProtocolVersion, st.SDKProtocolVersion)
}

// printSchema prints migrate --check's report.
func printSchema(out io.Writer, t target, st *cairnq.SchemaStatus) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "database\t%s\n", printable(t.String()))
	if st.Schema != "" {
		fmt.Fprintf(w, "schema\t%s\n", printable(st.Schema))
	}
	fmt.Fprintf(w, "state\t%s\n", stateLine(st))
	fmt.Fprintf(w, "protocol_version\t%d\t(this cairnq: %d)\n", st.ProtocolVersion, st.SDKProtocolVersion)
	fmt.Fprintf(w, "schema_version\t%d\t(this cairnq: %d)\n", st.SchemaVersion, st.SDKSchemaVersion)
	fmt.Fprintf(w, "ledger\t%s applied\n", count(len(st.Migrations), "migration"))
	for _, m := range st.Migrations {
		mark := ""
		if slices.Contains(st.Unknown, m.Name) {
			mark = "(unknown to this cairnq)"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", printable(m.Name), m.AppliedAt.Format(time.DateTime), mark)
	}
	if len(st.Missing) > 0 {
		fmt.Fprintf(w, "missing\t%s\n", printable(strings.Join(st.Missing, ", ")))
	}
	w.Flush()
}

// count is n and noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
