package sqlitedriver

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/hopper-go/hopper/driver"
)

// receive waits for one payload on sub, failing the test after a deadline.
func receive(t *testing.T, sub driver.Subscription, what string) string {
	t.Helper()
	select {
	case p, ok := <-sub.C():
		if !ok {
			t.Fatalf("%s: subscription closed", what)
		}
		return p
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no notification", what)
		return ""
	}
}

func TestNotifyAcrossDriversOnOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hopper.db")
	d1, err := Open(path, &Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	d2 := openAt(t, path, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	sub, err := d2.Listen(ctx, "topic")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	if err := d1.Executor().Notify(ctx, &driver.NotifyParams{Topic: "topic", Payload: "direct"}); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, sub, "Notify on the other Driver"); p != "direct" {
		t.Fatalf("got %q", p)
	}
	if err := d1.Executor().InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		return tx.Notify(ctx, &driver.NotifyParams{Topic: "topic", Payload: "in-tx"})
	}); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, sub, "Notify in a transaction of the other Driver"); p != "in-tx" {
		t.Fatalf("got %q", p)
	}

	// Closing one Driver leaves the other's subscriptions alone.
	d1.Close()
	if err := d2.Executor().Notify(ctx, &driver.NotifyParams{Topic: "topic", Payload: "still here"}); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, sub, "after the other Driver closed"); p != "still here" {
		t.Fatalf("got %q", p)
	}
	d2.Close()
	if _, ok := <-sub.C(); ok {
		t.Fatal("subscription still open after its Driver closed")
	}
	hubs.mu.Lock()
	_, held := hubs.m[d2.Path()]
	hubs.mu.Unlock()
	if held {
		t.Fatal("broker of a file with no open Driver is still registered")
	}
}

func TestDataVersionWakesOnForeignCommit(t *testing.T) {
	t.Parallel()
	d := openTemp(t, &Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	topics := []string{driver.TopicJobAvailable, driver.TopicJobDone, driver.TopicGroupDone}
	var subs []driver.Subscription
	for _, topic := range topics {
		sub, err := d.Listen(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs = append(subs, sub)
	}

	// The Driver's own commits do not wake anyone through data_version: the
	// first payload after them is the marker sent afterwards.
	insert(t, d.Executor(), newJob("q"))
	if err := d.Executor().InTx(ctx, func(context.Context, driver.Executor) error { return nil }); err != nil {
		t.Fatal(err) // the writer has checked data_version after the insert by now
	}
	if err := d.Executor().Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: "marker"}); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, subs[0], "marker"); p != "marker" {
		t.Fatalf("own commit produced a data_version wake-up (%q)", p)
	}

	// A commit by another connection (another process, say) wakes every
	// topic with an empty payload.
	other, err := sql.Open("sqlite", d.Path()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec(`INSERT INTO keys (key, value) VALUES ('from-elsewhere', x'')`); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		if p := receive(t, sub, "data_version wake-up on "+topics[i]); p != "" {
			t.Fatalf("%s: payload %q, want empty", topics[i], p)
		}
	}
}
