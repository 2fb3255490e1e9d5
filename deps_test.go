package cairnq_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The core must not drag a Postgres driver, an ORM or test infrastructure
// into programs that only use the embedded default, and the executor seam
// must stay standard-library only, since strangers implement it.
func TestCoreImportsNoDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	forbidden := []string{"jackc/pgx", "lib/pq", "gorm.io", "uptrace/bun", "testcontainers", "jmoiron/sqlx"}
	for _, pkg := range []string{".", "./store", "./protocol", "./executor"} {
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
			if pkg == "./executor" && strings.Contains(dep, ".") && !strings.HasPrefix(dep, "github.com/cairnq/cairnq-go/executor") {
				t.Errorf("executor imports %s, outside the standard library", dep)
			}
		}
	}
}
