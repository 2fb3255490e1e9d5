package cairnqpgx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/executor"
)

// copyText runs COPY table (columns) FROM STDIN on conn with rows in
// COPY's text form, written by a goroutine of its own while the server
// reads them (so each row is built while the ones before travel), and
// returns how many rows the server wrote.
func copyText(ctx context.Context, conn *pgconn.PgConn, table string, columns []string, rows executor.CopyRows) (int64, error) {
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	sql := "COPY " + pgx.Identifier{table}.Sanitize() + " (" + strings.Join(quoted, ", ") + ") FROM STDIN"
	r, w := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeCopyText(w, len(columns), rows)
		w.CloseWithError(err) // nil: io.EOF, the end of the data
		written <- err
	}()
	tag, err := conn.CopyFrom(ctx, r, sql)
	var werr error
	select {
	case werr = <-written: // the writer ended first: an error of its own failed the COPY
	default:
		// The COPY ended first (the server refused a row, ctx ended):
		// the writer's next write fails, which ends it, and its error
		// says nothing of why.
		r.CloseWithError(io.ErrClosedPipe)
		<-written
	}
	if werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
		err = werr
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// writeCopyText writes rows to w in COPY's text form: the values of a row
// separated by tabs, a row per line, NULL as \N.
func writeCopyText(w io.Writer, width int, rows executor.CopyRows) error {
	b := bufio.NewWriterSize(w, 64<<10)
	for rows.Next() {
		if _, err := b.Write(nil); err != nil { // the reader went: stop building rows
			return err
		}
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		if len(vals) != width {
			return fmt.Errorf("a row of %d values for %d columns", len(vals), width)
		}
		for i, v := range vals {
			if i > 0 {
				b.WriteByte('\t')
			}
			if err := writeCopyValue(b, v); err != nil {
				return fmt.Errorf("column %d: %w", i, err)
			}
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return b.Flush()
}

// writeCopyValue writes v as COPY's text form reads it: a backslash,
// tab, newline or carriage return in a string escaped, NULL as \N.
func writeCopyValue(b *bufio.Writer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString(`\N`)
	case string:
		start := 0
		for i := 0; i < len(x); i++ {
			var esc string
			switch x[i] {
			case '\\':
				esc = `\\`
			case '\t':
				esc = `\t`
			case '\n':
				esc = `\n`
			case '\r':
				esc = `\r`
			default:
				continue
			}
			b.WriteString(x[start:i])
			b.WriteString(esc)
			start = i + 1
		}
		b.WriteString(x[start:])
	case int32:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	default:
		return fmt.Errorf("cannot copy a %T (a string, an int32, an int64 or nil)", v)
	}
	return nil
}
