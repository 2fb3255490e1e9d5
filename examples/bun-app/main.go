// Command bun-app is an application with its own bun models that runs
// cairnq on its own *bun.DB (pgdialect over bun's pgdriver).
//
// The app stores a Document, and in the same bun transaction submits a
// "render.pages" task (cairnqbunsql.SubmitTx): the task exists only if the
// document commits. A worker renders the document into Page rows and settles
// the task in the same bun transaction that inserts them
// (cairnqbunsql.SucceedIn): the pages and the task's success commit together or
// not at all. A handler that writes its pages and then crashes before the
// commit leaves no page and no success behind; the task is retried, or fails
// once its attempts are spent.
//
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/bun-app
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
)

// Document is the application's model: a text whose paragraphs are
// rendered into pages by a worker.
type Document struct {
	bun.BaseModel `bun:"table:bun_app_documents,alias:d"`

	ID         int64     `bun:",pk,autoincrement"`
	Title      string    `bun:",notnull"`
	Body       string    `bun:",notnull"` // paragraphs separated by blank lines
	Pages      []*Page   `bun:"rel:has-many,join:id=document_id"`
	RenderedAt time.Time `bun:",nullzero"`
	CreatedAt  time.Time `bun:",nullzero,notnull,default:current_timestamp"`
}

// Page is one rendered page of a Document.
type Page struct {
	bun.BaseModel `bun:"table:bun_app_pages,alias:p"`

	ID         int64  `bun:",pk,autoincrement"`
	DocumentID int64  `bun:",notnull"`
	Number     int    `bun:",notnull"`
	HTML       string `bun:"html,notnull"`
	Words      int    `bun:",notnull"`
	TaskID     string `bun:",notnull"` // the task that rendered it
}

var _ bun.BeforeAppendModelHook = (*Page)(nil)

// BeforeAppendModel is a bun hook: on insert it checks the page and counts
// its words, for each page of a bulk insert, inside whatever transaction
// runs the insert.
func (p *Page) BeforeAppendModel(ctx context.Context, query bun.Query) error {
	if _, ok := query.(*bun.InsertQuery); ok {
		if strings.TrimSpace(p.HTML) == "" {
			return errors.New("a page cannot be empty")
		}
		p.Words = len(strings.Fields(stripTags(p.HTML)))
	}
	return nil
}

// renderPages is the task's payload. Crash makes the handler fail after
// writing its pages, before the commit: "first" on the first attempt only,
// "always" on every attempt.
type renderPages struct {
	DocumentID int64  `json:"document_id"`
	Crash      string `json:"crash,omitempty"`
}

const (
	taskName = "render.pages"
	queue    = "bun-app"
)

var errCrash = errors.New("simulated crash before commit")

func main() {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintln(os.Stderr, "bun-app: DATABASE_URL is not set; point it at a Postgres database, e.g.\n"+
			"  DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/bun-app")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "bun-app: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("bun-app: ok")
}

func run(ctx context.Context, dsn string) error {
	// The application's own *bun.DB; cairnq shares its pool.
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	db := bun.NewDB(sqldb, pgdialect.New())
	defer db.Close()
	if err := createTables(ctx, db); err != nil {
		return err
	}
	client, err := cairnq.OpenPostgres(ctx, cairnqbunsql.New(db, nil), nil)
	if err != nil {
		return err
	}
	defer client.Close()

	// 1. Transactional enqueue: the document and its task commit together.
	body := "Revenue grew in every region.\n\nCosts fell by a tenth.\n\nWe hired forty people."
	ok, okTask, err := submitDocument(ctx, db, client, "Annual report", body, "", 3)
	if err != nil {
		return err
	}
	fmt.Printf("submitted %s for document %d in the app's transaction\n", okTask, ok)
	flaky, flakyTask, err := submitDocument(ctx, db, client, "Quarterly report", body, "first", 3)
	if err != nil {
		return err
	}
	fmt.Printf("submitted %s for document %d (its first attempt will crash before commit)\n", flakyTask, flaky)
	doomed, doomedTask, err := submitDocument(ctx, db, client, "Draft", body, "always", 2)
	if err != nil {
		return err
	}
	fmt.Printf("submitted %s for document %d (every attempt will crash before commit)\n", doomedTask, doomed)

	// ...and roll back together: a failed validation after the submit
	// leaves neither the document nor the task.
	if err := rolledBackSubmit(ctx, db, client); err != nil {
		return err
	}

	// 2. A worker renders pages and settles in the same bun transaction.
	w, err := cairnq.NewWorker(client, &cairnq.WorkerOptions{
		Queues: []string{queue}, PollInterval: 100 * time.Millisecond,
		RetryBackoff: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := w.Handle(taskName, renderHandler(db, client), nil); err != nil {
		return err
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	final := map[string]*cairnq.Task{}
	for _, id := range []string{okTask, flakyTask, doomedTask} {
		t, err := client.Wait(ctx, id, &cairnq.WaitOptions{Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", id, err)
		}
		final[id] = t
	}
	stopWorker()
	if err := <-runErr; err != nil {
		return fmt.Errorf("worker: %w", err)
	}

	// 3. What committed.
	paragraphs := len(paragraphsOf(body))
	for _, c := range []struct {
		doc    int64
		task   string
		status cairnq.Status
		pages  int
	}{
		{ok, okTask, cairnq.StatusSucceeded, paragraphs},
		{flaky, flakyTask, cairnq.StatusSucceeded, paragraphs},
		{doomed, doomedTask, cairnq.StatusFailed, 0},
	} {
		var doc Document
		if err := db.NewSelect().Model(&doc).Relation("Pages").Where("d.id = ?", c.doc).Scan(ctx); err != nil {
			return err
		}
		t := final[c.task]
		outcome := "result " + string(t.Result)
		if t.Status != cairnq.StatusSucceeded && t.Error != nil {
			outcome = "error: " + t.Error.Message
		}
		fmt.Printf("document %d %q: task %s after %d attempt(s) (%s), %d page(s) committed\n",
			doc.ID, doc.Title, t.Status, t.Attempt, outcome, len(doc.Pages))
		if t.Status != c.status || len(doc.Pages) != c.pages {
			return fmt.Errorf("document %d: task %s with %d pages, want %s with %d",
				doc.ID, t.Status, len(doc.Pages), c.status, c.pages)
		}
		if c.pages > 0 && (doc.RenderedAt.IsZero() || doc.Pages[0].Words == 0) {
			return fmt.Errorf("document %d: rendered_at or the hook's word count is missing", doc.ID)
		}
	}
	return nil
}

// createTables creates the app's tables if they are missing.
func createTables(ctx context.Context, db *bun.DB) error {
	if _, err := db.NewCreateTable().Model((*Document)(nil)).IfNotExists().Exec(ctx); err != nil {
		return err
	}
	if _, err := db.NewCreateTable().Model((*Page)(nil)).IfNotExists().
		ForeignKey(`("document_id") REFERENCES "bun_app_documents" ("id") ON DELETE CASCADE`).
		Exec(ctx); err != nil {
		return err
	}
	_, err := db.NewCreateIndex().Model((*Page)(nil)).Index("bun_app_pages_document_id_idx").
		Column("document_id").IfNotExists().Exec(ctx)
	return err
}

// submitDocument stores a document and submits its render task in one bun
// transaction of the application's.
func submitDocument(ctx context.Context, db *bun.DB, client *cairnq.Client, title, body, crash string, attempts int) (int64, string, error) {
	var docID int64
	var taskID string
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		doc := Document{Title: title, Body: body}
		if _, err := tx.NewInsert().Model(&doc).Exec(ctx); err != nil {
			return err
		}
		t, err := cairnqbunsql.SubmitTx(ctx, client, tx, taskName,
			renderPages{DocumentID: doc.ID, Crash: crash},
			&cairnq.SubmitOptions{Queue: queue, MaxAttempts: attempts})
		if err != nil {
			return err
		}
		docID, taskID = doc.ID, t.ID
		return nil
	})
	return docID, taskID, err
}

// rolledBackSubmit submits inside a transaction that then fails, and shows
// that neither the document nor the task exists.
func rolledBackSubmit(ctx context.Context, db *bun.DB, client *cairnq.Client) error {
	var docID int64
	var taskID string
	errInvalid := errors.New("title is not unique")
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		doc := Document{Title: "Annual report", Body: "duplicate"}
		if _, err := tx.NewInsert().Model(&doc).Exec(ctx); err != nil {
			return err
		}
		t, err := cairnqbunsql.SubmitTx(ctx, client, tx, taskName, renderPages{DocumentID: doc.ID},
			&cairnq.SubmitOptions{Queue: queue})
		if err != nil {
			return err
		}
		docID, taskID = doc.ID, t.ID
		return errInvalid // the app rejects the document after submitting
	})
	if !errors.Is(err, errInvalid) {
		return fmt.Errorf("rolled-back transaction: %v", err)
	}
	docs, err := db.NewSelect().Model((*Document)(nil)).Where("id = ?", docID).Count(ctx)
	if err != nil {
		return err
	}
	_, getErr := client.Get(ctx, taskID)
	fmt.Printf("rolled back a transaction that submitted %s: documents with id %d: %d, task: %v\n", taskID, docID, docs, getErr)
	if docs != 0 || !errors.Is(getErr, cairnq.ErrNotFound) {
		return errors.New("a rolled-back submit left its document or its task behind")
	}
	return nil
}

// renderHandler renders a document's paragraphs into pages and settles the
// task in the transaction that inserts them.
func renderHandler(db *bun.DB, client *cairnq.Client) cairnq.Handler {
	return func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p renderPages
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		crash := p.Crash == "always" || (p.Crash == "first" && tc.Attempt() == 1)
		written := 0
		err := cairnqbunsql.SucceedIn(ctx, tc, func(ctx context.Context, tx bun.Tx) (any, error) {
			doc := Document{ID: p.DocumentID}
			if err := tx.NewSelect().Model(&doc).WherePK().Scan(ctx); err != nil {
				return nil, err
			}
			var pages []*Page
			for i, para := range paragraphsOf(doc.Body) {
				pages = append(pages, &Page{DocumentID: doc.ID, Number: i + 1, HTML: "<p>" + para + "</p>", TaskID: tc.ID()})
			}
			if _, err := tx.NewInsert().Model(&pages).Exec(ctx); err != nil { // runs the hook per page
				return nil, err
			}
			if _, err := tx.NewUpdate().Model(&doc).Set("rendered_at = ?", time.Now()).WherePK().Exec(ctx); err != nil {
				return nil, err
			}
			written = len(pages)
			if crash {
				return nil, errCrash // the rows above roll back; the task is not settled
			}
			return map[string]int{"pages": len(pages)}, nil
		})
		if errors.Is(err, errCrash) {
			// Look from outside the rolled-back transaction.
			pages, cerr := db.NewSelect().Model((*Page)(nil)).Where("document_id = ?", p.DocumentID).Count(ctx)
			if cerr != nil {
				return nil, cerr
			}
			st, gerr := client.GetStatus(ctx, tc.ID())
			if gerr != nil {
				return nil, gerr
			}
			fmt.Printf("  %s attempt %d wrote %d pages, then crashed before commit: %d pages committed, task %s (not succeeded)\n",
				tc.ID(), tc.Attempt(), written, pages, st.Status)
		}
		// nil: SucceedIn settled the task. An error: the worker fails this
		// attempt, and the task is retried while attempts remain.
		return nil, err
	}
}

func paragraphsOf(body string) []string {
	var out []string
	for para := range strings.SplitSeq(body, "\n\n") {
		if para = strings.TrimSpace(para); para != "" {
			out = append(out, para)
		}
	}
	return out
}

func stripTags(html string) string {
	return strings.NewReplacer("<p>", " ", "</p>", " ").Replace(html)
}
