package cairnqtype

// TaskFilter picks the tasks of a bulk action: each field set must match,
// and at least one must be set.
type TaskFilter struct {
	Status Status
	Queue  string
	Name   string
}
