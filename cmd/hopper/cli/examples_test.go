package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/driver/memdriver"
)

// startExamples starts a client on d with hopper dev's example types; the
// client is stopped and d closed when the test ends.
func startExamples(t *testing.T, ctx context.Context, d driver.Driver) *hopper.Client {
	t.Helper()
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(exampleTypes()...); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// TestExamplePipeline runs hopper dev's pipeline example: the chunks, then
// merge, then publish, whose result is the group's value.
func TestExamplePipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := startExamples(t, ctx, memdriver.New())
	h, err := examplePipeline.Enqueue(ctx, c, PipelineInput{Chunks: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Group(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := hopper.GroupDecode[string](g)
	if err != nil || v != "publish" {
		t.Fatalf("group value %q, %v; want publish", v, err)
	}
}

// TestExampleReport runs hopper dev's report example: the render activity
// fails once, then reports its pages; the run's timeline tells it all.
func TestExampleReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := startExamples(t, ctx, memdriver.New())
	h, err := exampleReport.Start(ctx, c, ReportInput{Pages: 2, FailFirst: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Result(ctx)
	if err != nil || out != "2 pages" {
		t.Fatalf("report = %q, %v; want 2 pages", out, err)
	}
	info, err := c.RunGet(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range info.Timeline {
		kinds = append(kinds, ev.Kind)
	}
	want := []string{"workflow_started", "activity_scheduled", "activity_started", "activity_failed", "activity_retry",
		"activity_started", "activity_heartbeat", "activity_heartbeat", "activity_completed", "workflow_completed"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("timeline %v; want %v", kinds, want)
	}
}

// TestExampleSchedule: hopper dev's schedule registers, and its occurrence's
// job is an add of the hour and the minute, which runs.
func TestExampleSchedule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := startExamples(t, ctx, memdriver.New())
	for _, sc := range exampleSchedules() {
		stop, err := c.Schedule(sc)
		if err != nil {
			t.Fatalf("schedule %s: %v", sc.Name, err)
		}
		defer stop()
	}
	if got, err := c.ScheduleList(ctx); err != nil || len(got) != 1 || got[0].Name != "add-every-minute" || got[0].Next.Second() != 0 {
		t.Fatalf("schedules: %+v, %v", got, err)
	}
	spec, err := exampleSchedules()[0].Job(time.Date(2030, 1, 1, 14, 5, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.EnqueueMany(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res[0].Result(ctx)
	if err != nil || string(out) != "19" {
		t.Fatalf("add of 14:05 = %s, %v; want 19", out, err)
	}
}
