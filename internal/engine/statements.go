package engine

// The statements the store runs, by name: each names one file embedded in
// package protocol, sql/<dialect>/<name>.sql. They are this repository's
// own vocabulary, so they live here rather than in protocol's API.
const (
	stmtCancel         = "cancel"
	stmtClaim          = "claim"
	stmtClaimableProbe = "claimable_probe"
	// The claim and its probe from a known front (claim_front.go):
	// Postgres only, ours, beside the protocol's.
	stmtClaimWindow          = "claim_window"
	stmtClaimableProbeWindow = "claimable_probe_window"
	stmtClockMS              = "clock_ms"  // Postgres only; ours: the clock for rows written by COPY
	stmtTaskJSON             = "task_json" // Postgres only; ours: the JSON of rows written by COPY
	stmtComplete             = "complete"
	stmtCompleteMany         = "complete_many"  // ours, beside the protocol's
	stmtCompleteSteps        = "complete_steps" // Postgres only; ours: complete_many and the steps' succeeded keys
	stmtFail                 = "fail"
	stmtFailRecorded         = "fail_recorded" // ours: fail, and the attempt's error kept in metadata
	stmtGet                  = "get"
	stmtGetByKey             = "get_by_key"
	stmtGetByKeys            = "get_by_keys" // Postgres only; ours, beside the protocol's
	stmtGetKey               = "get_key"
	stmtGetStatus            = "get_status"
	stmtGetStatusByKey       = "get_status_by_key"
	stmtGetStatusMany        = "get_status_many" // ours, beside the protocol's
	stmtHeartbeat            = "heartbeat"
	stmtHeartbeatBatch       = "heartbeat_batch"
	stmtInsertMany           = "insert_many" // ours, beside the protocol's; SQLite's takes rows as JSON
	stmtInsertTask           = "insert_task"
	stmtInstallations        = "installations" // Postgres only
	stmtList                 = "list"
	stmtLockKey              = "lock_key"
	stmtLockKeys             = "lock_keys" // Postgres only; ours, beside the protocol's
	stmtProgress             = "progress"
	stmtProtocolVersion      = "protocol_version"
	stmtPurge                = "purge"
	stmtPurgeFrom            = "purge_from" // ours: keeps live workflows' tasks; Postgres: from a floor
	stmtQueueDepth           = "queue_depth"
	stmtRecoverLeases        = "recover_leases"
	stmtRetry                = "retry"
	stmtStats                = "stats"
	stmtSucceed              = "succeed"
	stmtUpsertKey            = "upsert_key"
	stmtUpsertKeys           = "upsert_keys" // ours, beside the protocol's; SQLite's takes pairs as JSON

	// Reads for operators (cairnq doctor), ours, beside the protocol's.
	stmtExpiredLeases  = "expired_leases"
	stmtQueueAges      = "queue_ages"
	stmtRecentFailures = "recent_failures"

	// A queue paused for every Go worker (pause.go), ours, beside the
	// protocol's: rows of cairnq_meta.
	stmtQueuePause     = "queue_pause"
	stmtMetaRows       = "meta_rows"
	stmtQueueResume    = "queue_resume"
	stmtDeleteTask     = "delete_task"     // ours: one task no worker holds
	stmtCancelMatching = "cancel_matching" // ours: a bulk cancel's, of one task

	// A row of cairnq_meta of ours written and deleted: a Go worker's
	// beat (worker_beat.go), a periodic schedule's (schedule_row.go).
	stmtMetaPut    = "meta_put"
	stmtMetaDelete = "meta_delete"

	// stmtSnooze hands a running task back to the queue with its attempt
	// given back (both dialects), ours, beside the protocol's.
	stmtSnooze = "snooze"

	// A workflow's (workflow.go), ours, beside the protocol's: claim its
	// record by id, read its steps narrowly, write its definition back,
	// find the records due for a sweep.
	stmtClaimIDs       = "claim_ids"
	stmtWorkflowSteps  = "workflow_steps"
	stmtWorkflowRevise = "workflow_revise"
	stmtWorkflowDue    = "workflow_due"
	// An advance from one settled step (workflow_step_advance.go): the
	// tasks some keys point at, without their payloads.
	stmtWorkflowLook = "workflow_look"
	// Move the record's own key with every write of its definition.
	stmtWorkflowTouch = "workflow_touch"
	// Delete the ledger keys of steps a resume runs again.
	stmtWorkflowForget = "workflow_forget"
	// Claim and complete a record whose every step succeeded, at once.
	stmtWorkflowFinish = "workflow_finish"
	// The records of workflows a process reads before caching them.
	stmtWorkflowHeads = "workflow_heads"

	// The sweep's looks over the ended workflows (workflow_ended.go),
	// ours, beside the protocol's: the records that ended since a floor,
	// every record that ended failed (or canceled), each with whether a
	// step moved since.
	stmtWorkflowEnded   = "workflow_ended"
	stmtWorkflowEndedBy = "workflow_ended_by_status"

	// A global limit's (claim_limit.go), ours, beside the protocol's:
	// count a name's running tasks per tenant, pick the candidates of the
	// tenants with room.
	stmtLimitRunning = "limit_running"
	stmtLimitPick    = "limit_pick"

	// A durable handler's (durable.go), ours, beside the protocol's:
	// append a finished step to the task's cairnq_durable member.
	stmtDurableStep = "durable_step"
	// Postgres: the steps of many tasks in one statement (newStepper).
	stmtDurableStepMany = "durable_step_many"
	// Deliver an event into the member, waking a task that waits for it.
	stmtDurableEvent = "durable_event"
)
