package conformance_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/conformance"
)

// scenarioSets returns our scenarios and, when CAIRNQ_SCENARIOS_DIR is set,
// the reference repository's, each under its own subtest prefix.
func scenarioSets(t *testing.T) map[string][]conformance.Scenario {
	t.Helper()
	sets := map[string][]conformance.Scenario{}
	ours, err := conformance.LoadScenarios("scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) == 0 {
		t.Fatal("no scenarios under conformance/scenarios")
	}
	sets["ours"] = ours
	if dir := os.Getenv("CAIRNQ_SCENARIOS_DIR"); dir != "" {
		ref, err := conformance.LoadScenarios(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ref) == 0 {
			t.Fatalf("CAIRNQ_SCENARIOS_DIR=%s holds no scenarios", dir)
		}
		sets["reference"] = ref
	} else {
		t.Log("CAIRNQ_SCENARIOS_DIR is not set; running our scenarios only")
	}
	return sets
}

func TestScenariosOnSQLite(t *testing.T) {
	for set, scenarios := range scenarioSets(t) {
		for _, s := range scenarios {
			t.Run(set+"/"+s.Name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				c, err := cairnq.Open(ctx, filepath.Join(t.TempDir(), "tasks.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conformance.Run(t, ctx, conformance.ClientTarget{Client: c}, s)
			})
		}
	}
}
