package hopper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertest"
)

// A nightly report: a cron schedule enqueues one job per occurrence, once
// across every process that registers it. (A virtual clock stands in for
// the night here.)
func ExampleClient_Schedule() {
	reports := make(chan string, 4)
	report := hopper.Define("nightly-report", func(ctx context.Context, day string) (hopper.None, error) {
		reports <- day
		return hopper.None{}, nil
	}, nil)

	clk := hoppertest.NewClock(time.Date(2030, 1, 1, 22, 0, 0, 0, time.UTC))
	ctx := context.Background()
	c := exampleClient(hopper.Config{Clock: clk}, report)
	defer c.Stop(ctx)

	stop, err := c.Schedule(hopper.Schedule{
		Name:     "nightly-report",
		Cron:     "0 3 * * *", // 03:00 every day
		Location: time.UTC,
		Job: func(at time.Time) (*hopper.JobSpec, error) {
			return report.Job(at.AddDate(0, 0, -1).Format(time.DateOnly), nil), nil
		},
	})
	if err != nil {
		panic(err)
	}
	defer stop()

	clk.AdvanceTo(time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC))
	fmt.Println("report for", <-reports)
	clk.AdvanceTo(time.Date(2030, 1, 3, 3, 0, 0, 0, time.UTC))
	fmt.Println("report for", <-reports)
	// Output:
	// report for 2030-01-01
	// report for 2030-01-02
}

// A schedule defined in the store, as the HTTP API and the CLI define them:
// every process that registers its type runs it, and ScheduleDefine
// returns once this client does. (A virtual clock stands in for the hours.)
func ExampleClient_ScheduleDefine() {
	pings := make(chan string, 4)
	ping := hopper.Define("ping", func(ctx context.Context, host string) (hopper.None, error) {
		pings <- host
		return hopper.None{}, nil
	}, nil)

	clk := hoppertest.NewClock(time.Date(2030, 1, 1, 10, 30, 0, 0, time.UTC))
	ctx := context.Background()
	c := exampleClient(hopper.Config{Clock: clk}, ping)
	defer c.Stop(ctx)

	err := c.ScheduleDefine(ctx, hopper.StoredSchedule{
		Name:  "hourly-ping",
		Cron:  "@hourly",
		Type:  "ping",
		Input: json.RawMessage(`"example.com"`),
	})
	if err != nil {
		panic(err)
	}
	clk.AdvanceTo(time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC))
	fmt.Println("pinged", <-pings)
	infos, err := c.ScheduleList(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(infos[0].Name, "runs", infos[0].Type, "next at", infos[0].Next.Format(time.TimeOnly))
	// Output:
	// pinged example.com
	// hourly-ping runs ping next at 12:00:00
}
