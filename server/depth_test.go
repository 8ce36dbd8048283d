package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver/memdriver"
	"github.com/hopper-go/hopper/hoppertest"
	"github.com/hopper-go/hopper/server"
)

// TestMetricsQueueDepth: /metrics exports each queue's depth by state and
// the age of its oldest due job, on the client's clock, and no longer the
// count of every job (hopper_queue_jobs); GET /v1/queues and the
// dashboard's overview show the same depths.
func TestMetricsQueueDepth(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	clk := hoppertest.NewClock(t0)
	d := memdriver.New(memdriver.WithClock(clk.Now))
	t.Cleanup(func() { _ = d.Close() })
	// The client enqueues and works nothing.
	c, err := hopper.New(hopper.Config{Driver: d, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := server.New(c, &server.Options{Tokens: []string{token}})
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})

	send := hopper.Define("send", func(context.Context, int) (int, error) { return 0, nil }, nil)
	_, err = c.EnqueueMany(t.Context(), send.Job(1, &hopper.InsertOpts{Queue: "mail"}), send.Job(2, &hopper.InsertOpts{Queue: "mail"}),
		send.Job(3, &hopper.InsertOpts{Queue: "mail", Delay: time.Hour}))
	require.NoError(t, err)
	clk.AdvanceTo(t0.Add(90 * time.Second))

	req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, line := range []string{
		`hopper_queue_depth{queue="mail",state="due"} 2`,
		`hopper_queue_depth{queue="mail",state="delayed"} 1`,
		`hopper_queue_depth{queue="mail",state="running"} 0`,
		`hopper_queue_oldest_due_age_seconds{queue="mail"} 90`,
		`hopper_queue_depth{queue="default",state="due"} 0`,
		`hopper_queue_oldest_due_age_seconds{queue="default"} 0`,
		`hopper_queue_due_jobs{queue="mail"} 2`,
		`hopper_store_up 1`,
	} {
		require.Contains(t, string(body), line+"\n")
	}
	require.NotContains(t, string(body), "hopper_queue_jobs")

	// GET /v1/queues gives the same depths, and the counts of every state
	// only when asked for.
	e := &env{t: t, c: c, url: ts.URL, srv: s}
	var qs struct {
		Queues   []server.QueueJSON `json:"queues"`
		DepthCap int                `json:"depth_cap"`
	}
	require.Equal(t, 200, e.do("GET", "/v1/queues", "", &qs))
	require.Equal(t, hopper.QueueDepthCap, qs.DepthCap)
	require.Len(t, qs.Queues, 2)
	mail := qs.Queues[1]
	require.Equal(t, "mail", mail.Name)
	at := t0.UTC()
	require.Equal(t, server.QueueDepthJSON{Due: 2, Delayed: 1, OldestDueAt: &at, OldestDueAge: int64(90 * time.Second)}, mail.Depth)
	require.Nil(t, mail.Counts)
	require.Equal(t, 200, e.do("GET", "/v1/queues?counts=true", "", &qs))
	require.Equal(t, map[string]int{"pending": 2, "scheduled": 1}, qs.Queues[1].Counts)
	require.Equal(t, 2, qs.Queues[1].Depth.Due)
	require.Equal(t, 400, e.do("GET", "/v1/queues?counts=maybe", "", nil))

	// The dashboard's overview shows the depths.
	code, page := e.page("/")
	require.Equal(t, 200, code)
	require.Contains(t, page, `<td>mail</td><td class="num">2</td><td class="num">1</td><td class="num">0</td><td><span title="due since 2030-01-01 09:00:00.000 UTC">2 min</span></td>`)
}
