package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// claimRun inserts a run and its job in one transaction, claims the job and
// returns its lease token.
func claimRun(t *testing.T, d *Driver, queue string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	j := newJob(queue)
	err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}}); err != nil {
			return err
		}
		return tx.RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: j.ID, Workflow: "wf", Status: hoppertype.RunPending, CreatedAt: testBase}})
	})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: queue, Limit: 1, Now: testBase,
		LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
	if err != nil || len(claimed) != 1 || claimed[0].ID != j.ID {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	return j.ID, claimed[0].LeaseToken
}

// events returns events seq from..to of attempt 1 of run.
func events(run string, attempt, from, to int) []*hoppertype.RunEvent {
	var out []*hoppertype.RunEvent
	for s := from; s <= to; s++ {
		out = append(out, &hoppertype.RunEvent{RunID: run, Attempt: attempt, Seq: s, Kind: "step", Name: fmt.Sprint("s", s),
			Data: []byte(fmt.Sprintf(`{"n":%d}`, s)), At: testBase.Add(time.Duration(s) * time.Second)})
	}
	return out
}

// seqs lists a run's history as "attempt.seq".
func seqs(t *testing.T, d driver.Executor, run string) []string {
	t.Helper()
	evs, err := d.RunEventList(context.Background(), &driver.RunEventListParams{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d.%d", e.Attempt, e.Seq))
	}
	return out
}

func TestRunEventAppendLeaseFence(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	run, token := claimRun(t, d, "fence")

	for _, tc := range []struct {
		name  string
		run   string
		token int64
		evs   []*hoppertype.RunEvent
	}{
		{"wrong token", run, token + 1, events(run, 1, 1, 1)},
		{"wrong token, many events", run, token + 1, events(run, 1, 1, 40)},
		{"wrong token, no events", run, token + 1, nil},
		{"missing job", "no-such-run", token, events("no-such-run", 1, 1, 1)},
	} {
		err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: tc.run, LeaseToken: tc.token, Events: tc.evs})
		if !errors.Is(err, hoppertype.ErrLeaseLost) {
			t.Errorf("%s: %v, want ErrLeaseLost", tc.name, err)
		}
	}
	if got := seqs(t, d.Executor(), run); len(got) != 0 {
		t.Fatalf("a fenced-off append wrote %v", got)
	}

	if err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token}); err != nil {
		t.Fatalf("no events under the lease: %v", err)
	}
	// Events may leave RunID empty: they belong to the call's run.
	evs := events("", 1, 1, 2)
	if err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token, Events: evs}); err != nil {
		t.Fatalf("append under the lease: %v", err)
	}
	if err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token,
		Events: events("other-run", 1, 3, 3)}); err == nil {
		t.Fatal("an event of another run was accepted")
	}
	got, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: run})
	if err != nil || len(got) != 2 {
		t.Fatalf("history: %v, %v", got, err)
	}
	want := events(run, 1, 1, 2)
	for i := range want {
		g, w := got[i], want[i]
		if g.RunID != w.RunID || g.Attempt != w.Attempt || g.Seq != w.Seq || g.Kind != w.Kind || g.Name != w.Name ||
			string(g.Data) != string(w.Data) || !g.At.Equal(w.At) {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}

	// Once the attempt ends, the lease is gone.
	res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{
		ID: run, LeaseToken: token, State: hoppertype.JobStateScheduled, Attempt: 1, RunAt: testBase.Add(time.Hour)}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("finish: %v, %v", res, err)
	}
	err = d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token, Events: events(run, 1, 3, 3)})
	if !errors.Is(err, hoppertype.ErrLeaseLost) {
		t.Fatalf("append after the attempt ended: %v, want ErrLeaseLost", err)
	}
	if got := seqs(t, d.Executor(), run); !slices.Equal(got, []string{"1.1", "1.2"}) {
		t.Fatalf("history %v", got)
	}
}

func TestRunEventAppendDuplicateWritesNothing(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	run, token := claimRun(t, d, "dup")
	appendEvs := func(ex driver.Executor, evs []*hoppertype.RunEvent) error {
		return ex.RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token, Events: evs})
	}
	if err := appendEvs(d.Executor(), events(run, 1, 1, 3)); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]*hoppertype.RunEvent{
		"existing seq alone":               events(run, 1, 2, 2),
		"existing seq after new ones":      append(events(run, 1, 4, 5), events(run, 1, 3, 3)...),
		"existing seq in a later chunk":    append(events(run, 1, 4, 40), events(run, 1, 1, 1)...), // 37 = 32 + 4 + 1
		"the same seq twice in one call":   append(events(run, 1, 4, 6), events(run, 1, 5, 5)...),
		"the same seq twice, across chunk": append(events(run, 1, 4, 36), events(run, 1, 4, 4)...),
	}
	for name, evs := range cases {
		if err := appendEvs(d.Executor(), evs); !errors.Is(err, hoppertype.ErrDuplicateID) {
			t.Errorf("%s: %v, want ErrDuplicateID", name, err)
		}
		// Inside a transaction that goes on after the error, the failed
		// call alone is undone.
		j := newJob("dup-other")
		err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
			if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*hoppertype.JobRow{j}}); err != nil {
				return err
			}
			if err := appendEvs(tx, evs); !errors.Is(err, hoppertype.ErrDuplicateID) {
				return fmt.Errorf("in tx: %v, want ErrDuplicateID", err)
			}
			if got := seqs(t, tx, run); !slices.Equal(got, []string{"1.1", "1.2", "1.3"}) {
				return fmt.Errorf("in tx, history after the failed append: %v", got)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID}); err != nil {
			t.Errorf("%s: the transaction's other write was lost: %v", name, err)
		}
	}
	if got := seqs(t, d.Executor(), run); !slices.Equal(got, []string{"1.1", "1.2", "1.3"}) {
		t.Fatalf("history after failed appends: %v", got)
	}

	// A second attempt starts its own sequence; listing orders by
	// (attempt, seq) and filters by attempt.
	if err := appendEvs(d.Executor(), append(events(run, 2, 1, 2), events(run, 1, 4, 4)...)); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, d.Executor(), run); !slices.Equal(got, []string{"1.1", "1.2", "1.3", "1.4", "2.1", "2.2"}) {
		t.Fatalf("history %v", got)
	}
	evs, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: run, Attempt: 2})
	if err != nil || len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[0].Attempt != 2 {
		t.Fatalf("attempt 2: %v, %v", evs, err)
	}
	if evs, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: "none"}); err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("history of an unknown run: %#v, %v", evs, err)
	}
}

func TestEventAndChunkBytesRoundTrip(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	run, token := claimRun(t, d, "bytes")
	evs := []*hoppertype.RunEvent{
		{RunID: run, Attempt: 1, Seq: 1, Kind: "k", At: testBase},
		{RunID: run, Attempt: 1, Seq: 2, Kind: "k", Data: []byte{}, At: testBase},
	}
	if err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token, Events: evs}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Executor().RunEventList(ctx, &driver.RunEventListParams{RunID: run})
	if err != nil || len(got) != 2 || got[0].Data != nil || got[1].Data == nil || len(got[1].Data) != 0 {
		t.Fatalf("nil and empty data: %#v, %v", got, err)
	}
	if _, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: run, Chunks: [][]byte{nil, {}, {0, 1, 0xff}}, Now: testBase}); err != nil {
		t.Fatal(err)
	}
	cs, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: run, Limit: 10})
	if err != nil || len(cs) != 3 || cs[0].Data != nil || cs[1].Data == nil || len(cs[1].Data) != 0 || string(cs[2].Data) != "\x00\x01\xff" {
		t.Fatalf("chunks: %#v, %v", cs, err)
	}
}

func TestStreamOffsets(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	appendN := func(ex driver.Executor, run string, n int) []*hoppertype.StreamChunk {
		t.Helper()
		chunks := make([][]byte, n)
		for i := range chunks {
			chunks[i] = []byte(fmt.Sprint(i))
		}
		out, err := ex.StreamAppend(ctx, &driver.StreamAppendParams{RunID: run, Chunks: chunks, Now: testBase})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	offsets := func(cs []*hoppertype.StreamChunk) []int64 {
		out := []int64{}
		for _, c := range cs {
			out = append(out, c.Offset)
		}
		return out
	}
	if got := offsets(appendN(d.Executor(), "a", 3)); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("first append: %v", got)
	}
	if got := appendN(d.Executor(), "a", 0); got == nil || len(got) != 0 {
		t.Fatalf("empty append: %#v", got)
	}
	got := appendN(d.Executor(), "a", 40)
	if got[0].Offset != 3 || got[39].Offset != 42 || got[0].RunID != "a" || !got[0].At.Equal(testBase) {
		t.Fatalf("second append: %v ... %v", got[0], got[39])
	}
	if got := offsets(appendN(d.Executor(), "b", 2)); !slices.Equal(got, []int64{0, 1}) {
		t.Fatalf("another run: %v", got)
	}
	// Two appends in one transaction see each other.
	err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		if got := offsets(appendN(tx, "b", 1)); !slices.Equal(got, []int64{2}) {
			return fmt.Errorf("in tx: %v", got)
		}
		if got := offsets(appendN(tx, "b", 2)); !slices.Equal(got, []int64{3, 4}) {
			return fmt.Errorf("in tx: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Concurrent appends get consecutive, distinct offsets.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 5 {
				if _, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: "c", Chunks: [][]byte{{1}, {2}, {3}}, Now: testBase}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	all, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: "c", Limit: 1000})
	if err != nil || len(all) != 16*5*3 {
		t.Fatalf("concurrent appends: %d chunks, %v", len(all), err)
	}
	for i, c := range all {
		if c.Offset != int64(i) {
			t.Fatalf("chunk %d has offset %d", i, c.Offset)
		}
	}

	page, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: "a", From: 10, Limit: 5})
	if err != nil || !slices.Equal(offsets(page), []int64{10, 11, 12, 13, 14}) || string(page[0].Data) != "7" {
		t.Fatalf("read from 10: %v, %v", offsets(page), err)
	}
	if page, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: "a", From: 43, Limit: 5}); err != nil || page == nil || len(page) != 0 {
		t.Fatalf("read past the end: %#v, %v", page, err)
	}
	if _, err := d.Executor().StreamRead(ctx, &driver.StreamReadParams{RunID: "a"}); err == nil {
		t.Fatal("read with no limit accepted")
	}
}

func TestJobWake(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	later := testBase.Add(time.Hour)
	mk := func(state hoppertype.JobState) *hoppertype.JobRow {
		j := newJob("wake")
		j.State, j.RunAt = state, later
		if state.Terminal() {
			j.EndedAt = testBase
		}
		return j
	}
	sched, retrying, pending, succeeded, stuck := mk(hoppertype.JobStateScheduled), mk(hoppertype.JobStateRetrying),
		mk(hoppertype.JobStatePending), mk(hoppertype.JobStateSucceeded), mk(hoppertype.JobStateStuck)
	running := mk(hoppertype.JobStatePending)
	running.RunAt = testBase
	insert(t, d.Executor(), running)
	if _, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "wake", Limit: 1, Now: testBase, LeaseExpiresAt: later, Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	insert(t, d.Executor(), sched, retrying, pending, succeeded, stuck)
	before, _ := d.Executor().JobGetMany(ctx, &driver.JobGetManyParams{IDs: []string{running.ID, pending.ID, succeeded.ID, stuck.ID}})

	now := testBase.Add(time.Minute + 1500*time.Nanosecond)
	ids := []string{retrying.ID, "missing", running.ID, pending.ID, sched.ID, succeeded.ID, stuck.ID, retrying.ID}
	woke, err := d.Executor().JobWake(ctx, &driver.JobWakeParams{IDs: ids, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(woke) != 2 || woke[0].ID != retrying.ID || woke[1].ID != sched.ID {
		t.Fatalf("woke %v", woke)
	}
	for _, j := range woke {
		if j.State != hoppertype.JobStatePending || !j.RunAt.Equal(now.Truncate(time.Microsecond)) {
			t.Errorf("woken job %s: state %s run at %v", j.ID, j.State, j.RunAt)
		}
		stored, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
		if err != nil || stored.State != hoppertype.JobStatePending || !stored.RunAt.Equal(j.RunAt) {
			t.Errorf("stored woken job %s: %+v, %v", j.ID, stored, err)
		}
	}
	after, _ := d.Executor().JobGetMany(ctx, &driver.JobGetManyParams{IDs: []string{running.ID, pending.ID, succeeded.ID, stuck.ID}})
	for i := range before {
		if before[i].State != after[i].State || !before[i].RunAt.Equal(after[i].RunAt) {
			t.Errorf("job %s in state %s changed: %+v", before[i].ID, before[i].State, after[i])
		}
	}
	if woke, err := d.Executor().JobWake(ctx, &driver.JobWakeParams{IDs: ids, Now: now}); err != nil || woke == nil || len(woke) != 0 {
		t.Fatalf("second wake: %#v, %v", woke, err)
	}
	if woke, err := d.Executor().JobWake(ctx, &driver.JobWakeParams{Now: now}); err != nil || woke == nil || len(woke) != 0 {
		t.Fatalf("wake of nothing: %#v, %v", woke, err)
	}
	// The woken jobs are claimable now, beside the one that was pending.
	claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "wake", Limit: 10, Now: now, LeaseExpiresAt: later, Worker: "w"})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim after wake: %v, %v", claimed, err)
	}
}

func TestRunInsertGetUpdate(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	row := &hoppertype.RunRow{ID: "r1", Workflow: "wf", Status: hoppertype.RunPending, ParentID: "p",
		CodeVersion: "v3", CreatedAt: testBase.Add(1500 * time.Nanosecond)}
	if err := d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: row}); err != nil {
		t.Fatal(err)
	}
	if err := d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: row}); !errors.Is(err, hoppertype.ErrDuplicateID) {
		t.Fatalf("second insert: %v", err)
	}
	got, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: "r1"})
	if err != nil || got.Workflow != "wf" || got.Status != hoppertype.RunPending || got.ParentID != "p" || got.CodeVersion != "v3" ||
		!got.CreatedAt.Equal(testBase.Add(time.Microsecond)) || !got.UpdatedAt.IsZero() || !got.EndedAt.IsZero() || got.Error != nil {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if _, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: "nope"}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "nope", Status: hoppertype.RunRunning, Now: testBase}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	if _, err := d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "nope", Status: hoppertype.RunRunning, Now: testBase,
		ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunPending}}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("update missing with expectation: %v", err)
	}
	t1 := testBase.Add(time.Second)
	got, err = d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "r1", Status: hoppertype.RunRunning, Now: t1,
		ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunPending, hoppertype.RunWaiting}})
	if err != nil || got.Status != hoppertype.RunRunning || !got.UpdatedAt.Equal(t1) || got.Workflow != "wf" {
		t.Fatalf("update: %+v, %v", got, err)
	}
	cur, err := d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "r1", Status: hoppertype.RunCompleted, Now: t1.Add(time.Second),
		ExpectStatuses: []hoppertype.RunStatus{hoppertype.RunPending}})
	if !errors.Is(err, hoppertype.ErrStateConflict) || cur == nil || cur.Status != hoppertype.RunRunning || !cur.UpdatedAt.Equal(t1) {
		t.Fatalf("update with a failed expectation: %+v, %v", cur, err)
	}
	t2 := t1.Add(2 * time.Second)
	e := &hoppertype.ErrorInfo{Message: "boom", At: t2}
	got, err = d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "r1", Status: hoppertype.RunFailed, Error: e, EndedAt: t2, Now: t2})
	if err != nil || got.Status != hoppertype.RunFailed || got.Error == nil || got.Error.Message != "boom" || !got.EndedAt.Equal(t2) {
		t.Fatalf("fail: %+v, %v", got, err)
	}
	// Without Error and EndedAt they are kept.
	got, err = d.Executor().RunUpdate(ctx, &driver.RunUpdateParams{ID: "r1", Status: hoppertype.RunCompensating, Now: t2.Add(time.Second)})
	if err != nil || got.Error == nil || got.Error.Message != "boom" || !got.EndedAt.Equal(t2) || got.Status != hoppertype.RunCompensating {
		t.Fatalf("update keeping error and end: %+v, %v", got, err)
	}
	if stored, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: "r1"}); err != nil || stored.Status != hoppertype.RunCompensating || stored.Error.Message != "boom" {
		t.Fatalf("stored: %+v, %v", stored, err)
	}
	// A run without a parent stores none.
	if err := d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: "r2", Workflow: "wf", Status: hoppertype.RunPending, CreatedAt: testBase}}); err != nil {
		t.Fatal(err)
	}
	var parent sql.NullString
	if err := d.rdb.QueryRow(`SELECT parent_id FROM runs WHERE id = 'r2'`).Scan(&parent); err != nil || parent.Valid {
		t.Fatalf("parent of a top-level run: %v, %v", parent, err)
	}
}

func TestRunList(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	statuses := []hoppertype.RunStatus{hoppertype.RunPending, hoppertype.RunRunning, hoppertype.RunCompleted}
	for i := range 12 {
		row := &hoppertype.RunRow{ID: fmt.Sprintf("r%02d", i), Workflow: fmt.Sprint("wf", i%2), Status: statuses[i%3],
			CreatedAt: testBase.Add(time.Duration(i/2) * time.Second)} // pairs share a creation time
		if i%4 == 0 {
			row.ParentID = "parent"
		}
		if err := d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: row}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(p driver.RunListParams) []string {
		t.Helper()
		rows, err := d.Executor().RunList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("all", ids(driver.RunListParams{Limit: 100}), "r11", "r10", "r09", "r08", "r07", "r06", "r05", "r04", "r03", "r02", "r01", "r00")
	check("page", ids(driver.RunListParams{Limit: 3, Offset: 2}), "r09", "r08", "r07")
	check("status", ids(driver.RunListParams{Limit: 100, Statuses: []hoppertype.RunStatus{hoppertype.RunCompleted}}), "r11", "r08", "r05", "r02")
	check("statuses", ids(driver.RunListParams{Limit: 100, Statuses: []hoppertype.RunStatus{hoppertype.RunCompleted, hoppertype.RunPending}}),
		"r11", "r09", "r08", "r06", "r05", "r03", "r02", "r00")
	check("workflow", ids(driver.RunListParams{Limit: 100, Workflow: "wf1"}), "r11", "r09", "r07", "r05", "r03", "r01")
	check("parent", ids(driver.RunListParams{Limit: 100, ParentID: "parent"}), "r08", "r04", "r00")
	check("created range", ids(driver.RunListParams{Limit: 100, CreatedAfter: testBase.Add(2 * time.Second), CreatedBefore: testBase.Add(4 * time.Second)}),
		"r07", "r06", "r05", "r04")
	check("combined", ids(driver.RunListParams{Limit: 100, Workflow: "wf0", Statuses: []hoppertype.RunStatus{hoppertype.RunPending}}), "r06", "r00")
	check("past the end", ids(driver.RunListParams{Limit: 10, Offset: 12}))
	if _, err := d.Executor().RunList(ctx, &driver.RunListParams{}); err == nil {
		t.Error("list with no limit accepted")
	}
}

func TestHooks(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	for i, tok := range []string{"t-c", "t-a", "t-b"} {
		created := testBase
		if i == 0 {
			created = testBase.Add(-time.Second)
		}
		h := &hoppertype.HookRow{Token: tok, RunID: "run", Name: "approve", State: hoppertype.HookWaiting, CreatedAt: created}
		if err := d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: h}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: "t-a", RunID: "other", CreatedAt: testBase}}); !errors.Is(err, hoppertype.ErrDuplicateID) {
		t.Fatalf("duplicate token: %v", err)
	}
	if err := d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: "t-other", RunID: "other", CreatedAt: testBase}}); err != nil {
		t.Fatal(err)
	}
	if h, err := d.Executor().HookGet(ctx, &driver.HookGetParams{Token: "t-other"}); err != nil || h.State != hoppertype.HookWaiting || h.Payload != nil || !h.ResumedAt.IsZero() {
		t.Fatalf("hook inserted without a state: %+v, %v", h, err)
	}
	list, err := d.Executor().HookListByRun(ctx, &driver.HookListByRunParams{RunID: "run"})
	if err != nil || len(list) != 3 || list[0].Token != "t-c" || list[1].Token != "t-a" || list[2].Token != "t-b" {
		t.Fatalf("list: %v, %v", list, err)
	}
	if _, err := d.Executor().HookGet(ctx, &driver.HookGetParams{Token: "nope"}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := d.Executor().HookResume(ctx, &driver.HookResumeParams{Token: "nope", Now: testBase}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("resume missing: %v", err)
	}
	now := testBase.Add(time.Minute)
	h, err := d.Executor().HookResume(ctx, &driver.HookResumeParams{Token: "t-a", Payload: []byte(`{"ok":true}`), Now: now})
	if err != nil || h.State != hoppertype.HookResumed || string(h.Payload) != `{"ok":true}` || !h.ResumedAt.Equal(now) ||
		h.RunID != "run" || h.Name != "approve" || !h.CreatedAt.Equal(testBase) {
		t.Fatalf("resume: %+v, %v", h, err)
	}
	again, err := d.Executor().HookResume(ctx, &driver.HookResumeParams{Token: "t-a", Payload: []byte(`{"ok":false}`), Now: now.Add(time.Second)})
	if !errors.Is(err, hoppertype.ErrStateConflict) || again == nil || string(again.Payload) != `{"ok":true}` || !again.ResumedAt.Equal(now) {
		t.Fatalf("second resume: %+v, %v", again, err)
	}
	if got, err := d.Executor().HookGet(ctx, &driver.HookGetParams{Token: "t-a"}); err != nil || string(got.Payload) != `{"ok":true}` || got.State != hoppertype.HookResumed {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if list, err := d.Executor().HookListByRun(ctx, &driver.HookListByRunParams{RunID: "none"}); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("hooks of an unknown run: %#v, %v", list, err)
	}
}

// workflowRows counts the rows of run in each workflow table.
func workflowRows(t *testing.T, d *Driver, run string) string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT count(*) FROM jobs WHERE id = ?`,
		`SELECT count(*) FROM runs WHERE id = ?`,
		`SELECT count(*) FROM run_events WHERE run_id = ?`,
		`SELECT count(*) FROM hooks WHERE run_id = ?`,
		`SELECT count(*) FROM stream_chunks WHERE run_id = ?`,
	} {
		var n int
		if err := d.rdb.QueryRow(q, run).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(n))
	}
	return strings.Join(out, " ")
}

func TestJobDeleteFinishedTakesRunRows(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	// Three runs with history, hooks and streams; the first two finish.
	var runs []string
	for i := range 3 {
		run, token := claimRun(t, d, fmt.Sprint("del", i))
		runs = append(runs, run)
		if err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: run, LeaseToken: token, Events: events(run, 1, 1, 3)}); err != nil {
			t.Fatal(err)
		}
		for k := range 2 {
			if err := d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: fmt.Sprint(run, "-", k), RunID: run, CreatedAt: testBase}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: run, Chunks: [][]byte{{1}, {2}, {3}, {4}}, Now: testBase}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			res, err := d.Executor().JobFinishMany(ctx, &driver.JobFinishManyParams{Items: []driver.JobFinishParams{{ID: run, LeaseToken: token,
				State: hoppertype.JobStateSucceeded, Attempt: 1, RunAt: testBase, EndedAt: testBase.Add(time.Duration(i) * time.Second)}}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("finish: %v, %v", res, err)
			}
		}
	}
	plain := newJob("plain")
	plain.State, plain.EndedAt = hoppertype.JobStateSucceeded, testBase
	insert(t, d.Executor(), plain)
	for _, run := range runs {
		if got := workflowRows(t, d, run); got != "1 1 3 2 4" {
			t.Fatalf("run %s before: %s", run, got)
		}
	}

	// A transaction that fails after the delete keeps everything.
	boom := errors.New("boom")
	err := d.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		n, err := tx.JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{Before: testBase.Add(time.Hour)})
		if err != nil || n != 3 {
			return fmt.Errorf("delete in tx: %d, %v", n, err)
		}
		if _, err := tx.RunGet(ctx, &driver.RunGetParams{ID: runs[0]}); !errors.Is(err, hoppertype.ErrNotFound) {
			return fmt.Errorf("run after delete in tx: %v", err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := workflowRows(t, d, runs[0]); got != "1 1 3 2 4" {
		t.Fatalf("rolled-back delete: %s", got)
	}

	// Only the oldest finished job, a run, goes first (Limit 1).
	n, err := d.Executor().JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{Before: testBase.Add(500 * time.Millisecond), Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if got := workflowRows(t, d, runs[0]); got != "0 0 0 0 0" {
		t.Fatalf("deleted run left %s", got)
	}
	if got := workflowRows(t, d, runs[1]); got != "1 1 3 2 4" {
		t.Fatalf("a run that was not due lost rows: %s", got)
	}
	n, err = d.Executor().JobDeleteFinished(ctx, &driver.JobDeleteFinishedParams{Before: testBase.Add(time.Hour)})
	if err != nil || n != 2 {
		t.Fatalf("delete the rest: %d, %v", n, err)
	}
	if got := workflowRows(t, d, runs[1]); got != "0 0 0 0 0" {
		t.Fatalf("deleted run left %s", got)
	}
	if got := workflowRows(t, d, runs[2]); got != "1 1 3 2 4" {
		t.Fatalf("a running run lost rows: %s", got)
	}
	if _, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: plain.ID}); !errors.Is(err, hoppertype.ErrNotFound) {
		t.Fatalf("plain job: %v", err)
	}
}

// createVersion1 builds a database at schema version 1 with the SQL of
// migration 1 alone, as a binary from before workflows left it, holding one
// job.
func createVersion1(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if migrations[0].Version != 1 {
		t.Fatal("migration 1 is not first")
	}
	for _, q := range []string{createVersionTable, migrations[0].SQL} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO hopper_migrations (version, name, applied_at) VALUES (1, ?, 0)`, migrations[0].Name); err != nil {
		t.Fatal(err)
	}
	const id = "old-job"
	if _, err := db.Exec(`INSERT INTO jobs (id, type, queue, state, retry, queued_at, run_at) VALUES (?, 't', 'v1', 'pending', '{}', ?, ?)`,
		id, testBase.UnixMicro(), testBase.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if latestVersion() < 2 {
		t.Fatalf("latest version %d", latestVersion())
	}
	check := func(d *Driver, oldJob string) {
		t.Helper()
		stored, known, err := d.SchemaVersion(ctx)
		if err != nil || stored != known || stored != latestVersion() {
			t.Fatalf("after upgrade: version %d of %d, %v", stored, known, err)
		}
		var applied []int
		rows, err := d.rdb.Query(`SELECT version FROM hopper_migrations ORDER BY version`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v int
			rows.Scan(&v)
			applied = append(applied, v)
		}
		rows.Close()
		if len(applied) != latestVersion() || applied[0] != 1 || applied[1] != 2 {
			t.Fatalf("applied migrations %v", applied)
		}
		if j, err := d.Executor().JobGet(ctx, &driver.JobGetParams{ID: oldJob}); err != nil || j.Queue != "v1" {
			t.Fatalf("the version-1 job: %+v, %v", j, err)
		}
		// The upgraded database works for workflows, prepared statements
		// or not.
		claimed, err := d.Executor().JobClaim(ctx, &driver.JobClaimParams{Queue: "v1", Limit: 1, Now: testBase, LeaseExpiresAt: testBase.Add(time.Minute), Worker: "w"})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %v", claimed, err)
		}
		if err := d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: oldJob, Workflow: "wf", Status: hoppertype.RunRunning, CreatedAt: testBase}}); err != nil {
			t.Fatal(err)
		}
		if err := d.Executor().RunEventAppend(ctx, &driver.RunEventAppendParams{RunID: oldJob, LeaseToken: claimed[0].LeaseToken, Events: events(oldJob, 1, 1, 3)}); err != nil {
			t.Fatal(err)
		}
		if err := d.Executor().HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: "tok", RunID: oldJob, CreatedAt: testBase}}); err != nil {
			t.Fatal(err)
		}
		if cs, err := d.Executor().StreamAppend(ctx, &driver.StreamAppendParams{RunID: oldJob, Chunks: [][]byte{{1}}, Now: testBase}); err != nil || cs[0].Offset != 0 {
			t.Fatalf("stream: %v, %v", cs, err)
		}
		if got := workflowRows(t, d, oldJob); got != "1 1 3 1 1" {
			t.Fatalf("workflow rows %s", got)
		}
	}

	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "hopper.db")
		oldJob := createVersion1(t, path)
		check(openAt(t, path, &Options{Synchronous: "NORMAL"}), oldJob)
	})

	t.Run("NoMigrate then Migrate", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "hopper.db")
		oldJob := createVersion1(t, path)
		d := openAt(t, path, &Options{Synchronous: "NORMAL", NoMigrate: true})
		if stored, _, err := d.SchemaVersion(ctx); err != nil || stored != 1 {
			t.Fatalf("version before migrating: %d, %v", stored, err)
		}
		err := d.Executor().RunInsert(ctx, &driver.RunInsertParams{Row: &hoppertype.RunRow{ID: "x", Workflow: "wf", CreatedAt: testBase}})
		if err == nil || !strings.Contains(err.Error(), "version 1") {
			t.Fatalf("workflow write on a version-1 database: %v", err)
		}
		if _, err := d.Executor().RunGet(ctx, &driver.RunGetParams{ID: "x"}); err == nil || !strings.Contains(err.Error(), "version 1") {
			t.Fatalf("workflow read on a version-1 database: %v", err)
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		check(d, oldJob)
	})
}
