// Command cross-language is a Go worker for tasks another SDK submits.
//
// Across SDKs only the task's name and its JSON travel: a TypeScript or
// Python process submits "render.page" with a payload object, and this Go
// worker, on the same Postgres database, claims it by that string name,
// decodes the payload into a Go struct and returns a JSON result the
// submitter reads back. The payload shape is the contract (see
// examples/README.md).
//
// So that it runs on its own, the program first submits a few such tasks
// itself, by the string name and with plain map payloads, exactly what the
// other SDK would store, including one whose payload breaks the contract.
// Then it runs the worker until they are done.
//
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/cross-language
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// RenderPage is the payload of "render.page" as every SDK sends it.
type RenderPage struct {
	Document string `json:"document"` // the document's id
	Page     int    `json:"page"`     // from 1
	Width    int    `json:"width"`    // pixels; 0 means 1024
}

// RenderedPage is the result the submitter reads back.
type RenderedPage struct {
	Document string `json:"document"`
	Page     int    `json:"page"`
	URL      string `json:"url"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

// renderPage binds the name to the Go types on this side. The other SDK
// needs nothing but the string "render.page".
var renderPage = cairnq.Define[RenderPage, RenderedPage]("render.page")

func main() {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintln(os.Stderr, "cross-language: DATABASE_URL is not set; point it at the Postgres database the other SDK uses, e.g.\n"+
			"  DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/cross-language")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "cross-language: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("cross-language: ok")
}

func run(ctx context.Context, dsn string) error {
	ex, err := cairnqpgx.Open(ctx, dsn, nil) // a pool of its own, from the DSN
	if err != nil {
		return err
	}
	client, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		ex.Close()
		return err
	}
	defer client.Close()

	// Stand-in for the TypeScript or Python process: submit by the string
	// name with untyped payloads, as that SDK stores them.
	payloads := []map[string]any{
		{"document": "doc-42", "page": 1, "width": 1200},
		{"document": "doc-42", "page": 2, "width": 1200},
		{"document": "doc-42", "page": 3},
		{"document": "doc-42", "page": "four"}, // breaks the contract: page is not a number
	}
	ids := make([]string, len(payloads))
	for i, p := range payloads {
		t, err := client.Submit(ctx, "render.page", p, nil)
		if err != nil {
			return err
		}
		ids[i] = t.ID
	}
	fmt.Printf("submitted %d \"render.page\" tasks by name, as another SDK would\n", len(ids))

	// The Go worker. It claims only names it has handlers for, so it can
	// share the queue with workers of other SDKs.
	w, err := cairnq.NewWorker(client, &cairnq.WorkerOptions{Concurrency: 4, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	err = renderPage.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, p RenderPage) (RenderedPage, error) {
		// A payload that does not decode into RenderPage never gets here:
		// the task fails for good with code "bad_payload".
		if p.Document == "" || p.Page < 1 {
			return RenderedPage{}, cairnq.Permanent(fmt.Errorf("render.page needs a document and a page >= 1, got %+v", p))
		}
		if p.Width == 0 {
			p.Width = 1024
		}
		return RenderedPage{
			Document: p.Document, Page: p.Page, Width: p.Width, Height: p.Width * 297 / 210,
			URL: fmt.Sprintf("https://cdn.example.com/%s/%d-%d.png", p.Document, p.Page, p.Width),
		}, nil
	}, nil)
	if err != nil {
		return err
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	succeeded, failed := 0, 0
	for i, id := range ids {
		t, err := client.Wait(ctx, id, &cairnq.WaitOptions{Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", id, err)
		}
		// What the other SDK reads back: the status, and the result or the
		// error envelope as JSON.
		switch t.Status {
		case cairnq.StatusSucceeded:
			succeeded++
			fmt.Printf("%s payload %s: succeeded, result %s\n", t.ID, t.Payload, t.Result)
		case cairnq.StatusFailed:
			failed++
			fmt.Printf("%s payload %s: failed after %d attempt(s), code %s: %s\n", t.ID, t.Payload, t.Attempt, t.Error.Code, t.Error.Message)
		default:
			return fmt.Errorf("task %d ended %s", i, t.Status)
		}
	}
	stopWorker()
	if err := <-runErr; err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if succeeded != 3 || failed != 1 {
		return errors.New("want three rendered pages and one bad payload failed for good")
	}
	return nil
}
