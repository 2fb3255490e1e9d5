package cairnq_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/protocol"
)

// submitManyBatch is how many tasks one SubmitMany of the benchmarks
// carries.
const submitManyBatch = 1000

func manyBenchItems() []cairnq.SubmitItem {
	items := make([]cairnq.SubmitItem, submitManyBatch)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: "render", Payload: map[string]any{"page": i, "title": "hello"}}
	}
	return items
}

// BenchmarkSubmitMany submits batches of submitManyBatch unkeyed tasks
// on SQLite: one writer request, one commit each.
func BenchmarkSubmitMany(b *testing.B) {
	c := openTemp(b, nil)
	ctx := context.Background()
	items := manyBenchItems()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.SubmitMany(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*submitManyBatch)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkSubmitManyVsFloor measures SubmitMany on SQLite against its
// floor, as one figure: each round writes a batch with SubmitMany and
// then the same number of insert_task statements in one transaction on
// one ncruces connection configured as the writer (no validation, JSON
// encoding, ids or row decoding), and the benchmark reports the median
// of the rounds' rate ratios (1 = the floor's rate).
func BenchmarkSubmitManyVsFloor(b *testing.B) {
	ctx := context.Background()
	c := openTemp(b, nil)
	items := manyBenchItems()
	path := filepath.Join(b.TempDir(), "floor.db")
	fc, err := cairnq.Open(ctx, path, nil) // migrated as the store's own file is
	if err != nil {
		b.Fatal(err)
	}
	fc.Close()
	f := openFloor(b, path)
	defer f.close()
	st := protocol.Statements(protocol.SQLite).Get("insert_task")
	ins, _, err := f.c.Prepare(st.SQL)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	var ratios []float64
	round := 0
	for b.Loop() {
		start := time.Now()
		if _, err := c.SubmitMany(ctx, items); err != nil {
			b.Fatal(err)
		}
		many := time.Since(start)
		start = time.Now()
		f.exec(b, f.begin)
		now := time.Now().UnixMilli()
		for i := range submitManyBatch {
			id := fmt.Sprintf("task_floor%08d%012d", round, i)
			f.run(b, ins, st, protocol.Args{
				"id": id, "name": "render", "queue": "default", "payload": fmt.Sprintf(`{"page":%d,"title":"hello"}`, i),
				"metadata": "{}", "max_attempts": int64(3), "priority": int64(0), "run_at_ms": now,
				"parent_id": nil, "root_id": id, "correlation_id": nil, "now_ms": now,
			}, nil)
		}
		f.exec(b, f.commit)
		floor := time.Since(start)
		ratios = append(ratios, floor.Seconds()/many.Seconds())
		round++
	}
	slices.Sort(ratios)
	b.ReportMetric(median(ratios), "x-floor")
}

// BenchmarkSubmitManyPostgres submits batches of submitManyBatch tasks
// through the pgx adapter: unkeyed (one insert_many), and keyed (one
// lock_keys, then Submit's statements per item), each batch one
// transaction.
func BenchmarkSubmitManyPostgres(b *testing.B) {
	ctx := context.Background()
	for _, keyed := range []bool{false, true} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			c := openPostgres(b, nil)
			items := manyBenchItems()
			round := 0
			for b.Loop() {
				if keyed {
					for i := range items {
						items[i].Options.Key = fmt.Sprintf("bench-%d-%d", round, i)
					}
				}
				if _, err := c.SubmitMany(ctx, items); err != nil {
					b.Fatal(err)
				}
				round++
			}
			b.ReportMetric(float64(b.N*submitManyBatch)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
