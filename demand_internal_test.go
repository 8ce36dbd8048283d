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
