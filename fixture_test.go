package cairnq_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// fixtureManifest is the JSON beside the TypeScript SDK's database.
type fixtureManifest struct {
	Tasks map[string]string              `json:"tasks"`
	Keys  map[string]string              `json:"keys"`
	Stats map[string]cairnq.StatusCounts `json:"stats_when_made"`
}

// copyFixture copies the TypeScript SDK's database into a temp dir (never
// opening the shared file in place) and reads its manifest.
func copyFixture(t *testing.T) (string, fixtureManifest) {
	t.Helper()
	dir := os.Getenv("CAIRNQ_FIXTURES_DIR")
	if dir == "" {
		t.Skip("CAIRNQ_FIXTURES_DIR is not set (CI sets it to ../shared/fixtures)")
	}
	var m fixtureManifest
	b, err := os.ReadFile(filepath.Join(dir, "node-0.12.tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "tasks.db")
	src, err := os.Open(filepath.Join(dir, "node-0.12.tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst, m
}

func TestFixtureFromTypeScriptSDK(t *testing.T) {
	path, m := copyFixture(t)
	ctx := context.Background()
	ledgerBefore, metaBefore := readLedger(t, path)
	if len(ledgerBefore) != 9 {
		t.Fatalf("fixture ledger has %d rows, want 9", len(ledgerBefore))
	}

	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer c.Close()

	ledgerAfter, metaAfter := readLedger(t, path)
	if len(ledgerAfter) != len(ledgerBefore) {
		t.Fatalf("opening re-applied migrations: ledger went from %d to %d rows", len(ledgerBefore), len(ledgerAfter))
	}
	for i := range ledgerBefore {
		if ledgerBefore[i] != ledgerAfter[i] {
			t.Errorf("ledger row changed: %v -> %v", ledgerBefore[i], ledgerAfter[i])
		}
	}
	if metaAfter["protocol_version"] != "1" || metaAfter["schema_version"] != metaBefore["schema_version"] {
		t.Errorf("meta changed: %v -> %v", metaBefore, metaAfter)
	}

	get := func(role string) *cairnq.Task {
		t.Helper()
		task, err := c.Get(ctx, m.Tasks[role])
		if err != nil {
			t.Fatalf("get %s (%s): %v", role, m.Tasks[role], err)
		}
		return task
	}

	ok := get("succeeded")
	if ok.Status != cairnq.StatusSucceeded || ok.Priority != 5 || ok.Progress == nil || *ok.Progress != 1.0 ||
		ok.Message == nil || *ok.Message != "halfway" || !ok.LeaseUntil.IsZero() || ok.RootID != ok.ID {
		t.Errorf("succeeded task reads back wrong: %+v", ok)
	}
	var meta map[string]string
	if err := json.Unmarshal(ok.Metadata, &meta); err != nil || meta["owner"] != "alice" {
		t.Errorf("metadata = %s, want owner alice", ok.Metadata)
	}
	var payload struct {
		Page  int    `json:"page"`
		Title string `json:"title"`
	}
	if err := ok.DecodePayload(&payload); err != nil || payload.Page != 1 || payload.Title != "héllo ✓" {
		t.Errorf("payload = %s (%v)", ok.Payload, err)
	}
	var result struct {
		Pages  int `json:"pages"`
		Nested struct {
			OK bool    `json:"ok"`
			N  float64 `json:"n"`
		} `json:"nested"`
	}
	if err := ok.DecodeResult(&result); err != nil || result.Pages != 1 || !result.Nested.OK || result.Nested.N != 1.5 {
		t.Errorf("result = %s (%v)", ok.Result, err)
	}

	failed := get("failed")
	if failed.Status != cairnq.StatusFailed || failed.Error == nil {
		t.Fatalf("failed task: %+v", failed)
	}
	env := failed.Error
	if env.Type != "RenderError" || env.Code != "bad_input" || env.Retryable || env.Details["page"] != 2.0 {
		t.Errorf("envelope = %+v", env)
	}
	if got := get("canceled"); got.Status != cairnq.StatusCanceled {
		t.Errorf("canceled task has status %s", got.Status)
	}
	delayed := get("delayed")
	if delayed.Status != cairnq.StatusQueued || delayed.RunAt.Sub(delayed.CreatedAt) != 3_600_000_000*time.Millisecond {
		t.Errorf("delayed task: status %s, run_at - created_at = %v", delayed.Status, delayed.RunAt.Sub(delayed.CreatedAt))
	}
	child := get("child")
	if child.ParentID != m.Tasks["succeeded"] || child.RootID != m.Tasks["succeeded"] || child.CorrelationID != "corr-a" {
		t.Errorf("child links: parent %q root %q correlation %q", child.ParentID, child.RootID, child.CorrelationID)
	}
	for key, id := range m.Keys {
		byKey, err := c.GetByKey(ctx, key)
		if err != nil || byKey.ID != id {
			t.Errorf("key %s -> %v (%v), want %s", key, byKey, err, id)
		}
	}
	stats, err := c.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range m.Stats {
		if stats[q] != want {
			t.Errorf("stats[%s] = %+v, want %+v", q, stats[q], want)
		}
	}

	// The running task's 50ms lease expired long ago: the next claim
	// recovers it (back to queued, attempt 1 of 3) and can take it.
	st := cairnq.StoreOf(c)
	claimed, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"gpu"}, WorkerID: "go-worker", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != m.Tasks["running"] || claimed[0].Attempt != 2 || claimed[0].WorkerID != "go-worker" {
		t.Fatalf("claim on gpu = %+v, want the recovered running task at attempt 2", claimed)
	}
	if claimed[0].Progress != nil || claimed[0].Message != nil {
		t.Errorf("recovered task kept the dead attempt's progress: %v %v", claimed[0].Progress, claimed[0].Message)
	}
	if _, err := st.Complete(ctx, claimed[0].ID, "go-worker", map[string]int{"vectors": 2}); err != nil {
		t.Fatal(err)
	}

	// The queued tasks that are due (not the delayed one) run and settle.
	due, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "go-worker", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range due {
		ids = append(ids, d.ID)
		if _, err := st.Complete(ctx, d.ID, "go-worker", nil); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(ids)
	want := []string{m.Tasks["queued"], m.Tasks["child"]}
	sort.Strings(want)
	if len(ids) != 2 || ids[0] != want[0] || ids[1] != want[1] {
		t.Errorf("claimed %v, want the two due queued tasks %v", ids, want)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// What another SDK needs to open the file again: the same ledger and meta.
	ledgerEnd, metaEnd := readLedger(t, path)
	if len(ledgerEnd) != 9 || metaEnd["protocol_version"] != "1" || metaEnd["schema_version"] != "10" {
		t.Errorf("after use: ledger %d rows, meta %v", len(ledgerEnd), metaEnd)
	}
}
