package examples_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

// examples lists every example with a line its successful run prints,
// and whether it runs on a SQLite file when DATABASE_URL is unset.
var examples = []struct {
	name   string
	want   []string
	sqlite bool
}{
	{"gorm-app", []string{
		"then crashed before commit: 0 pages committed",
		`task succeeded after 2 attempt(s) (result {"pages": 3}), 3 page(s) committed`,
		"task failed after 2 attempt(s) (error: simulated crash before commit), 0 page(s) committed",
		"gorm-app: ok",
	}, false},
	{"bun-app", []string{
		"then crashed before commit: 0 pages committed",
		`task succeeded after 2 attempt(s) (result {"pages": 3}), 3 page(s) committed`,
		"task failed after 2 attempt(s) (error: simulated crash before commit), 0 page(s) committed",
		"bun-app: ok",
	}, false},
	{"custom-adapter", []string{"custom-adapter: ok"}, false},
	{"cross-language", []string{"cross-language: ok"}, false},
	{"etl-workflow", []string{"report: loaded 5250 rows from 4 partitions", "etl-workflow: ok"}, true},
	{"saga", []string{"booking failed: workflow failed: step charge did not succeed",
		"released [hotel-002 flight-001]; nothing held", "saga: ok"}, true},
	{"autoscale", []string{"scaled up to 4 workers at a depth of 200",
		"scaled down to 0 workers: the queue is empty", "autoscale: ok"}, true},
	{"payment-saga", []string{"both orders charged on a worker of one slot",
		`order-1: succeeded "shipped order-1-1, charged order-1-1, approved by ops" (attempt 1)`,
		`order-2: succeeded "refunded order-2-1 as order-2-1" (attempt 1)`,
		`order-3 (a workflow's step): "mailed a receipt: shipped order-3-1, charged order-3-1, approved by finance"`,
		"payment-saga: ok"}, true},
}

// moduleRoot is the directory of the examples module's go.mod, where `go
// run ./<name>` is run from (from the repository's root, go.work makes that
// `go run ./examples/<name>`).
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod)
}

// goRun runs `go run ./<name>` from the module root with the
// environment env (DATABASE_URL replaced or removed) and returns its
// combined output and error.
func goRun(t *testing.T, root, name string, dsn string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+name)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if dsn != "" {
		cmd.Env = append(cmd.Env, "DATABASE_URL="+dsn)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Every example runs its whole story against a fresh database and exits 0.
func TestExamplesRun(t *testing.T) {
	root := moduleRoot(t)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgserver.DSN(t)
			start := time.Now()
			out, err := goRun(t, root, ex.name, dsn)
			t.Logf("go run ./%s (%v):\n%s", ex.name, time.Since(start).Round(time.Millisecond), out)
			if err != nil {
				t.Fatalf("go run ./%s: %v", ex.name, err)
			}
			for _, w := range ex.want {
				if !strings.Contains(out, w) {
					t.Errorf("output of %s lacks %q", ex.name, w)
				}
			}
		})
	}
}

// Without DATABASE_URL every example says so and exits non-zero, but
// those that run on a SQLite file then, which tell their whole story on
// one.
func TestExamplesNeedDatabaseURL(t *testing.T) {
	root := moduleRoot(t)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			out, err := goRun(t, root, ex.name, "")
			if ex.sqlite {
				t.Logf("go run ./%s on SQLite:\n%s", ex.name, out)
				if err != nil {
					t.Fatalf("go run ./%s without DATABASE_URL (SQLite): %v", ex.name, err)
				}
				for _, w := range ex.want {
					if !strings.Contains(out, w) {
						t.Errorf("output of %s on SQLite lacks %q", ex.name, w)
					}
				}
				return
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Fatalf("go run ./%s without DATABASE_URL: err %v, want a non-zero exit\n%s", ex.name, err, out)
			}
			if !strings.Contains(out, "DATABASE_URL is not set") {
				t.Errorf("output of %s without DATABASE_URL lacks %q:\n%s", ex.name, "DATABASE_URL is not set", out)
			}
		})
	}
}
