// Command gorm-app is an application with its own gorm models that runs
// cairnq on its own *gorm.DB.
//
// The app stores a Document, and in the same gorm transaction submits a
// "render.pages" task (cairnqgorm.SubmitTx): the task exists only if the
// document commits. A worker renders the document into Page rows and settles
// the task in the same gorm transaction that inserts them
// (cairnqgorm.SucceedIn): the pages and the task's success commit together
// or not at all. A handler that writes its pages and then crashes before
// the commit leaves no page and no success behind; the task is retried, or
// fails once its attempts are spent.
//
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/gorm-app
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
)

// Document is the application's model: a text whose paragraphs are
// rendered into pages by a worker.
type Document struct {
	ID         uint
	Title      string
	Body       string // paragraphs separated by blank lines
	Pages      []Page // has many; written by the worker
	RenderedAt *time.Time
	CreatedAt  time.Time
}

// TableName keeps the example's tables apart from anything else in the
// database.
func (Document) TableName() string { return "gorm_app_documents" }

// Page is one rendered page of a Document.
type Page struct {
	ID         uint
	DocumentID uint `gorm:"not null;index"`
	Number     int
	HTML       string
	Words      int
	TaskID     string // the task that rendered it
}

// TableName keeps the example's tables apart from anything else in the
// database.
func (Page) TableName() string { return "gorm_app_pages" }

// BeforeCreate is a gorm hook. It runs inside the transaction the handler
// writes in, like any other statement of that transaction.
func (p *Page) BeforeCreate(tx *gorm.DB) error {
	if strings.TrimSpace(p.HTML) == "" {
		return errors.New("a page cannot be empty")
	}
	p.Words = len(strings.Fields(stripTags(p.HTML)))
	return nil
}

// renderPages is the task's payload. Crash makes the handler fail after
// writing its pages, before the commit: "first" on the first attempt only,
// "always" on every attempt.
type renderPages struct {
	DocumentID uint   `json:"document_id"`
	Crash      string `json:"crash,omitempty"`
}

const (
	taskName = "render.pages"
	queue    = "gorm-app"
)

var errCrash = errors.New("simulated crash before commit")

func main() {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintln(os.Stderr, "gorm-app: DATABASE_URL is not set; point it at a Postgres database, e.g.\n"+
			"  DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/gorm-app")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "gorm-app: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("gorm-app: ok")
}

func run(ctx context.Context, dsn string) error {
	// The application's own *gorm.DB; cairnq shares its pool.
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Error)})
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	db = db.WithContext(ctx)
	if err := db.AutoMigrate(&Document{}, &Page{}); err != nil {
		return err
	}
	client, err := cairnq.OpenPostgres(ctx, cairnqgorm.New(db, nil), nil)
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

	// 2. A worker renders pages and settles in the same gorm transaction.
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
		doc    uint
		task   string
		status cairnq.Status
		pages  int
	}{
		{ok, okTask, cairnq.StatusSucceeded, paragraphs},
		{flaky, flakyTask, cairnq.StatusSucceeded, paragraphs},
		{doomed, doomedTask, cairnq.StatusFailed, 0},
	} {
		var doc Document
		if err := db.Preload("Pages").First(&doc, c.doc).Error; err != nil {
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
		if c.pages > 0 && (doc.RenderedAt == nil || doc.Pages[0].Words == 0) {
			return fmt.Errorf("document %d: rendered_at or the hook's word count is missing", doc.ID)
		}
	}
	return nil
}

// submitDocument stores a document and submits its render task in one gorm
// transaction of the application's.
func submitDocument(ctx context.Context, db *gorm.DB, client *cairnq.Client, title, body, crash string, attempts int) (uint, string, error) {
	var docID uint
	var taskID string
	err := db.Transaction(func(tx *gorm.DB) error {
		doc := Document{Title: title, Body: body}
		if err := tx.Create(&doc).Error; err != nil {
			return err
		}
		t, err := cairnqgorm.SubmitTx(ctx, client, tx, taskName,
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
func rolledBackSubmit(ctx context.Context, db *gorm.DB, client *cairnq.Client) error {
	var docID uint
	var taskID string
	errInvalid := errors.New("title is not unique")
	err := db.Transaction(func(tx *gorm.DB) error {
		doc := Document{Title: "Annual report", Body: "duplicate"}
		if err := tx.Create(&doc).Error; err != nil {
			return err
		}
		t, err := cairnqgorm.SubmitTx(ctx, client, tx, taskName, renderPages{DocumentID: doc.ID},
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
	var docs int64
	if err := db.Model(&Document{}).Where("id = ?", docID).Count(&docs).Error; err != nil {
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
func renderHandler(db *gorm.DB, client *cairnq.Client) cairnq.Handler {
	return func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p renderPages
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		crash := p.Crash == "always" || (p.Crash == "first" && tc.Attempt() == 1)
		written := 0
		err := cairnqgorm.SucceedIn(ctx, tc, func(ctx context.Context, tx *gorm.DB) (any, error) {
			var doc Document
			if err := tx.First(&doc, p.DocumentID).Error; err != nil {
				return nil, err
			}
			var pages []Page
			for i, para := range paragraphsOf(doc.Body) {
				pages = append(pages, Page{DocumentID: doc.ID, Number: i + 1, HTML: "<p>" + para + "</p>", TaskID: tc.ID()})
			}
			if err := tx.Create(&pages).Error; err != nil { // runs the BeforeCreate hook
				return nil, err
			}
			if err := tx.Model(&doc).Update("rendered_at", time.Now()).Error; err != nil {
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
			var pages int64
			if cerr := db.Model(&Page{}).Where("document_id = ?", p.DocumentID).Count(&pages).Error; cerr != nil {
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
