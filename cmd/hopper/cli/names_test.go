package cli

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/sqlitedriver"
	"github.com/hopper-go/hopper/server"
)

// sharedStore is a SQLite file with a started client that registers the
// add example (a worker process, as far as the store knows) and a server
// over it: a command can reach the same store with --db and with
// --server.
type sharedStore struct {
	db, url string
	c       *hopper.Client
}

func newSharedStore(t *testing.T, ctx context.Context, types ...hopper.AnyType) *sharedStore {
	t.Helper()
	return newSharedStoreWith(t, ctx, nil, types...)
}

// newSharedStoreWith is newSharedStore with setup run on the client
// before it starts (to register schedules its worker row reports).
func newSharedStoreWith(t *testing.T, ctx context.Context, setup func(c *hopper.Client) error, types ...hopper.AnyType) *sharedStore {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared.db")
	d, err := sqlitedriver.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(types...); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		if err := setup(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	srv := server.New(c, nil)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return &sharedStore{db: "sqlite://" + path, url: hs.URL, c: c}
}

// ways are the two ways a command reaches a store.
func (s *sharedStore) ways() map[string][]string {
	return map[string][]string{"db": {"--db", s.db}, "server": {"--server", s.url}}
}

// TestUnknownNamesRefused: pausing a queue or schedule nothing has used,
// or defining a schedule of a type no worker registers, is refused with a
// message that lists what is known and names the flag that goes ahead
// (--create, --force), through the database and through a server; nothing
// is stored until the flag is given.
func TestUnknownNamesRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newSharedStore(t, ctx, exampleAdd)
	for way, flags := range s.ways() {
		t.Run(way, func(t *testing.T) {
			cli := func(args ...string) (string, string, int) { return run(t, append(args, flags...)...) }
			queue, sched := "nosuch-"+way, "typo-"+way
			for _, c := range []struct {
				args []string
				want []string
			}{
				{[]string{"queues", "pause", queue}, []string{`unknown queue "` + queue + `"`, "known: default", "--create"}},
				{[]string{"queues", "resume", queue}, []string{`unknown queue "` + queue + `"`}},
				{[]string{"schedules", "pause", sched}, []string{`unknown schedule "` + sched + `"`, "--create"}},
				{[]string{"schedules", "resume", sched}, []string{`unknown schedule "` + sched + `"`}},
				{[]string{"schedules", "define", "s-" + way, "--cron", "@daily", "--type", "ad"}, []string{`job type "ad"`, "registered: add", "--force"}},
				{[]string{"schedules", "define", "s-" + way, "--cron", "@daily", "--workflow", "add"}, []string{`workflow "add"`, "--force"}},
			} {
				_, errOut, code := cli(c.args...)
				if code == 0 {
					t.Errorf("%v: accepted", c.args)
				}
				for _, w := range c.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("%v: stderr %q lacks %q", c.args, errOut, w)
					}
				}
				if strings.Contains(errOut, "?create") || strings.Contains(errOut, "?force") {
					t.Errorf("%v: stderr %q names the HTTP parameter, not the flag", c.args, errOut)
				}
			}
			if out, _, _ := cli("queues", "list", "--json"); strings.Contains(out, queue) {
				t.Errorf("a refused pause stored the queue: %s", out)
			}
			if out, _, _ := cli("schedules", "--json"); strings.Contains(out, sched) || strings.Contains(out, "s-"+way) {
				t.Errorf("a refused command stored a schedule: %s", out)
			}

			for _, args := range [][]string{
				{"queues", "pause", queue, "--create"}, {"queues", "resume", queue},
				{"queues", "pause", "default"}, {"queues", "resume", "default"},
				{"schedules", "pause", sched, "--create"}, {"schedules", "resume", sched},
				{"schedules", "define", "s-" + way, "--cron", "@daily", "--type", "ad", "--force"},
				{"schedules", "define", "t-" + way, "--cron", "@daily", "--type", "add", "--input", `{"a":1,"b":2}`},
			} {
				if _, errOut, code := cli(args...); code != 0 {
					t.Errorf("%v: %d %q", args, code, errOut)
				}
			}
		})
	}
}
