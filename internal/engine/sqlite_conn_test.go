package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// readBoth runs sql through query and through scan, on the writer: its
// statement cache is the one a schema change has to reach.
func readBoth(t *testing.T, s *Store, sql string) ([]executor.Row, rowSet) {
	t.Helper()
	ctx := context.Background()
	var maps []executor.Row
	var rows rowSet
	err := s.be.write(ctx, func(q querier) error {
		var err error
		if maps, err = q.query(ctx, sql, nil); err != nil {
			return err
		}
		rows, err = q.scan(ctx, sql, nil)
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return maps, rows
}

// scan is query by position: both must read the same values, and a
// column the statement lacks must read as missing either way.
func TestScanReadsWhatQueryReads(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	if _, err := s.Submit(ctx, SubmitParams{Name: "scan", Payload: map[string]any{"n": 1.5, "s": "x"}, SubmitOptions: cairnqtype.SubmitOptions{Metadata: map[string]any{"m": true}, Priority: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, SubmitParams{Name: "scan2"}); err != nil {
		t.Fatal(err)
	}
	maps, rows := readBoth(t, s, "SELECT *, NULL AS absent, 1 AS twice, 2 AS twice FROM cairnq_tasks ORDER BY id")
	if rows.len() != len(maps) || len(maps) != 2 {
		t.Fatalf("scan read %d rows, query %d", rows.len(), len(maps))
	}
	for i, m := range maps {
		for col, v := range m {
			if got := rows.value(i, col); !reflect.DeepEqual(got, v) {
				t.Errorf("row %d column %s: scan %#v, query %#v", i, col, got, v)
			}
		}
		if got := rows.value(i, "no_such_column"); got != nil {
			t.Errorf("row %d: a missing column reads %#v", i, got)
		}
		want, err := rowToTask(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := taskAt(rows, i)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("row %d: scan's task %+v, query's %+v", i, got, want)
		}
	}
}

// Every storage class reads as its Go form through both paths, and a
// row's BLOB is its own: the next row must not overwrite it.
func TestRowsReadEachStorageClass(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	want := [][]any{
		{int64(7), 1.5, "x", "", []byte{1, 2}, []byte(nil), nil},
		{int64(8), 2.5, "y", "", []byte{3, 4}, []byte(nil), nil},
	}
	cols := []string{"i", "f", "t", "et", "b", "eb", "n"}
	maps, rows := readBoth(t, s, "SELECT 7 AS i, 1.5 AS f, 'x' AS t, '' AS et, x'0102' AS b, x'' AS eb, NULL AS n "+
		"UNION ALL SELECT 8, 2.5, 'y', '', x'0304', x'', NULL")
	if len(maps) != len(want) || rows.len() != len(want) {
		t.Fatalf("query read %d rows, scan %d, want %d", len(maps), rows.len(), len(want))
	}
	for i, w := range want {
		for j, col := range cols {
			if got := maps[i][col]; !reflect.DeepEqual(got, w[j]) {
				t.Errorf("query row %d column %s: %#v, want %#v", i, col, got, w[j])
			}
			if got := rows.value(i, col); !reflect.DeepEqual(got, w[j]) {
				t.Errorf("scan row %d column %s: %#v, want %#v", i, col, got, w[j])
			}
		}
	}
}

// A cached SELECT * keeps reading every column after its table gains
// one (SQLite re-prepares the statement under the cache).
func TestCachedStatementFollowsSchemaChange(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if err := s.be.write(ctx, func(q querier) error {
			_, err := q.query(ctx, sql, nil)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE scratch (a INTEGER)")
	exec("INSERT INTO scratch VALUES (1)")
	const sql = "SELECT * FROM scratch"
	if maps, _ := readBoth(t, s, sql); len(maps) != 1 || len(maps[0]) != 1 {
		t.Fatalf("before: %v", maps)
	}
	exec("ALTER TABLE scratch ADD COLUMN b TEXT DEFAULT 'new'")
	maps, rows := readBoth(t, s, sql)
	if m := maps[0]; len(m) != 2 || m["a"] != int64(1) || m["b"] != "new" {
		t.Errorf("query after the change: %v", m)
	}
	if got := []any{rows.value(0, "a"), rows.value(0, "b")}; !reflect.DeepEqual(got, []any{int64(1), "new"}) {
		t.Errorf("scan after the change: %v", got)
	}
}
