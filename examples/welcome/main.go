package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hopper-go/hopper"
)

type Email struct {
	To, Subject string
}

var sendEmail = hopper.Define("send-email", func(ctx context.Context, e Email) (string, error) {
	job := hopper.JobFromContext(ctx)
	// Guard the side effect: a job can run more than once (at-least-once delivery).
	first, err := job.Claim(ctx, "send-email:"+job.ID())
	if err != nil || !first {
		return "already sent", err
	}
	fmt.Printf("sending %q to %s (attempt %d)\n", e.Subject, e.To, job.Attempt())
	return "message-42", nil
}, &hopper.TypeOpts[Email]{
	Retry: hopper.RetryPolicy{Attempts: 5, Base: time.Second},
})

func main() {
	ctx := context.Background()
	c, err := hopper.New(hopper.Config{}) // ./hopper.db
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Register(sendEmail); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}

	h, err := sendEmail.Enqueue(ctx, c, Email{To: "ada@example.com", Subject: "Welcome"}, &hopper.InsertOpts{
		Delay: time.Second,
		// While this job is not finished, enqueueing with the same key
		// returns it instead of a second one.
		UniqueKey: "welcome:ada",
	})
	if err != nil {
		log.Fatal(err)
	}
	id, err := h.Result(ctx) // waits for the job, wherever it runs
	fmt.Println(id, err)
}
