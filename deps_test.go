package cairnq_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The core must not drag a Postgres driver, an ORM or test infrastructure
// into programs that only use the embedded default, and the executor seam
// must stay standard-library only, since strangers implement it (as must
// workflowspec, whose rules every SDK must be able to follow).
func TestCoreImportsNoDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{"jackc/pgx", "lib/pq", "gorm.io", "uptrace/bun", "testcontainers", "jmoiron/sqlx"}
	// Leaves of the standard library alone, and what each may be in.
	stdlibOnly := map[string]string{
		"./executor":              "github.com/cairnq/cairnq-go/executor",
		"./internal/workflowspec": "github.com/cairnq/cairnq-go/internal/workflowspec",
	}
	for _, pkg := range []string{".", "./store", "./protocol", "./executor", "./internal/workflowspec"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.Contains(dep, f) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
			if own, leaf := stdlibOnly[pkg]; leaf && strings.Contains(dep, ".") && !strings.HasPrefix(dep, own) {
				t.Errorf("%s imports %s, outside the standard library", pkg, dep)
			}
		}
	}
}

// A program importing this module (the root package, adapters/pgx,
// adapters/libpq) gets this module's requirements in its module graph,
// those of its tests included. So no ORM, sqlx, Docker client or
// OpenTelemetry may appear in this module's own graph: what needs them is a
// module of its own (adapters/gorm, adapters/bunsql,
// conformance/pgdocker, examples, bench). .ci/run checks the graph of
// a program importing the root package and adapters/pgx too.
func TestModuleGraphIsLean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{"gorm.io", "uptrace/bun", "jmoiron/sqlx", "testcontainers", "docker", "moby", "go.opentelemetry.io", "chromedp"}
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Env = append(os.Environ(), "GOWORK=off") // this module's graph alone, not the workspace's
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	mods := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range mods {
		for _, f := range forbidden {
			if strings.Contains(line, f) {
				t.Errorf("the root module's graph holds %s", line)
			}
		}
	}
	t.Logf("the root module's graph has %d modules", len(mods))
}
