// Command cron runs a schedule: a digest job enqueued at each occurrence of
// "@every 5s", once however many copies of this program share the store.
// Start two in separate terminals on the same file and each occurrence
// still runs once.
//
//	go run ./examples/cron                 # ./cron.db, three occurrences
//	go run ./examples/cron -db /tmp/x.db -n 5
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
)

// Digest is the input of the digest job: the occurrence it stands for.
type Digest struct {
	At time.Time `json:"at"`
}

func main() {
	db := flag.String("db", "cron.db", "SQLite file")
	every := flag.Duration("every", 5*time.Second, "time between occurrences")
	n := flag.Int("n", 3, "occurrences to see before exiting")
	flag.Parse()
	if err := run(context.Background(), *db, *every, *n); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, path string, every time.Duration, n int) error {
	ran := make(chan Digest, n)
	digest := hopper.Define("digest", func(ctx context.Context, in Digest) (string, error) {
		job := hopper.JobFromContext(ctx)
		fmt.Printf("digest for %s (job %s, attempt %d)\n", in.At.Format(time.TimeOnly), job.ID(), job.Attempt())
		select {
		case ran <- in:
		default:
		}
		return "sent", nil
	}, nil)

	d, err := sqlitedriver.Open(path, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		return err
	}
	if err := c.Register(digest); err != nil {
		return err
	}
	stop, err := c.Schedule(hopper.Schedule{
		Name: "digest",
		Cron: "@every " + every.String(),
		Job: func(at time.Time) (*hopper.JobSpec, error) {
			// No overlap: while one digest is queued or running, the
			// next occurrence enqueues nothing.
			return digest.Job(Digest{At: at}, &hopper.InsertOpts{UniqueKey: "digest"}), nil
		},
	})
	if err != nil {
		return err
	}
	defer stop()
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Stop(context.WithoutCancel(ctx))
	infos, err := c.ScheduleList(ctx)
	if err != nil {
		return err
	}
	for _, in := range infos {
		if in.Registered {
			fmt.Fprintf(os.Stderr, "schedule %q: next occurrence %s\n", in.Name, in.Next.Format(time.TimeOnly))
		}
	}
	for range n {
		select {
		case <-ran:
		case <-time.After(every + time.Minute):
			return fmt.Errorf("no digest within %s", every+time.Minute)
		}
	}
	return nil
}
