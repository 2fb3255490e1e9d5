package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	cairnq "github.com/cairnq/cairnq-go"
)

// SubmitMany writes a batch in one transaction, each task as Submit
// would, in order: a key repeated within the batch meets the task its
// first use wrote, and a bad item fails the whole batch by its index.
func ExampleClient_SubmitMany() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	render := cairnq.Define[map[string]int, string]("render")
	tasks, err := c.SubmitMany(ctx, []cairnq.SubmitItem{
		render.Item(map[string]int{"page": 1}, &cairnq.SubmitOptions{Key: "doc:1:render"}),
		render.Item(map[string]int{"page": 2}, nil),
		render.Item(map[string]int{"page": 1}, &cairnq.SubmitOptions{Key: "doc:1:render"}), // the first item's task
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tasks), tasks[2].ID == tasks[0].ID)

	_, err = c.SubmitMany(ctx, []cairnq.SubmitItem{{Name: "render"}, {Name: ""}})
	var bad *cairnq.SubmitItemError
	fmt.Println(errors.As(err, &bad), bad.Index, errors.Is(err, cairnq.ErrInvalidArgument))
	// Output:
	// 3 true
	// true 1 true
}
