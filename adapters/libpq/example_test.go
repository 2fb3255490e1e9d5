package cairnqlibpq_test

import (
	"context"
	"log"
	"os"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
)

// Open a pool whose every connection resolves in cairnq's own schema, and
// listen for cairnq's notifications on a connection of its own.
func ExampleOpen() {
	ctx := context.Background()
	exec, err := cairnqlibpq.Open(ctx, os.Getenv("DATABASE_URL"), &cairnqlibpq.Options{
		Schema:      "cairnq",
		OnReconnect: func() { log.Println("listener reconnected: poll once") },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()

	stop, err := exec.Listen(ctx, []string{"cairnq_queued"}, func(channel, payload string) {
		log.Printf("%s: %s", channel, payload)
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, executor.ErrListenUnavailable): poll instead
	}
	defer stop()
}
