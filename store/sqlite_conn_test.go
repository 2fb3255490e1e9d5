package store

import (
	"context"
	"reflect"
	"testing"
)

// scan is query by position: both must read the same values, and a
// column the statement lacks must read as missing either way.
func TestScanReadsWhatQueryReads(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	if _, err := s.Submit(ctx, SubmitParams{Name: "scan", Payload: map[string]any{"n": 1.5, "s": "x"},
		Metadata: map[string]any{"m": true}, Priority: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, SubmitParams{Name: "scan2"}); err != nil {
		t.Fatal(err)
	}
	const sql = "SELECT *, NULL AS absent, 1 AS twice, 2 AS twice FROM cairnq_tasks ORDER BY id"
	err := s.be.read(ctx, func(q querier) error {
		maps, err := q.query(ctx, sql, nil)
		if err != nil {
			return err
		}
		rows, err := q.scan(ctx, sql, nil)
		if err != nil {
			return err
		}
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
				return err
			}
			got, err := taskAt(rows, i)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("row %d: scan's task %+v, query's %+v", i, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
