package cairnq_test

import (
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
)

// execSQL runs a script on the database file through a separate connection,
// as another process would.
func execSQL(t *testing.T, path, script string) {
	t.Helper()
	if err := execSQLErr(path, script); err != nil {
		t.Fatal(err)
	}
}

// execSQLErr is execSQL for goroutines other than the test's, which must
// not call t.Fatal.
func execSQLErr(path, script string) error {
	c, err := sqlite3.Open(path)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.BusyTimeout(5 * time.Second); err != nil {
		return err
	}
	return c.Exec(script)
}

// tableCount counts the tables of the database file whose names match the
// LIKE pattern, read through a separate connection.
func tableCount(t *testing.T, path, like string) int {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.BindText(1, like); err != nil {
		t.Fatal(err)
	}
	if !st.Step() {
		t.Fatal(st.Err())
	}
	return st.ColumnInt(0)
}
