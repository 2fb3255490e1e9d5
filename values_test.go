package cairnq

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// The values this package declares beside cairnqtype's, paired with
// cairnqtype's of the same name.
var valuePairs = map[reflect.Type]reflect.Type{
	reflect.TypeFor[Task]():             reflect.TypeFor[cairnqtype.Task](),
	reflect.TypeFor[TaskRef]():          reflect.TypeFor[cairnqtype.TaskRef](),
	reflect.TypeFor[Status]():           reflect.TypeFor[cairnqtype.Status](),
	reflect.TypeFor[ErrorEnvelope]():    reflect.TypeFor[cairnqtype.ErrorEnvelope](),
	reflect.TypeFor[StatusCounts]():     reflect.TypeFor[cairnqtype.StatusCounts](),
	reflect.TypeFor[SubmitOptions]():    reflect.TypeFor[cairnqtype.SubmitOptions](),
	reflect.TypeFor[ListOptions]():      reflect.TypeFor[cairnqtype.ListOptions](),
	reflect.TypeFor[PurgeOptions]():     reflect.TypeFor[cairnqtype.PurgeOptions](),
	reflect.TypeFor[Conflict]():         reflect.TypeFor[cairnqtype.Conflict](),
	reflect.TypeFor[SubmitItem]():       reflect.TypeFor[cairnqtype.SubmitItem](),
	reflect.TypeFor[Signal]():           reflect.TypeFor[cairnqtype.Signal](),
	reflect.TypeFor[SchemaStatus]():     reflect.TypeFor[cairnqtype.SchemaStatus](),
	reflect.TypeFor[SchemaState]():      reflect.TypeFor[cairnqtype.SchemaState](),
	reflect.TypeFor[AppliedMigration](): reflect.TypeFor[cairnqtype.AppliedMigration](),
	reflect.TypeFor[QueueAge]():         reflect.TypeFor[cairnqtype.QueueAge](),
	reflect.TypeFor[FailureCount]():     reflect.TypeFor[cairnqtype.FailureCount](),
	reflect.TypeFor[QueuePause]():       reflect.TypeFor[cairnqtype.QueuePause](),
	reflect.TypeFor[TaskFilter]():       reflect.TypeFor[cairnqtype.TaskFilter](),
	reflect.TypeFor[WorkerInfo]():       reflect.TypeFor[cairnqtype.WorkerInfo](),
	reflect.TypeFor[ScheduleInfo]():     reflect.TypeFor[cairnqtype.ScheduleInfo](),

	reflect.TypeFor[ArgumentError]():                reflect.TypeFor[cairnqtype.ArgumentError](),
	reflect.TypeFor[AlreadyExistsError]():           reflect.TypeFor[cairnqtype.AlreadyExistsError](),
	reflect.TypeFor[LostLeaseError]():               reflect.TypeFor[cairnqtype.LostLeaseError](),
	reflect.TypeFor[QueueFullError]():               reflect.TypeFor[cairnqtype.QueueFullError](),
	reflect.TypeFor[TaskFailedError]():              reflect.TypeFor[cairnqtype.TaskFailedError](),
	reflect.TypeFor[TaskCanceledError]():            reflect.TypeFor[cairnqtype.TaskCanceledError](),
	reflect.TypeFor[ProtocolVersionMismatchError](): reflect.TypeFor[cairnqtype.ProtocolVersionMismatchError](),
	reflect.TypeFor[SerializationError]():           reflect.TypeFor[cairnqtype.SerializationError](),
	reflect.TypeFor[BusyError]():                    reflect.TypeFor[cairnqtype.BusyError](),
	reflect.TypeFor[StorageError]():                 reflect.TypeFor[cairnqtype.StorageError](),
	reflect.TypeFor[OpenError]():                    reflect.TypeFor[cairnqtype.OpenError](),
	reflect.TypeFor[SubmitItemError]():              reflect.TypeFor[cairnqtype.SubmitItemError](),
}

// Each value has the fields (names, tags, types under either name) and
// the methods of cairnqtype's, so the two cannot drift apart.
func TestValuesMatchCairnqtype(t *testing.T) {
	for ours, theirs := range valuePairs {
		if ours.Name() != theirs.Name() {
			t.Errorf("%v is paired with %v", ours, theirs)
		}
		if !corresponds(ours, theirs) {
			t.Errorf("%v does not have %v's fields", ours, theirs)
		}
		for _, typ := range [][2]reflect.Type{{ours, theirs}, {reflect.PointerTo(ours), reflect.PointerTo(theirs)}} {
			for m := range typ[1].Methods() {
				if _, ok := typ[0].MethodByName(m.Name); !ok {
					t.Errorf("%v lacks %v's method %s", typ[0], typ[1], m.Name)
				}
			}
		}
	}
}

// corresponds reports whether a value of ours holds what one of theirs
// does, field by field.
func corresponds(ours, theirs reflect.Type) bool {
	if ours == theirs {
		return true
	}
	if valuePairs[ours] == theirs && ours.Kind() != reflect.Struct {
		return ours.Kind() == theirs.Kind()
	}
	if ours.Kind() != theirs.Kind() {
		return false
	}
	switch ours.Kind() {
	case reflect.Pointer, reflect.Slice:
		return corresponds(ours.Elem(), theirs.Elem())
	case reflect.Struct:
		if ours.NumField() != theirs.NumField() {
			return false
		}
		for i := range ours.NumField() {
			a, b := ours.Field(i), theirs.Field(i)
			if a.Name != b.Name || a.Tag != b.Tag || !corresponds(a.Type, b.Type) {
				return false
			}
		}
		return true
	}
	return false
}

// filled is a T whose every field holds a value that is not zero.
func filled[T any]() T {
	var v T
	fillValue(reflect.ValueOf(&v).Elem(), 1)
	return v
}

func fillValue(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprint("s", n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Float64:
		v.SetFloat(float64(n) / 2)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(v.Elem(), n)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(fmt.Sprint(n)))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillValue(v.Index(0), n)
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]any{"k": n}))
	case reflect.Interface:
		if v.Type() == reflect.TypeFor[error]() {
			v.Set(reflect.ValueOf(errors.New("cause")))
		} else {
			v.Set(reflect.ValueOf(n))
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.UnixMilli(int64(n) * 1000)))
			return
		}
		for i := range v.NumField() {
			fillValue(v.Field(i), n*100+i+1)
		}
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

// The conversions carry every field, both ways where both are made.
func TestConversionsCarryEveryField(t *testing.T) {
	row := filled[cairnqtype.Task]()
	if got := taskOf(&row).row(); !reflect.DeepEqual(*got, row) {
		t.Errorf("a task through taskOf and row:\n%+v\nwant\n%+v", *got, row)
	}
	if got := tasksOf([]*cairnqtype.Task{&row, nil}); len(got) != 2 || !reflect.DeepEqual(*got[0].row(), row) || got[1] != nil {
		t.Errorf("tasksOf: %+v", got)
	}
	task := filled[Task]()
	if got := taskOf(task.row()); !reflect.DeepEqual(*got, task) {
		t.Errorf("a task through row and taskOf:\n%+v\nwant\n%+v", *got, task)
	}
	for name, got := range map[string]any{
		"SubmitOptions": filled[SubmitOptions]().row(),
		"ListOptions":   filled[ListOptions]().row(),
		"PurgeOptions":  filled[PurgeOptions]().row(),
		"SchemaStatus":  *schemaStatusOf(new(filled[cairnqtype.SchemaStatus]())),
	} {
		v := reflect.ValueOf(got)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("%s: field %s was not carried", name, v.Type().Field(i).Name)
			}
		}
	}
}

// errors.As finds either name's error under the other's, through any
// wrapping, with the same fields; errors.Is still matches the sentinels.
func TestErrorsFillEitherName(t *testing.T) {
	theirs := &cairnqtype.ArgumentError{Op: "submit", Arg: "name", Reason: "empty"}
	var ae *ArgumentError
	if err := fmt.Errorf("wrapped: %w", theirs); !errors.As(err, &ae) || *ae != ArgumentError(*theirs) || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("cairnqtype's ArgumentError as ours: %v %+v", errors.As(err, &ae), ae)
	}
	ours := &LostLeaseError{ID: "task_1"}
	var le *cairnqtype.LostLeaseError
	if err := fmt.Errorf("wrapped: %w", ours); !errors.As(err, &le) || le.ID != "task_1" || !errors.Is(err, ErrLostLease) {
		t.Errorf("our LostLeaseError as cairnqtype's: %+v", le)
	}
	row := filled[cairnqtype.Task]()
	failed := &cairnqtype.TaskFailedError{ID: "task_2", Envelope: cairnqtype.ErrorEnvelope{Code: "boom"}, Task: &row}
	var fe *TaskFailedError
	if !errors.As(fmt.Errorf("w: %w", failed), &fe) || fe.Envelope.Code != "boom" || fe.Task.ID != row.ID || fe.Error() != failed.Error() {
		t.Errorf("cairnqtype's TaskFailedError as ours: %+v", fe)
	}
	var ce *TaskCanceledError
	if errors.As(fmt.Errorf("w: %w", failed), &ce) {
		t.Error("a TaskFailedError filled a *TaskCanceledError")
	}
	for ours := range valuePairs {
		if !strings.HasSuffix(ours.Name(), "Error") {
			continue
		}
		// Each of ours, as cairnqtype's, and back: a zero value carries
		// its type across (the fields are checked above).
		e := reflect.New(ours).Interface().(error)
		target := reflect.New(reflect.PointerTo(valuePairs[ours]))
		if !errors.As(e, target.Interface()) {
			t.Errorf("errors.As does not fill a %v from a %v", target.Elem().Type(), ours)
			continue
		}
		back := reflect.New(reflect.PointerTo(ours))
		if !errors.As(target.Elem().Interface().(error), back.Interface()) {
			t.Errorf("errors.As does not fill a %v from a %v", back.Elem().Type(), target.Elem().Type())
		}
	}
}

// No exported name of this package is an alias: go doc shows each
// value's fields and methods where a user looks for them.
func TestRootDeclaresNoAliases(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range pkgs["cairnq"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Assign.IsValid() && ts.Name.IsExported() {
				t.Errorf("%s: type %s is an alias", fset.Position(ts.Pos()), ts.Name.Name)
			}
			return true
		})
	}
}

// What a call returns has this package's type at its top, for %T and a
// type switch, whichever floor made it.
func TestCallsReturnThisPackagesErrors(t *testing.T) {
	c, err := Open(t.Context(), t.TempDir()+"/tasks.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Submit(t.Context(), "", nil, nil)
	if _, ok := err.(*ArgumentError); !ok {
		t.Errorf("Submit with no name: %T %v, want *ArgumentError", err, err)
	}
	_, err = c.SubmitMany(t.Context(), []SubmitItem{{Name: "ok"}, {Name: "bad", Payload: func() {}}})
	if ie, ok := err.(*SubmitItemError); !ok {
		t.Errorf("SubmitMany with a bad item: %T %v, want *SubmitItemError", err, err)
	} else if _, ok := ie.Err.(*SerializationError); !ok {
		t.Errorf("SubmitMany's item error wraps a %T, want *SerializationError", ie.Err)
	}
	if _, err := c.Submit(t.Context(), "x", nil, &SubmitOptions{Key: "k", Conflict: ConflictReject}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(t.Context(), "x", nil, &SubmitOptions{Key: "k", Conflict: ConflictReject})
	if e, ok := err.(*AlreadyExistsError); !ok || e.Key != "k" {
		t.Errorf("a taken key: %T %v, want *AlreadyExistsError", err, err)
	}
	if _, err := Open(t.Context(), t.TempDir(), nil); err == nil || strings.Contains(fmt.Sprintf("%T", err), "cairnqtype") {
		t.Errorf("Open on a directory: %T %v, want an error of this package", err, err)
	}
}
