package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// tempModule writes a module named name holding files into a fresh
// directory. The sample has no go.mod of its own under testdata: a nested
// module there would be one that go.work does not list.
func tempModule(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module " + name + "\n\ngo 1.26.0\n"
	for f, text := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goTestJSON runs go test -json on testdata/sample and returns its stream.
func goTestJSON(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	sample, err := os.ReadFile(filepath.Join("testdata", "sample", "sample_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"test", "-json", "-count=1"}, append(args, "./...")...)...)
	cmd.Dir = tempModule(t, "example.com/sample", map[string]string{"sample_test.go": string(sample)})
	cmd.Env = append(os.Environ(), append([]string{"GOWORK=off", "GOFLAGS="}, env...)...)
	out, _ := cmd.Output() // a failing run exits 1; the stream is what counts
	if len(out) == 0 {
		t.Fatal("go test -json printed nothing")
	}
	return out
}

func TestReportPassingRun(t *testing.T) {
	stream := goTestJSON(t, nil)
	var out bytes.Buffer
	r := newReport(&out, "./sample", false)
	ok, err := r.read(bytes.NewReader(stream), time.Hour)
	if err != nil || !ok {
		t.Fatalf("read = %v, %v; want true, nil\n%s", ok, err, out.String())
	}
	want := "  ok   example.com/sample "
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "3 passed, 3 skipped") {
		t.Errorf("output lacks %q with 3 passed, 3 skipped:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "something logged first") {
		t.Errorf("a passing run printed a test's log:\n%s", out.String())
	}

	skips := filepath.Join(t.TempDir(), "skips")
	if err := r.appendSkips(skips); err != nil {
		t.Fatal(err)
	}
	var sum bytes.Buffer
	if err := printSummary(&sum, skips); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"3 tests skipped",
		"3 × SAMPLE_DIR is not set; set it to run this",
		"TestSkipsWithReason, TestSubtests/a, TestSubtests/b (example.com/sample)",
	} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

func TestReportFailingRun(t *testing.T) {
	stream := goTestJSON(t, []string{"SAMPLE_FAIL=1"})
	var out bytes.Buffer
	ok, err := newReport(&out, ".", false).read(bytes.NewReader(stream), time.Hour)
	if err != nil || ok {
		t.Fatalf("read = %v, %v; want false, nil", ok, err)
	}
	for _, want := range []string{"the failure message", "--- FAIL: TestFails", "  FAIL example.com/sample "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReportBuildFailure(t *testing.T) {
	dir := tempModule(t, "example.com/broken", map[string]string{
		"broken_test.go": "package broken\n\nfunc TestX(t *testing.T) { undefinedName() }\n",
	})
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	stream, _ := cmd.Output()
	var out bytes.Buffer
	ok, err := newReport(&out, ".", false).read(bytes.NewReader(stream), time.Hour)
	if err != nil || ok {
		t.Fatalf("read = %v, %v; want false, nil", ok, err)
	}
	if !strings.Contains(out.String(), "undefined") || !strings.Contains(out.String(), "FAIL example.com/broken") {
		t.Errorf("output does not show the build error:\n%s", out.String())
	}
}

func TestReportBenchmarks(t *testing.T) {
	stream := goTestJSON(t, nil, "-run=^$", "-bench=.", "-benchtime=1x")
	var out bytes.Buffer
	if _, err := newReport(&out, ".", false).read(bytes.NewReader(stream), time.Hour); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "BenchmarkNothing") || !strings.Contains(out.String(), "ns/op") {
		t.Errorf("output lacks the benchmark's result line:\n%s", out.String())
	}
}

// syncBuffer is a bytes.Buffer the test can read while read writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// While a package runs, the report says so on every heartbeat.
func TestReportHeartbeat(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	done := make(chan bool)
	go func() {
		ok, _ := newReport(&out, ".", false).read(pr, time.Millisecond)
		done <- ok
	}()
	// Before any package starts, go test is building: it says so.
	for !strings.Contains(out.String(), "building the tests") {
		time.Sleep(time.Millisecond)
	}
	if _, err := pw.WriteString(`{"Action":"start","Package":"example.com/slow"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(out.String(), "running example.com/slow") {
		select {
		case <-done:
			t.Fatal("read returned before the stream ended")
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := pw.WriteString(`{"Action":"pass","Package":"example.com/slow","Elapsed":1}` + "\n"); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if ok := <-done; !ok {
		t.Errorf("read = false for a passing package:\n%s", out.String())
	}
	pr.Close()
}

// A -run that matches nothing says so, as go test does, rather than
// looking like a pass.
func TestReportNoTestsRun(t *testing.T) {
	stream := goTestJSON(t, nil, "-run=XXX_NONE")
	var out bytes.Buffer
	ok, err := newReport(&out, ".", false).read(bytes.NewReader(stream), time.Hour)
	if err != nil || !ok {
		t.Fatalf("read = %v, %v; want true, nil", ok, err)
	}
	for _, want := range []string{"example.com/sample", "[no tests to run]", "1 of the module's packages ran no tests"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
