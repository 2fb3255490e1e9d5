package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// workflowRows inserts, through insert_task and the protocol's own
// transitions, a record id ending as status (with payload) and its steps,
// each given as name -> status; a step "running" is claimed and left
// running, "running-asked" also asked to stop.
func workflowRows(t *testing.T, call func(string, Args) []row, id, status, payload string, steps map[string]string, now int64) {
	t.Helper()
	insert := func(task, parent, metadata, queue string) {
		var p any
		if parent != "" {
			p = parent
		}
		call("insert_task", Args{
			"id": task, "name": queue, "queue": queue, "payload": `{}`, "metadata": metadata,
			"max_attempts": 1, "priority": 0, "run_at_ms": now, "parent_id": p,
			"root_id": id, "correlation_id": nil, "now_ms": now,
		})
	}
	insert(id, "", `{}`, "cairnq.workflow")
	for name, st := range steps {
		task := id + "-" + name
		insert(task, id, `{"cairnq_workflow":{"v":1,"record":"`+id+`","step":"`+name+`"}}`, "steps-"+task)
		if st == "queued" {
			continue
		}
		call("claim", Args{"queues": One("steps-" + task), "names": nil, "now_ms": now, "worker_id": "w", "lease_until_ms": now + 60_000, "limit": 1})
		switch st {
		case "succeeded":
			call("complete", Args{"id": task, "worker_id": "w", "now_ms": now, "result": `{}`})
		case "failed":
			call("fail", Args{"id": task, "worker_id": "w", "now_ms": now, "error": `{}`, "retryable": 0, "delay_ms": 0})
		case "canceled":
			call("cancel", Args{"id": task, "now_ms": now})
			call("complete", Args{"id": task, "worker_id": "w", "now_ms": now, "result": `{}`})
		case "running-asked":
			call("cancel", Args{"id": task, "now_ms": now})
		}
	}
	call("claim_ids", Args{"ids": `["` + id + `"]`, "worker_id": "adv", "lease_until_ms": now + 60_000, "now_ms": now})
	call("workflow_revise", Args{"id": id, "payload": payload, "now_ms": now})
	switch status {
	case "failed":
		call("fail", Args{"id": id, "worker_id": "adv", "now_ms": now, "error": `{}`, "retryable": 0, "delay_ms": 0})
	case "succeeded":
		call("complete", Args{"id": id, "worker_id": "adv", "now_ms": now, "result": `{}`})
	case "canceled":
		call("cancel", Args{"id": id, "now_ms": now})
		call("complete", Args{"id": id, "worker_id": "adv", "now_ms": now, "result": `{}`})
	}
}

// noFloor is a floor before every time.
const noFloor = int64(-1) << 62

// workflow_ended pages over the records of ended workflows in the order
// they ended, workflow_ended_by_status over those of one status in the
// claim index's order, and both say of each whether a step moved since:
// a step of a canceled one still queued, or running and not asked to
// stop; a step of a failed one live or succeeded that its ledger says
// failed or was canceled.
func TestSQLiteWorkflowEnded(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	seen := `{"seen":{"a":"succeeded","b":"failed","c":"canceled"}}`
	// Ended in this order (now+1, +2, ...), each one moved or not.
	workflowRows(t, call, "wf1", "canceled", `{}`, map[string]string{"a": "succeeded", "b": "running-asked"}, now+1)
	workflowRows(t, call, "wf2", "canceled", `{}`, map[string]string{"a": "queued"}, now+2)
	workflowRows(t, call, "wf3", "canceled", `{}`, map[string]string{"a": "running"}, now+3)
	workflowRows(t, call, "wf4", "failed", seen, map[string]string{"a": "succeeded", "b": "failed", "c": "canceled"}, now+4)
	workflowRows(t, call, "wf5", "failed", seen, map[string]string{"a": "succeeded", "b": "succeeded", "c": "canceled"}, now+5)
	workflowRows(t, call, "wf6", "failed", seen, map[string]string{"a": "succeeded", "b": "failed", "c": "queued"}, now+6)
	workflowRows(t, call, "wf7", "failed", `[1]`, map[string]string{"b": "queued"}, now+7)
	workflowRows(t, call, "wf8", "succeeded", seen, map[string]string{"a": "queued"}, now+8)

	page := func(stmt, status string, fromMS int64, fromID string, limit int) (ids []string, moved map[string]string) {
		moved = map[string]string{}
		args := Args{"name": "cairnq.workflow", "from_ms": fromMS, "from_id": fromID, "limit": limit}
		if status != "" {
			args["status"] = status
		}
		for _, r := range call(stmt, args) {
			id := fmt.Sprint(r["id"])
			ids = append(ids, id)
			moved[id] = fmt.Sprint(r["moved"])
		}
		return ids, moved
	}
	ids, moved := page("workflow_ended", "", now, "", 100)
	want := map[string]string{"wf1": "0", "wf2": "1", "wf3": "1", "wf4": "0", "wf5": "1", "wf6": "1", "wf7": "0", "wf8": "0"}
	if !maps.Equal(moved, want) {
		t.Errorf("workflow_ended = %v, want %v", moved, want)
	}
	if fmt.Sprint(ids) != "[wf1 wf2 wf3 wf4 wf5 wf6 wf7 wf8]" {
		t.Errorf("workflow_ended in order %v, want by end", ids)
	}
	// A page carries on after the last record the one before read.
	if ids, _ := page("workflow_ended", "", now+3, "wf3", 2); fmt.Sprint(ids) != "[wf4 wf5]" {
		t.Errorf("the page after wf3 = %v, want [wf4 wf5]", ids)
	}
	if ids, _ := page("workflow_ended", "", now+3, "", 1); fmt.Sprint(ids) != "[wf3]" {
		t.Errorf("the page from now+3 = %v, want [wf3]", ids)
	}
	// By status: every record that ended so, in the claim index's order.
	for status, want := range map[string]map[string]string{
		"canceled": {"wf1": "0", "wf2": "1", "wf3": "1"},
		"failed":   {"wf4": "0", "wf5": "1", "wf6": "1", "wf7": "0"},
	} {
		if _, moved := page("workflow_ended_by_status", status, noFloor, "", 100); !maps.Equal(moved, want) {
			t.Errorf("workflow_ended_by_status %s = %v, want %v", status, moved, want)
		}
	}
	if ids, _ := page("workflow_ended_by_status", "failed", now+4, "wf4", 2); fmt.Sprint(ids) != "[wf5 wf6]" {
		t.Errorf("the failed page after wf4 = %v, want [wf5 wf6]", ids)
	}
}

// purge_from purges as purge does, but for the tasks of a workflow whose
// record has not ended.
func TestSQLitePurgeFromKeepsLiveWorkflows(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	workflowRows(t, call, "live", "queued", `{}`, map[string]string{"a": "succeeded", "b": "failed"}, now)
	workflowRows(t, call, "done", "failed", `{}`, map[string]string{"a": "succeeded", "b": "failed"}, now)
	call("insert_task", Args{
		"id": "plain", "name": "n", "queue": "q", "payload": `{}`, "metadata": `{}`, "max_attempts": 1,
		"priority": 0, "run_at_ms": now, "parent_id": nil, "root_id": "live", "correlation_id": nil, "now_ms": now,
	})
	call("cancel", Args{"id": "plain", "now_ms": now}) // a task of the live workflow's tree, no step
	got := map[string]bool{}
	for _, r := range call("purge_from", Args{"before_ms": now + 1, "queue": nil, "status": nil, "name": nil, "limit": 100}) {
		got[fmt.Sprint(r["id"])] = true
	}
	want := map[string]bool{"done": true, "done-a": true, "done-b": true}
	if !maps.Equal(got, want) {
		t.Errorf("purge_from purged %v, want %v: a live workflow's tasks kept", got, want)
	}
	got = map[string]bool{}
	for _, r := range call("purge", Args{"before_ms": now + 1, "queue": nil, "status": nil, "name": nil, "limit": 100}) {
		got[fmt.Sprint(r["id"])] = true
	}
	if want := map[string]bool{"live-a": true, "live-b": true, "plain": true}; !maps.Equal(got, want) {
		t.Errorf("the protocol's purge purged %v, want %v: it knows nothing of workflows", got, want)
	}
}

// fail_recorded appends the attempt's error to metadata's cairnq_errors,
// keeping the newest ten, and leaves metadata that is no JSON object (as
// another SDK may write) as it is.
func TestSQLiteFailRecordedKeepsAttemptErrors(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	big := `{"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, tc := range []struct{ id, metadata string }{{"obj", `{"tenant":"acme"}`}, {"arr", `[1,2]`}, {"big", big}} {
		call("insert_task", Args{
			"id": tc.id, "name": "n", "queue": "q", "payload": `{}`, "metadata": tc.metadata, "max_attempts": 20,
			"priority": 0, "run_at_ms": now, "parent_id": nil, "root_id": nil, "correlation_id": nil, "now_ms": now,
		})
		for i := range 12 {
			at := now + int64(i)*10
			call("claim", Args{"queues": One("q"), "names": nil, "now_ms": at, "worker_id": "w", "lease_until_ms": at + 1000, "limit": 1})
			call("fail_recorded", Args{"id": tc.id, "worker_id": "w", "now_ms": at + 1, "error": `{"message":"m"}`,
				"retryable": 1, "delay_ms": 0, "entry": fmt.Sprintf(`{"type":"E","code":"c","message":"try %d"}`, i+1)})
		}
	}
	md := func(id string) string {
		return fmt.Sprint(call("get", Args{"id": id})[0]["metadata"])
	}
	if got := md("arr"); got != "[1,2]" {
		t.Errorf("an array's metadata became %s", got)
	}
	if got := md("big"); got != big {
		t.Errorf("metadata past a mebibyte was rewritten: %d bytes, was %d", len(got), len(big))
	}
	var m struct {
		Tenant string
		Errors []struct {
			Attempt int
			AtMS    int64 `json:"at_ms"`
			Message string
		} `json:"cairnq_errors"`
	}
	if err := json.Unmarshal([]byte(md("obj")), &m); err != nil {
		t.Fatal(err)
	}
	if m.Tenant != "acme" || len(m.Errors) != 10 || m.Errors[0].Attempt != 3 || m.Errors[0].Message != "try 3" ||
		m.Errors[9].Attempt != 12 || m.Errors[9].AtMS != now+111 {
		t.Errorf("the metadata after 12 failures: %s", md("obj"))
	}
}
