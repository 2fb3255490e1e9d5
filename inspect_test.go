package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// A process whose migrations run elsewhere opens with OpenExisting: it
// creates nothing, and a missing database is ErrNoDatabase.
// InspectSQLite reports where the database stands without opening a
// client.
func ExampleInspectSQLite() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	existing := &cairnq.SQLiteOptions{Options: cairnq.Options{OpenExisting: true}}

	_, err := cairnq.Open(ctx, path, existing)
	st, _ := cairnq.InspectSQLite(ctx, path)
	fmt.Println(errors.Is(err, cairnq.ErrNoDatabase), st.State, len(st.Missing) > 0)

	c, err := cairnq.Open(ctx, path, nil) // what cairnq migrate does
	if err != nil {
		log.Fatal(err)
	}
	c.Close()
	st, _ = cairnq.InspectSQLite(ctx, path)
	fmt.Println(st.State, st.ProtocolVersion, st.SchemaVersion == st.SDKSchemaVersion)

	c, err = cairnq.Open(ctx, path, existing)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	expired, _ := c.ExpiredLeases(ctx, 0)
	ages, _ := c.QueueAges(ctx)
	failures, _ := c.RecentFailures(ctx, time.Hour)
	fmt.Println(len(expired), len(ages), len(failures))
	// Output:
	// true absent true
	// current 1 true
	// 0 0 0
}

func TestOpenExistingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "tasks.db")
	_, err := cairnq.Open(t.Context(), path, &cairnq.SQLiteOptions{Options: cairnq.Options{OpenExisting: true}})
	if !errors.Is(err, cairnq.ErrNoDatabase) {
		t.Fatalf("Open with OpenExisting of a missing file: %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory was created: %v", err)
	}
	c := openTemp(t, nil)
	var nilCtx context.Context
	if _, err := c.ExpiredLeases(nilCtx, 0); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("ExpiredLeases(nil ctx) = %v", err)
	}
	if _, err := c.QueueAges(nilCtx); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("QueueAges(nil ctx) = %v", err)
	}
	if _, err := c.RecentFailures(nilCtx, time.Hour); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("RecentFailures(nil ctx) = %v", err)
	}
}
