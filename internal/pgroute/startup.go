package pgroute

import (
	"fmt"
	"strings"
)

// SearchPathRefused says what to do when a connection pooler refuses the
// search_path startup parameter that an adapter's Options.Schema sets
// (pgbouncer refuses every parameter it does not pass on): set the schema
// on the server for the role in the database, which every server
// connection the pooler opens then starts in, and let the store check it.
// user and database are the connection's, schema the option's, each
// quoted in the statement it writes. The adapters of pgx and lib/pq give
// it in the *cairnq.OpenError of their Open.
func SearchPathRefused(user, database, schema string) string {
	return fmt.Sprintf("the server refuses the search_path startup parameter that Options.Schema sets on every connection, "+
		"and accepts a connection without it: a connection pooler (pgbouncer) refuses the startup parameters it does not pass on. "+
		"Open without Options.Schema and set the schema on the server instead: CREATE SCHEMA IF NOT EXISTS %s; "+
		"ALTER ROLE %s IN DATABASE %s SET search_path = %s; "+
		"the pooler's new server connections start in it (pgbouncer's RECONNECT replaces its open ones). "+
		"Then give %q to cairnq.PostgresOptions.Schema, which checks that the connections resolve there. "+
		"A connection straight to the server, not through the pooler, keeps Options.Schema working",
		quoteIdent(schema), quoteIdent(user), quoteIdent(database), quoteIdent(schema), schema)
}

// quoteIdent quotes a Postgres identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
