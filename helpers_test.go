package cairnq_test

import (
	"testing"

	"github.com/ncruces/go-sqlite3"
)

// execSQL runs a script on the database file through a separate connection,
// as another process would.
func execSQL(t *testing.T, path, script string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec(script); err != nil {
		t.Fatal(err)
	}
}
