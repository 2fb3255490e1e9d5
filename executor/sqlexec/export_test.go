package sqlexec

// Prepared is how many statements e keeps prepared.
func Prepared(e *Executor) int {
	if e.stmts == nil {
		return 0
	}
	e.stmts.mu.Lock()
	defer e.stmts.mu.Unlock()
	return len(e.stmts.stmts)
}

// MaxPrepared is maxPrepared.
const MaxPrepared = maxPrepared
