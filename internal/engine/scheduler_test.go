package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertype"
)

// everyMinute is a schedule's Next that fires on each minute.
func everyMinute(after time.Time) time.Time { return after.Truncate(time.Minute).Add(time.Minute) }

func TestScheduleFirstDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sc := &Schedule{Name: "s", Next: everyMinute, CatchUp: 90 * time.Second}
	tests := []struct {
		name           string
		now, notBefore time.Time
		want           time.Time
	}{
		{"on time", t0, time.Time{}, t0},
		{"the latest missed within the window", t0.Add(80 * time.Second), time.Time{}, t0.Add(time.Minute)},
		{"missed before the store saw it: the next", t0.Add(30 * time.Second), t0.Add(10 * time.Second), t0.Add(time.Minute)},
		{"nothing missed since the store saw it: the next", t0.Add(-10 * time.Second), t0.Add(-20 * time.Second), t0},
	}
	for _, tt := range tests {
		if got := firstDue(sc, tt.now, tt.notBefore); !got.Equal(tt.want) {
			t.Errorf("%s: firstDue = %v, want %v", tt.name, got, tt.want)
		}
	}
	// The window never drops below the slack: an on-time-only schedule
	// still fires an occurrence a few seconds late.
	onTime := &Schedule{Name: "s", Next: everyMinute, CatchUp: 0}
	if got := latestWithin(onTime, t0.Add(5*time.Second), time.Time{}); !got.Equal(t0) {
		t.Errorf("latestWithin a few seconds late = %v, want %v", got, t0)
	}
	if got := latestWithin(onTime, t0.Add(scheduleSlack+time.Second), time.Time{}); !got.IsZero() {
		t.Errorf("latestWithin past the slack = %v, want none", got)
	}
}

func TestAddScheduleRefusesADuplicateName(t *testing.T) {
	drv := memdriver.New()
	defer drv.Close()
	e := newTestEngine(t, drv)
	nothing := func(time.Time) (*Occurrence, error) { return nil, nil }
	remove, err := e.AddSchedule(&Schedule{Name: "s", Next: everyMinute, Occurrence: nothing})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddSchedule(&Schedule{Name: "s", Next: everyMinute, Occurrence: nothing}); !errors.Is(err, hoppertype.ErrInvalidInput) {
		t.Fatalf("a second schedule of one name: %v, want ErrInvalidInput", err)
	}
	if got := e.CodeSchedules(); len(got) != 1 || got[0] != "s" {
		t.Fatalf("CodeSchedules = %v, want [s]", got)
	}
	remove()
	if got := e.CodeSchedules(); len(got) != 0 {
		t.Fatalf("after remove: %v, want none", got)
	}
	if _, err := e.AddSchedule(&Schedule{Name: "s", Next: everyMinute, Occurrence: nothing}); err != nil {
		t.Fatalf("the name is free again: %v", err)
	}
}
