package hopper

import (
	"testing"
	"time"
)

// TestIDFloor: ids minted at or after t sort after idFloor(t), ids minted
// before it sort before, so a listing from it reads a window's jobs only.
func TestIDFloor(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(0x0123456789ab)
	floor := idFloor(at)
	if floor != "01234567-89ab-0000-0000-000000000000" {
		t.Fatalf("idFloor = %s", floor)
	}
	lastBefore := "01234567-89aa-7fff-bfff-ffffffffffff" // the last UUIDv7 of the millisecond before
	firstAt := "01234567-89ab-7000-8000-000000000000"    // the first of t's
	if !(lastBefore < floor && floor < firstAt) {
		t.Fatalf("%s < %s < %s does not hold", lastBefore, floor, firstAt)
	}
	now := time.Now()
	if id := NewID(); !(idFloor(now.Add(-time.Minute)) < id && id < idFloor(now.Add(time.Minute))) {
		t.Fatalf("an id minted now (%s) is not between the floors of a minute ago and a minute on", id)
	}
}

// TestDecideDemand: the recommendation's formula, case by case: Little's
// law on the arrivals at 0.8 utilisation, the backlog started within what
// the pickup target leaves (60 s less the oldest due job's wait, at least
// 10 s), the service time measured by the last minute's completions before
// the ten minutes' sample, never fewer slots than run now.
func TestDecideDemand(t *testing.T) {
	t.Parallel()
	const s = time.Second
	for _, tc := range []struct {
		name           string
		in             demandIn
		run, drain     time.Duration
		slots, workers int
	}{
		{name: "nothing: a second's run guessed, nothing needed", run: s, drain: time.Minute},
		{name: "arrivals alone: 10/s × 2 s ÷ 0.8", in: demandIn{arrival: 10, windowRun: 2 * s, slotsPerWorker: 10},
			run: 2 * s, drain: time.Minute, slots: 25, workers: 3},
		{name: "exactly 10 slots stay 10", in: demandIn{arrival: 4, windowRun: 2 * s, slotsPerWorker: 10},
			run: 2 * s, drain: time.Minute, slots: 10, workers: 1},
		{name: "the last minute's completions measure the run", in: demandIn{arrival: 10, recentRun: 500 * time.Millisecond, windowRun: 2 * s, slotsPerWorker: 10},
			run: 500 * time.Millisecond, drain: time.Minute, slots: 7, workers: 1},
		{name: "a fresh backlog: 600 × 2 s ÷ 60 s", in: demandIn{due: 600, windowRun: 2 * s, slotsPerWorker: 10},
			run: 2 * s, drain: time.Minute, slots: 20, workers: 2},
		{name: "waited 30 s: started within the 30 s left", in: demandIn{due: 600, windowRun: 2 * s, oldestDue: 30 * s, slotsPerWorker: 10},
			run: 2 * s, drain: 30 * s, slots: 40, workers: 4},
		{name: "waited 45 s: 15 s left", in: demandIn{due: 600, windowRun: 2 * s, oldestDue: 45 * s, slotsPerWorker: 10},
			run: 2 * s, drain: 15 * s, slots: 80, workers: 8},
		{name: "waited 55 s: the least drain, 10 s", in: demandIn{due: 600, windowRun: 2 * s, oldestDue: 55 * s, slotsPerWorker: 10},
			run: 2 * s, drain: 10 * s, slots: 120, workers: 12},
		{name: "waited past the target: the least drain", in: demandIn{due: 600, windowRun: 2 * s, oldestDue: 5 * time.Minute, slotsPerWorker: 10},
			run: 2 * s, drain: 10 * s, slots: 120, workers: 12},
		{name: "arrivals and backlog add up", in: demandIn{arrival: 10, due: 600, recentRun: 2 * s, oldestDue: 30 * s, slotsPerWorker: 10},
			run: 2 * s, drain: 30 * s, slots: 65, workers: 7},
		{name: "one short due job still gets a slot", in: demandIn{due: 1, windowRun: time.Millisecond, slotsPerWorker: 10},
			run: time.Millisecond, drain: time.Minute, slots: 1, workers: 1},
		{name: "never fewer than run now", in: demandIn{arrival: 1, windowRun: s, running: 30, slotsPerWorker: 10},
			run: s, drain: time.Minute, slots: 30, workers: 3},
		{name: "no slots per worker counts as one", in: demandIn{due: 120, windowRun: s},
			run: s, drain: time.Minute, slots: 2, workers: 2},
		{name: "paused: nothing", in: demandIn{arrival: 10, due: 600, windowRun: 2 * s, running: 3, slotsPerWorker: 10, paused: true},
			run: 2 * s, drain: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideDemand(tc.in)
			want := demandOut{run: tc.run, drain: tc.drain, slots: tc.slots, workers: tc.workers}
			if got != want {
				t.Fatalf("decideDemand(%+v) = %+v, want %+v", tc.in, got, want)
			}
		})
	}
}
