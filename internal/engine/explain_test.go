package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/protocol"
)

// What the plan tests read of the server's plans: EXPLAIN of a store's
// statement under its own plan or the generic one a connection caches,
// the buffers it touched, and the indexes and scans it reads through.

// explainBuffers runs the store's statement name with a under EXPLAIN
// ANALYZE in a transaction it rolls back, and returns the shared buffers
// the plan touched.
func explainBuffers(t *testing.T, s *Store, db *sql.DB, name string, a protocol.Args) int {
	t.Helper()
	q, args, err := s.compile(name, a)
	if err != nil {
		t.Fatal(err)
	}
	return explainSQLBuffers(t, db, q, args...)
}

// explainGenericBuffers is explainBuffers under the generic plan (see
// prepareGeneric). The statement's arguments go to EXECUTE as the SQL
// literals given, in order (the server takes no parameters for an
// EXPLAIN of an EXECUTE).
func explainGenericBuffers(t *testing.T, s *Store, db *sql.DB, name string, a protocol.Args, literals ...string) int {
	t.Helper()
	conn, n, release := prepareGeneric(t, s, db, name, a)
	defer release()
	if len(literals) != n {
		t.Fatalf("%s takes %d arguments, %d literals given", name, n, len(literals))
	}
	return explainOn(t, conn, "EXECUTE generic_probe("+strings.Join(literals, ", ")+")")
}

// prepareGeneric prepares the store's statement name, compiled with a, as
// generic_probe on a connection of db that runs the generic plan, the one
// a statement the driver keeps prepared runs from its sixth call on when
// it costs no more than the custom plans of the first five. It returns
// the connection, the statement's number of parameters, and release,
// which gives the connection back to the pool as it came.
func prepareGeneric(t *testing.T, s *Store, db *sql.DB, name string, a protocol.Args) (conn *sql.Conn, params int, release func()) {
	t.Helper()
	q, args, err := s.compile(name, a)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release = func() {
		cctx := context.WithoutCancel(ctx)
		_, _ = conn.ExecContext(cctx, "DEALLOCATE generic_probe")
		_, _ = conn.ExecContext(cctx, "RESET plan_cache_mode")
		_ = conn.Close()
	}
	if _, err := conn.ExecContext(ctx, "PREPARE generic_probe AS "+q); err != nil {
		release()
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		release()
		t.Fatal(err)
	}
	return conn, len(args), release
}

// explainSQLBuffers runs q with args under EXPLAIN ANALYZE in a
// transaction it rolls back, and returns the shared buffers the plan
// touched.
func explainSQLBuffers(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return explainOn(t, conn, q, args...)
}

// explainOn is explainSQLBuffers on one connection.
func explainOn(t *testing.T, conn *sql.Conn, q string, args ...any) int {
	t.Helper()
	tx, err := conn.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // EXPLAIN ANALYZE wrote; nothing is kept
	var plan string
	if err := tx.QueryRowContext(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	p := parsePlan(t, plan)
	if p.Node == "ModifyTable" {
		// The rows it finds, not the index entries its writes add: its
		// outer plan, which counts the CTEs it scans too (an InitPlan
		// may come first in the list).
		for _, c := range p.Plans {
			if c.Parent == "Outer" {
				return c.Hit + c.Read
			}
		}
		t.Fatalf("a ModifyTable without an outer plan: %s", plan)
	}
	return p.Hit + p.Read
}

// parsePlan reads the root node of an EXPLAIN (FORMAT JSON).
func parsePlan(t *testing.T, plan string) planNode {
	t.Helper()
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &out); err != nil || len(out) != 1 {
		t.Fatal(errors.Join(err, fmt.Errorf("plan: %s", plan)))
	}
	return out[0].Plan
}

// planReads walks plan: the node types that read cairnq_tasks other than
// through an index (a Seq Scan), the names of the indexes it reads, and
// the sorts it makes.
func planReads(plan planNode) (scans, indexes []string, sorts int) {
	var walk func(n planNode)
	walk = func(n planNode) {
		switch {
		case n.Index != "":
			indexes = append(indexes, n.Index)
		case n.Relation == "cairnq_tasks" && n.Node != "ModifyTable" && !strings.HasPrefix(n.Node, "Bitmap"):
			scans = append(scans, n.Node)
		case n.Node == "Sort" || n.Node == "Incremental Sort":
			sorts++
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan)
	return scans, indexes, sorts
}

// planNode is a node of EXPLAIN's JSON plan: what it reads, and the
// shared buffers it touched (under ANALYZE, BUFFERS).
type planNode struct {
	Node      string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	Parent    string     `json:"Parent Relationship"`
	IndexCond string     `json:"Index Cond"`
	Filter    string     `json:"Filter"`
	Hit       int        `json:"Shared Hit Blocks"`
	Read      int        `json:"Shared Read Blocks"`
	Plans     []planNode `json:"Plans"`
}

// explainPlan returns the plan the server makes for the store's statement
// name with a's values, the custom plan of an unnamed statement.
func explainPlan(t *testing.T, s *Store, db *sql.DB, name string, a protocol.Args) planNode {
	t.Helper()
	q, args, err := s.compile(name, a)
	if err != nil {
		t.Fatal(err)
	}
	var plan string
	if err := db.QueryRowContext(t.Context(), "EXPLAIN (FORMAT JSON) "+q, args...).Scan(&plan); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return parsePlan(t, plan)
}

// explainGenericPlan is explainPlan for the generic plan (see
// prepareGeneric), which no argument's value shapes.
func explainGenericPlan(t *testing.T, s *Store, db *sql.DB, name string, a protocol.Args) planNode {
	t.Helper()
	conn, n, release := prepareGeneric(t, s, db, name, a)
	defer release()
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
	var plan string
	if err := conn.QueryRowContext(t.Context(), "EXPLAIN (FORMAT JSON) EXECUTE generic_probe("+nulls+")").Scan(&plan); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return parsePlan(t, plan)
}

// pruned is plan without the nodes (and what is below them) whose index
// condition or filter mentions column.
func pruned(plan planNode, column string) planNode {
	kept := plan.Plans[:0:0]
	for _, c := range plan.Plans {
		if !strings.Contains(c.IndexCond+c.Filter, column) {
			kept = append(kept, pruned(c, column))
		}
	}
	plan.Plans = kept
	return plan
}
