package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// A scheduler submits a task for every slot of its entries. Run it in as
// many processes as should keep the entries going: each slot's task is
// submitted once, under a key made of the entry's ID and the slot's time,
// whichever process gets there first. Workers (here in the same process,
// usually elsewhere, in any SDK) run the tasks as usual.
func ExampleScheduler() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s := cairnq.NewScheduler(c, nil)
	id, err := s.Add("@every 1s", "heartbeat", map[string]string{"from": "scheduler"}, &cairnq.ScheduleOptions{
		ID:     "heartbeat",          // the same in every process scheduling this entry
		Missed: cairnq.MissedRunOnce, // after an outage, one run stands for the slots missed
		Submit: &cairnq.SubmitOptions{Queue: "periodic", MaxAttempts: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("entry:", id)

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{"periodic"}})
	if err != nil {
		log.Fatal(err)
	}
	ran := make(chan string, 16)
	err = w.Handle("heartbeat", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		select {
		case ran <- string(tc.Payload()):
		default:
		}
		return nil, nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- s.Run(runCtx) }()
	go func() { done <- w.Run(runCtx) }()
	fmt.Println("ran:", <-ran) // within a second: the next slot
	stop()
	for range 2 {
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// entry: heartbeat
	// ran: {"from":"scheduler"}
}

// Every slot's task has a key another SDK can derive too: the prefix, the
// entry's ID and the slot's Unix time in milliseconds.
func ExampleSlotKey() {
	slot := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	fmt.Println(cairnq.SlotKey("nightly-report", slot))
	// Output: cairnq:periodic:nightly-report:1767344400000
}

// A spec that does not parse is refused at Add, as an *ArgumentError.
func ExampleScheduler_Add() {
	path, cleanup := tempDB()
	defer cleanup()
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s := cairnq.NewScheduler(c, nil)
	_, err = s.Add("61 * * * *", "report", nil, nil)
	var argErr *cairnq.ArgumentError
	fmt.Println(errors.As(err, &argErr), argErr.Arg, errors.Is(err, cairnq.ErrInvalidArgument))

	// Six fields (seconds first), a zone per entry, a default ID.
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	id, err := s.Add("0 30 9 * * MON-FRI", "report", nil, &cairnq.ScheduleOptions{Location: paris})
	fmt.Println(id, err)
	// Output:
	// true spec true
	// report 0 30 9 * * MON-FRI Europe/Paris <nil>
}
