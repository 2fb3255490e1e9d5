package conformance

// The scenarios of a certification: the embedded ones, Factory.Scenarios
// and $CAIRNQ_SCENARIOS_DIR, run over a few lanes (scenarios/<name>).

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// The scenarios of this module, run by every certification.
//
//go:embed scenarios/*.json
var embeddedScenarios embed.FS

// envScenariosDir names a directory of further scenarios every
// certification runs (CI points it at the reference SDK's scenarios).
const envScenariosDir = "CAIRNQ_SCENARIOS_DIR"

// scenarios loads the embedded scenarios, then those of Factory.Scenarios
// and $CAIRNQ_SCENARIOS_DIR (each directory once).
func (s *suite) scenarios() ([]Scenario, error) {
	entries, err := fs.ReadDir(embeddedScenarios, "scenarios")
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, e := range entries {
		p := path.Join("scenarios", e.Name())
		data, err := embeddedScenarios.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sc, err := ParseScenario(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		sc.Path = p
		out = append(out, sc)
	}
	var seen []string
	for _, dir := range []string{s.f.Scenarios, os.Getenv(envScenariosDir)} {
		if dir == "" {
			continue
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		if slices.Contains(seen, abs) {
			continue
		}
		seen = append(seen, abs)
		more, err := LoadScenarios(dir)
		if err != nil {
			return nil, err
		}
		if len(more) == 0 {
			return nil, fmt.Errorf("%s holds no scenarios (*.json)", dir)
		}
		out = append(out, more...)
	}
	return out, nil
}

// runScenarios runs every scenario as a subtest of its name, spread over
// lanes.
func (s *suite) runScenarios(r reporter, scenarios []Scenario) {
	lanes := make([]env, min(scenarioLanes, len(scenarios)))
	for i := range lanes {
		lanes[i] = s.setup(r)
		// Migrate once per lane; each scenario then opens a client on a
		// migrated database.
		c, err := cairnq.OpenPostgres(lanes[i].ctx, lanes[i].ex, nil)
		if err != nil {
			r.Fatalf("cairnq.OpenPostgres on %s failed, so no scenario can run: %v. Fix the failing named checks first", s.name, err)
		}
		c.Close()
	}
	queue := make(chan Scenario)
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Go(func() {
			for sc := range queue {
				r.run(sc.Name, func(r reporter) { s.scenario(r, lane.ex, sc) })
			}
		})
	}
	for _, sc := range scenarios {
		queue <- sc
	}
	close(queue)
	wg.Wait()
}

// scenario runs one conformance scenario through a client of its own on
// ex, whose database it empties first.
func (s *suite) scenario(r reporter, ex executor.Executor, sc Scenario) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := ex.Exec(ctx, "TRUNCATE cairnq_task_keys, cairnq_tasks"); err != nil {
		r.Fatalf("emptying the lane's database before the scenario: %v", err)
	}
	c, err := cairnq.OpenPostgres(ctx, ex, nil)
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres on %s failed: %v", s.name, err)
	}
	defer c.Close()
	if err := RunE(ctx, ClientTarget{Client: c}, sc); err != nil {
		r.Errorf("%v\nThe scenario drives the store end to end on %s. Fix the failing named checks first; a scenario that fails alone usually means a row value the store misreads or a Tx session that is not one transaction", err, s.name)
	}
}
