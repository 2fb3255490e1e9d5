package engine

import (
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/cairnq/cairnq-go/executor"
)

// sqliteConn is one SQLite connection and its prepared statements. It is
// used by one goroutine at a time (the writer, or whoever checked it out of
// the read pool), so nothing here locks.
type sqliteConn struct {
	c     *sqlite3.Conn
	stmts map[string]*preparedStmt
}

type preparedStmt struct {
	s     *sqlite3.Stmt
	cols  []string
	index map[string]int // each column's position in cols (columnIndex)
}

func (c *sqliteConn) prepare(sql string) (*preparedStmt, error) {
	if p, ok := c.stmts[sql]; ok {
		return p, nil
	}
	s, tail, err := c.c.Prepare(sql)
	if err != nil {
		return nil, err
	}
	if tail != "" {
		s.Close()
		return nil, fmt.Errorf("cairnq: statement has trailing text %q", tail)
	}
	p := &preparedStmt{s: s}
	p.describe()
	c.stmts[sql] = p
	return p, nil
}

// describe reads the statement's result columns.
func (p *preparedStmt) describe() {
	p.cols = make([]string, p.s.ColumnCount())
	for i := range p.cols {
		p.cols[i] = p.s.ColumnName(i)
	}
	p.index = columnIndex(p.cols)
}

// query runs one statement with positional arguments and returns its rows.
func (c *sqliteConn) query(sql string, args []any) ([]executor.Row, error) {
	var rows []executor.Row
	_, err := c.run(sql, args, func(p *preparedStmt) {
		r := make(executor.Row, len(p.cols))
		for i, name := range p.cols {
			r[name] = columnValue(p.s, i)
		}
		rows = append(rows, r)
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// scan is query with the rows read by position.
func (c *sqliteConn) scan(sql string, args []any) (*table, error) {
	var t table
	p, err := c.run(sql, args, func(p *preparedStmt) {
		row := make([]any, len(p.cols))
		for i := range row {
			row[i] = columnValue(p.s, i)
		}
		t.rows = append(t.rows, row)
	})
	if err != nil {
		return nil, err
	}
	t.index = p.index
	return &t, nil
}

// run binds args to the statement sql, steps it to the end, calling row
// after each step, and resets it.
func (c *sqliteConn) run(sql string, args []any, row func(p *preparedStmt)) (*preparedStmt, error) {
	p, err := c.prepare(sql)
	if err != nil {
		return nil, err
	}
	s := p.s
	for i, a := range args {
		if err := bindValue(s, i+1, a); err != nil {
			s.ClearBindings()
			return nil, err
		}
	}
	for first := true; s.Step(); first = false {
		if first && s.ColumnCount() != len(p.cols) {
			// SQLite re-prepared the statement after a schema change (a
			// SELECT * over a table that gained a column).
			p.describe()
		}
		row(p)
	}
	err = s.Err()
	if rerr := s.Reset(); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// columnValue reads column i of the row s stands on, in its storage
// class's Go form.
func columnValue(s *sqlite3.Stmt, i int) any {
	switch s.ColumnType(i) {
	case sqlite3.INTEGER:
		return s.ColumnInt64(i)
	case sqlite3.FLOAT:
		return s.ColumnFloat(i)
	case sqlite3.TEXT:
		return s.ColumnText(i)
	case sqlite3.BLOB:
		return s.ColumnBlob(i, nil)
	}
	return nil
}

// exec runs a parameterless statement through the statement cache.
func (c *sqliteConn) exec(sql string) error {
	_, err := c.query(sql, nil)
	return err
}

func bindValue(s *sqlite3.Stmt, i int, a any) error {
	switch v := a.(type) {
	case nil:
		return s.BindNull(i)
	case string:
		return s.BindText(i, v)
	case int64:
		return s.BindInt64(i, v)
	case int:
		return s.BindInt64(i, int64(v))
	case int32:
		return s.BindInt64(i, int64(v))
	case float64:
		return s.BindFloat(i, v)
	case bool:
		if v {
			return s.BindInt64(i, 1)
		}
		return s.BindInt64(i, 0)
	case []byte:
		return s.BindText(i, string(v))
	}
	return fmt.Errorf("cairnq: cannot bind %T to a SQLite parameter", a)
}

// closeAfterPanic closes a connection the driver panicked on, whose
// statements may panic again as they close: it is being discarded, so
// every fault on the way out is swallowed. Closing a connection with a
// transaction open rolls the transaction back.
func (c *sqliteConn) closeAfterPanic() {
	for _, p := range c.stmts {
		func() {
			defer func() { recover() }()
			p.s.Close()
		}()
	}
	c.stmts = nil
	func() {
		defer func() { recover() }()
		c.c.Close()
	}()
}

func (c *sqliteConn) close() error {
	for _, p := range c.stmts {
		p.s.Close()
	}
	c.stmts = nil
	return c.c.Close()
}
