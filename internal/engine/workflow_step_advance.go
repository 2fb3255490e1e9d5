package engine

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// A step's success changes only what waits for it. advanceFromStep
// advances a workflow from one succeeded step in O(its dependents) reads
// instead of advanceIn's O(steps): it looks up, by their keys, the
// record and the steps its dependents wait for (workflow_look), inserts
// each dependent now ready, and writes nothing to the record, whose
// payload (the whole definition) a wide workflow must not rewrite per
// step. What it cannot decide that way, it hands to advanceIn: the
// workflow's end, a record canceled, ended or changed, a step it does
// not know, a failure the ledger does not hold.
//
// The definition comes from this process's flowCache, read again when
// the record's own key (workflowspec.WorkflowKey) moved: every rewrite
// of the definition (revise) moves it past its last value
// (workflow_touch), and nothing else does, so a sweep's claim and snooze
// of the record do not cost a reread. Beside the definition the cache
// keeps what this process read of its steps while the definition stays:
// a step that succeeded stays succeeded (a retry moves only a failed or
// canceled task; a resume that runs a lost step again rewrites the
// definition, and a new entry starts from nothing), so each dependent's
// walk over the steps it waits for resumes where it stopped, and a
// 10,000-step fan-in costs O(1) reads per settled step amortized. The
// steps read as ended (the walk that finds the workflow's end) can
// change back (another SDK's retry), which only the end's full advance
// can see; that advance checks every row before it settles the record.
// A walk that reads a step failed or canceled without the ledger saying
// so leaves the workflow to advanceIn.
//
// What an advance read is kept only once its transaction has committed
// (Advanced.learn, run by afterAdvance): the step's own success, and on
// SQLite those of the writes sharing its transaction, are not committed
// when it reads them, and a transaction rolled back must not leave the
// cache believing them.

// lookBatch is the fewest keys one walk asks for in its first look (a
// group's walks ask for twice as many as it settles steps of their
// workflow); each look after doubles it. A lone advance's walk usually
// stops at its first or second key: the steps before were read in
// earlier advances.
const lookBatch = 2

// lookBatchMax bounds a walk's first look however many steps its group
// settles.
const lookBatchMax = 256

// flowCacheSteps bounds the steps the cache holds, over all workflows.
const flowCacheSteps = 100_000

// flowCache is what this process knows of the workflows it advances, by
// record id.
type flowCache struct {
	mu      sync.Mutex
	entries map[string]*flowEntry
	steps   int
	clock   uint64 // stamps each entry's last use, for eviction
}

// flowEntry is one workflow as this process last read it. Its
// definition, index, dependents and doomed steps never change; mu
// guards what the advances learn (known, ids, ended, advanced) and
// swept, which a commit's learn or a sweep writes while another
// transaction's advance may read it.
type flowEntry struct {
	mu        sync.Mutex
	used      uint64 // flowCache.clock at its last use, under the cache's lock
	record    string
	updatedAt int64 // the record's key's updated_at_ms when def was read
	def       *workflowspec.Definition
	index     map[string]int // step name -> position in def.Steps
	deps      [][]int        // each step's dependents, by position
	// known[i] counts the first steps of def.Steps[i].After read
	// succeeded; ids holds their task ids, by step name.
	known []int
	ids   map[string]string
	// ended counts the first steps of def.Steps read ended (or doomed:
	// after a step the ledger says failed, never to be inserted).
	ended  int
	doomed []bool
	// advanced is when an advance from a step of this workflow last
	// committed in this process, swept when this process's sweep last
	// read it whole (zero: not since the definition was read): sweepOne
	// skips the reads of a workflow this process is advancing.
	advanced, swept time.Time
}

// get returns the entry of record, nil when there is none.
func (c *flowCache) get(record string) *flowEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[record]
	if e != nil {
		c.clock++
		e.used = c.clock
	}
	return e
}

// put keeps e, replacing record's entry, and drops the entries used
// longest ago while the cache holds more than flowCacheSteps steps.
func (c *flowCache) put(e *flowEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*flowEntry{}
	}
	if old := c.entries[e.record]; old != nil {
		c.steps -= len(old.def.Steps)
	}
	c.clock++
	e.used = c.clock
	c.entries[e.record] = e
	c.steps += len(e.def.Steps)
	for c.steps > flowCacheSteps && len(c.entries) > 1 {
		var oldest *flowEntry
		for _, x := range c.entries {
			if x != e && (oldest == nil || x.used < oldest.used) {
				oldest = x
			}
		}
		delete(c.entries, oldest.record)
		c.steps -= len(oldest.def.Steps)
	}
}

// peek returns the entry of record, nil when there is none, leaving its
// last use as it was: a sweep's look at it does not keep it cached.
func (c *flowCache) peek(record string) *flowEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[record]
}

// drop forgets record's entry.
func (c *flowCache) drop(record string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[record]; old != nil {
		c.steps -= len(old.def.Steps)
		delete(c.entries, record)
	}
}

// newFlowEntry indexes def, read from record when its key was last
// moved at updatedAt. Nothing the walks learned of an earlier definition
// is kept: what moved the key may be a resume that runs a step again
// (RetryWorkflow runs a lost step anew, and the steps after it wait for
// the new run).
func newFlowEntry(record string, updatedAt int64, def *workflowspec.Definition) *flowEntry {
	n := len(def.Steps)
	e := &flowEntry{record: record, updatedAt: updatedAt, def: def,
		index: make(map[string]int, n), deps: make([][]int, n), known: make([]int, n),
		ids: map[string]string{}, doomed: make([]bool, n)}
	for i, st := range def.Steps {
		e.index[st.Step] = i
	}
	for i, st := range def.Steps {
		for _, a := range st.After {
			j := e.index[a]
			e.deps[j] = append(e.deps[j], i)
		}
	}
	for name, st := range def.Seen {
		if st == workflowspec.Failed || st == workflowspec.Canceled {
			e.doom(e.index[name])
		}
	}
	return e
}

// doom marks every step after step i's, which will never be inserted
// unless i is retried (which rereads the definition, as it writes it).
func (e *flowEntry) doom(i int) {
	for _, d := range e.deps[i] {
		if !e.doomed[d] {
			e.doomed[d] = true
			e.doom(d)
		}
	}
}

// loadFlow reads record's definition into a new entry, nil when the
// record is gone or is not a definition this SDK reads (advanceIn says
// why).
func (s *Store) loadFlow(ctx context.Context, q querier, record string) (*flowEntry, error) {
	es, err := s.loadFlows(ctx, q, []string{record})
	return es[record], err
}

// loadFlows reads the definitions of records into new entries, cached,
// in one workflow_heads; a record gone, or whose definition this SDK
// does not read, has none.
func (s *Store) loadFlows(ctx context.Context, q querier, records []string) (map[string]*flowEntry, error) {
	heads, err := s.heads(ctx, q, records)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*flowEntry, len(heads))
	for id, h := range heads {
		def, err := workflowspec.Parse(h.rec.Payload)
		if err != nil {
			continue
		}
		e := newFlowEntry(id, h.keyUpdatedAt, def)
		s.flows.put(e)
		out[id] = e
	}
	return out, nil
}

// head is a workflow's record as workflow_heads reads it, with when its
// own key last moved (the generation of its definition).
type head struct {
	rec          *cairnqtype.Task
	keyUpdatedAt int64
}

// heads reads the records of records through their own keys, by id; a
// record gone (or a key pointing elsewhere) is left out.
func (s *Store) heads(ctx context.Context, q querier, records []string) (map[string]head, error) {
	keys := make([]string, len(records))
	for i, r := range records {
		keys[i] = workflowspec.WorkflowKey(r)
	}
	rows, err := s.exec(ctx, q, stmtWorkflowHeads, protocol.Args{"keys": s.list(keys)})
	if err != nil {
		return nil, err
	}
	asked := make(map[string]bool, len(records))
	for _, r := range records {
		asked[r] = true
	}
	out := make(map[string]head, len(rows))
	for _, r := range rows {
		rec, err := rowToTask(r)
		if err != nil {
			return nil, err
		}
		at, _, err := asInt64("key_updated_at_ms", r["key_updated_at_ms"])
		if err != nil {
			return nil, err
		}
		if asked[rec.ID] {
			out[rec.ID] = head{rec: rec, keyUpdatedAt: at}
		}
	}
	return out, nil
}

// stepLook is what workflow_look read of one key: when it last moved,
// and the id and status of the task it points at.
type stepLook struct {
	keyUpdatedAt int64
	id           string
	status       cairnqtype.Status
}

// look runs workflow_look for keys, each asked once: the walks of a
// group's steps often ask for the same keys, and the statement answers
// every key it is given.
func (s *Store) look(ctx context.Context, q querier, keys []string, into map[string]stepLook) error {
	keys = slices.Compact(slices.Sorted(slices.Values(keys))) // a copy: callers index theirs
	rows, err := s.exec(ctx, q, stmtWorkflowLook, protocol.Args{"keys": s.list(keys)})
	if err != nil {
		return err
	}
	for _, r := range rows {
		var l stepLook
		key, _, err := asString("task_key", r["task_key"])
		if err != nil {
			return err
		}
		if l.id, _, err = asString("id", r["id"]); err != nil {
			return err
		}
		st, _, err := asString("status", r["status"])
		if err != nil {
			return err
		}
		l.status = cairnqtype.Status(st)
		if l.keyUpdatedAt, _, err = asInt64("key_updated_at_ms", r["key_updated_at_ms"]); err != nil {
			return err
		}
		into[key] = l
	}
	// A key asked for and not answered has no task: so recorded, so that
	// the walks do not ask again.
	for _, k := range keys {
		if _, ok := into[k]; !ok {
			into[k] = stepLook{}
		}
	}
	return nil
}

// stepAdvance is one settled step's advance from its dependents, in a
// group of them (advanceFromSteps).
type stepAdvance struct {
	mark     StepMark
	workerID string
	e        *flowEntry
	w        *walks
	// full says advanceIn decides: the record changed or ended, a step
	// this process does not know, the workflow's end.
	full bool
	// marked says the step's succeeded key is written already (by its
	// completion's statement, complete_steps).
	marked bool
	adv    Advanced
}

// advanceFromStep advances mark's workflow after its step succeeded (and
// added nothing), in q's transaction under the workflow's lock, as
// workerID: from the step's dependents when it can, else by advanceIn.
func (s *Store) advanceFromStep(ctx context.Context, q querier, op string, mark StepMark, workerID string) (Advanced, error) {
	a := &stepAdvance{mark: mark, workerID: workerID}
	err := s.advanceFromSteps(ctx, q, op, []*stepAdvance{a})
	return a.adv, err
}

// advanceFromSteps advances the workflows of steps that succeeded (and
// added nothing), in q's transaction under every one's lock: each step
// from its dependents, all of them together in as few statements as
// their reads allow (a look per round of the walks, one write of every
// step now ready), and then each workflow that advanceIn must decide, in
// advanceIn. Each one's Advanced goes into its adv; a workflow's
// inserted steps and its end are told by the first of its steps.
func (s *Store) advanceFromSteps(ctx context.Context, q querier, op string, as []*stepAdvance) error {
	if err := s.flowEntries(ctx, q, as); err != nil {
		return err
	}
	for _, a := range as {
		// Walks from the cached definition start in the first look,
		// beside the records' keys that tell whether it is current.
		if a.full {
			continue
		}
		if self, ok := a.e.index[a.mark.Step]; ok {
			a.w = newWalks(a.e, self)
		}
	}
	// A walk's first look asks twice as many keys as the group settles
	// steps of its workflow (up to lookBatchMax): a wide fan-in's walk
	// moves about that far each group, and stops in the first look if it
	// asks past that. Each look after asks twice as many.
	settles := map[*flowEntry]int{}
	for _, a := range as {
		if !a.full {
			settles[a.e]++
		}
	}
	looks := map[string]stepLook{}
	checked := map[*flowEntry]bool{}
	for round := 0; ; round++ {
		var keys []string
		heads := map[*flowEntry]bool{}
		asked := map[stepAt]bool{} // by the walks before, in this round
		for _, a := range as {
			if a.full {
				continue
			}
			if !checked[a.e] && !heads[a.e] {
				heads[a.e] = true
				keys = append(keys, workflowspec.WorkflowKey(a.e.record))
			}
			if a.w != nil && a.w.pending() {
				batch := min(max(lookBatch, 2*settles[a.e]), lookBatchMax) << round
				keys = append(keys, a.w.next(looks, batch, asked)...)
			}
			if a.w != nil && !a.w.depsAsked {
				// The keys writeSteps would look up for the dependents
				// the walks find ready, asked for now.
				a.w.depsAsked = true
				for _, d := range a.w.deps {
					name := a.e.def.Steps[d].Step
					keys = append(keys, workflowspec.StepKey(a.e.record, name), workflowspec.LedgerKey(a.e.record, name))
				}
			}
		}
		if len(keys) == 0 {
			break
		}
		if err := s.look(ctx, q, keys, looks); err != nil {
			return err
		}
		if err := s.checkHeads(ctx, q, as, looks, checked); err != nil {
			return err
		}
		for _, a := range as {
			if !a.full && a.w != nil {
				a.w.advance(looks)
			}
		}
	}
	return s.finishStepAdvances(ctx, q, op, as, looks)
}

// flowEntries finds each step's entry, reading the workflows the cache
// lacks together.
func (s *Store) flowEntries(ctx context.Context, q querier, as []*stepAdvance) error {
	byRecord := map[string]*flowEntry{}
	var missing []string
	for _, a := range as {
		if _, ok := byRecord[a.mark.Record]; ok {
			continue
		}
		e := s.flows.get(a.mark.Record)
		if e == nil {
			missing = append(missing, a.mark.Record)
		}
		byRecord[a.mark.Record] = e
	}
	if len(missing) > 0 {
		loaded, err := s.loadFlows(ctx, q, missing)
		if err != nil {
			return err
		}
		for _, r := range missing {
			byRecord[r] = loaded[r]
		}
	}
	for _, a := range as {
		e := byRecord[a.mark.Record]
		a.e, a.full = e, e == nil
	}
	return nil
}

// checkHeads checks, once each, the records looks now answers for: one
// whose definition changed since its entry was read is read again (its
// steps' walks start over), one not queued is left to advanceIn. Then
// each step not yet walking starts its walks.
func (s *Store) checkHeads(ctx context.Context, q querier, as []*stepAdvance, looks map[string]stepLook, checked map[*flowEntry]bool) error {
	for _, a := range as {
		if a.full || checked[a.e] {
			continue
		}
		// A record in flight is queued; canceled, it is canceled at once
		// (cancel.sql), so its status is all there is to read.
		switch h := looks[workflowspec.WorkflowKey(a.e.record)]; {
		case h.status != cairnqtype.StatusQueued:
			s.leaveToFull(as, a.e)
		case h.keyUpdatedAt == a.e.updatedAt && a.e.def.Ended != "":
			// Ended, and queued again: retried by someone, to resume
			// (advanceIn), before any step goes on.
			s.leaveToFull(as, a.e)
		case h.keyUpdatedAt != a.e.updatedAt:
			old := a.e
			e, err := s.loadFlow(ctx, q, old.record)
			if err != nil {
				return err
			}
			if e == nil {
				s.leaveToFull(as, old)
				continue
			}
			for _, b := range as {
				if b.e == old {
					b.e, b.w = e, nil
				}
			}
			checked[e] = true
		default:
			checked[a.e] = true
		}
	}
	for _, a := range as {
		if a.full || a.w != nil || !checked[a.e] {
			continue
		}
		self, ok := a.e.index[a.mark.Step]
		if !ok {
			a.full = true
			continue
		}
		a.w = newWalks(a.e, self)
	}
	return nil
}

// leaveToFull leaves every step of e's workflow to advanceIn.
func (s *Store) leaveToFull(as []*stepAdvance, e *flowEntry) {
	for _, a := range as {
		if a.e == e {
			a.full = true
		}
	}
}

// finishStepAdvances writes what the walks found: each workflow's steps
// now ready, inserted together with every other workflow's in one
// writeSteps; the succeeded keys of the steps nothing waits for; then
// the full advance, once each, of the workflows left to it
// (advanceFulls).
func (s *Store) finishStepAdvances(ctx context.Context, q querier, op string, as []*stepAdvance, looks map[string]stepLook) error {
	type flow struct {
		first       *stepAdvance
		ready       []string
		end, failed bool
	}
	flows := map[*flowEntry]*flow{}
	var order []*flowEntry
	var fulls []*stepAdvance // the first step of each workflow left to advanceIn
	left := map[string]bool{}
	leaveFull := func(a *stepAdvance) {
		if !left[a.mark.Record] {
			left[a.mark.Record] = true
			fulls = append(fulls, a)
		}
	}
	var succeeded, succeededOf []string
	for _, a := range as {
		if a.full {
			leaveFull(a)
			continue
		}
		f := flows[a.e]
		if f == nil {
			f = &flow{first: a}
			flows[a.e] = f
			order = append(order, a.e)
		}
		a.w.at, a.adv.learn = s.now(), a.w.learn
		// Its succeeded key: should its task be purged before its
		// dependents are all inserted, a full advance still knows it
		// succeeded (seenByLedger).
		if !a.marked {
			succeeded = append(succeeded, workflowspec.SucceededKey(a.e.record, a.mark.Step))
			succeededOf = append(succeededOf, a.e.record)
		}
		if a.w.failed {
			f.failed = true
			continue
		}
		for i, d := range a.w.deps {
			if name := a.e.def.Steps[d].Step; a.w.pos[i] == len(a.e.def.Steps[d].After) && !slices.Contains(f.ready, name) {
				f.ready = append(f.ready, name)
			}
		}
		f.end = f.end || a.w.ended == len(a.e.def.Steps)
	}
	inserts := &stepInserts{fresh: true}
	for _, e := range order {
		f := flows[e]
		if f.failed || (len(f.ready) == 0 && f.end) {
			leaveFull(f.first) // a failure no full advance saw, or the end
			continue
		}
		if len(f.ready) == 0 {
			continue
		}
		built, err := buildSteps(op, e.record, e.def, f.ready, e.idsOf(f.ready, as), s.now())
		if err != nil {
			leaveFull(f.first) // unreadable: advanceIn leaves it, and says why
			continue
		}
		for i, row := range built.rows {
			inserts.add(row, built.keys[i], built.ledgers[i], built.records[i])
		}
		f.first.adv.Inserted, f.first.adv.Progress = len(f.ready), true
	}
	queues, err := s.writeSteps(ctx, q, inserts, succeeded, succeededOf, looks)
	if err != nil {
		return err
	}
	if err := s.advanceFulls(ctx, q, op, as, fulls); err != nil {
		return err
	}
	as[0].adv.Queues = append(as[0].adv.Queues, queues...)
	return nil
}

// advanceFulls runs the full advance of each workflow of fulls (the
// first of its steps among as), the workflows read together and their
// ends written together, each one's Advanced into its step's adv. A
// workflow the walks found ended that was not (a step retried since
// this process read it ended) has its walks to the end start over.
func (s *Store) advanceFulls(ctx context.Context, q querier, op string, as, fulls []*stepAdvance) error {
	if len(fulls) == 0 {
		return nil
	}
	records := make([]string, len(fulls))
	for i, a := range fulls {
		records[i] = a.mark.Record
	}
	reads, err := s.readWorkflows(ctx, q, records)
	if err != nil {
		return err
	}
	end := &endings{}
	for _, a := range fulls {
		adv, err := s.advanceReadIn(ctx, q, op, reads[a.mark.Record], a.workerID, nil, end)
		if err != nil {
			return err
		}
		adv.learn = a.adv.learn
		a.adv = adv
	}
	// The ends the advances found, written together.
	finished, err := s.writeEndings(ctx, q, end)
	if err != nil {
		return err
	}
	for _, a := range fulls {
		if t := finished[a.mark.Record]; t != nil {
			a.adv.Record = t
		}
		if a.adv.Record == nil && a.e != nil {
			for _, b := range as {
				if b.e == a.e && b.w != nil {
					b.w.restart = true
				}
			}
		}
	}
	return nil
}

// idsOf is the task ids of the steps names wait for, as the walks of as
// read them or the entry knew them.
func (e *flowEntry) idsOf(names []string, as []*stepAdvance) map[string]string {
	ids := map[string]string{}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range names {
		for _, a := range e.def.Steps[e.index[name]].After {
			ids[a] = e.ids[a]
		}
	}
	for _, b := range as {
		if b.e == e && b.w != nil {
			for name, id := range b.w.ids {
				if _, want := ids[name]; want {
					ids[name] = id
				}
			}
		}
	}
	return ids
}

// walks are one advance's reads. For each dependent of the settled
// step, pos is how far the steps it waits for read succeeded, and done
// says its walk stopped (at a step not succeeded, or at the end); ended
// is how far the workflow's steps read ended. ids are the task ids of
// the steps read succeeded. restart says the walk to the end must start
// over: the end it found was not one.
type walks struct {
	e         *flowEntry
	deps      []int
	pos       []int
	done      []bool
	ended     int
	endedDone bool
	ids       map[string]string
	restart   bool
	at        time.Time // when the advance ran (flowEntry.advanced)
	// depsAsked says the dependents' own keys and ledger keys went into
	// a look already (writeSteps then need not look them up).
	depsAsked bool
	// failed says a walk read a step failed or canceled that the
	// definition's ledger does not say ended so: a cancel, a lease
	// recovery or another SDK's failure no full advance has seen, which
	// under CancelRest stops the workflow; advanceIn decides.
	failed bool
}

func newWalks(e *flowEntry, self int) *walks {
	deps := e.deps[self]
	w := &walks{e: e, deps: deps, pos: make([]int, len(deps)), done: make([]bool, len(deps)), ids: map[string]string{}}
	e.mu.Lock()
	defer e.mu.Unlock()
	w.ended = e.ended
	for i, d := range deps {
		w.pos[i] = e.known[d]
	}
	return w
}

// learn keeps what the walks read in the cache, once their transaction
// has committed.
func (w *walks) learn() {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if w.at.After(w.e.advanced) {
		w.e.advanced = w.at
	}
	for i, d := range w.deps {
		w.e.known[d] = max(w.e.known[d], w.pos[i])
	}
	maps.Copy(w.e.ids, w.ids)
	if w.restart {
		w.e.ended = 0
	} else {
		w.e.ended = max(w.e.ended, w.ended)
	}
}

// key is the key of the step at position i.
func (w *walks) key(i int) string { return workflowspec.StepKey(w.e.record, w.e.def.Steps[i].Step) }

// stepAt is a workflow's step by its position in the definition.
type stepAt struct {
	e *flowEntry
	i int
}

// next lists the keys of up to batch steps per walk not looked up yet,
// from where each walk stands. A step another walk asked for in this
// round (asked) counts toward the batch without being listed again: the
// walks of a group's steps of one workflow walk the same steps.
func (w *walks) next(looks map[string]stepLook, batch int, asked map[stepAt]bool) []string {
	var keys []string
	ask := func(i int) bool { // whether step i is being looked up
		if asked[stepAt{w.e, i}] {
			return true
		}
		k := w.key(i)
		if has(looks, k) {
			return false
		}
		asked[stepAt{w.e, i}] = true
		keys = append(keys, k)
		return true
	}
	for i, d := range w.deps {
		after := w.e.def.Steps[d].After
		for j, n := w.pos[i], 0; !w.done[i] && j < len(after) && n < batch; j++ {
			if ask(w.e.index[after[j]]) {
				n++
			}
		}
	}
	for j, n := w.ended, 0; !w.endedDone && j < len(w.e.def.Steps) && n < batch; j++ {
		if !w.e.doomed[j] && ask(j) {
			n++
		}
	}
	return keys
}

func has(looks map[string]stepLook, k string) bool { _, ok := looks[k]; return ok }

// advance moves every walk as far as looks answer.
func (w *walks) advance(looks map[string]stepLook) {
	for i, d := range w.deps {
		after := w.e.def.Steps[d].After
		for !w.done[i] && w.pos[i] < len(after) {
			l, ok := looks[w.key(w.e.index[after[w.pos[i]]])]
			if !ok {
				break
			}
			if l.status != cairnqtype.StatusSucceeded {
				w.done[i] = true
				w.failed = w.failed || w.endedBadly(after[w.pos[i]], l.status)
				break
			}
			w.ids[after[w.pos[i]]] = l.id
			w.pos[i]++
		}
		w.done[i] = w.done[i] || w.pos[i] == len(after)
	}
	for !w.endedDone && w.ended < len(w.e.def.Steps) {
		if !w.e.doomed[w.ended] {
			l, ok := looks[w.key(w.ended)]
			if !ok {
				break
			}
			if !l.status.IsTerminal() {
				w.endedDone = true
				break
			}
			w.failed = w.failed || w.endedBadly(w.e.def.Steps[w.ended].Step, l.status)
		}
		w.ended++
	}
	w.endedDone = w.endedDone || w.ended == len(w.e.def.Steps)
}

// endedBadly reports whether the step named step, read in status, failed
// or was canceled without the ledger saying so.
func (w *walks) endedBadly(step string, status cairnqtype.Status) bool {
	if status != cairnqtype.StatusFailed && status != cairnqtype.StatusCanceled {
		return false
	}
	seen := w.e.def.Seen[step]
	return seen != workflowspec.Failed && seen != workflowspec.Canceled
}

// pending reports whether a walk needs another look.
func (w *walks) pending() bool {
	return !w.failed && (!w.endedDone || slices.Contains(w.done, false))
}
