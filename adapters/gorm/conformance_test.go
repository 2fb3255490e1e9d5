package cairnqgorm_test

import (
	"context"
	"os"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/internal/pgtest"
)

// scenarioSets loads our scenarios and, when CAIRNQ_SCENARIOS_DIR names
// them, the reference implementation's.
func scenarioSets(t *testing.T) map[string][]conformance.Scenario {
	t.Helper()
	sets := map[string][]conformance.Scenario{}
	ours, err := conformance.LoadScenarios("../../conformance/scenarios")
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

// Every scenario on a fresh database, through a client on the
// application's *gorm.DB.
func TestScenarios(t *testing.T) {
	for set, scenarios := range scenarioSets(t) {
		for _, s := range scenarios {
			t.Run(set+"/"+s.Name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				db, _ := openGorm(t, pgtest.DSN(t), nil)
				c, err := cairnq.OpenPostgres(ctx, cairnqgorm.New(db, nil), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conformance.Run(t, ctx, conformance.ClientTarget{Client: c}, s)
			})
		}
	}
}
