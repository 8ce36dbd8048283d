package hopper_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/driver"
)

// TestWorkflowFetch: Fetch is a recorded step (a replay does not request
// again), retries 5xx, returns 4xx as a response, and refuses the internal
// network unless allowed.
func TestWorkflowFetch(t *testing.T) { forEachDriver(t, testWorkflowFetch) }

func testWorkflowFetch(t *testing.T, newDriver func(*testing.T) driver.Driver) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		switch {
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		case n == 1: // the first try fails
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"price":%d,"key":%q}`, 42, r.Header.Get("Idempotency-Key"))
		}
	}))
	defer srv.Close()

	type quote struct {
		Price int    `json:"price"`
		Key   string `json:"key"`
	}
	wf := hopper.Workflow("quote", func(wf hopper.WorkflowContext, _ hopper.None) (quote, error) {
		resp, err := hopper.Fetch(wf, "price", &hopper.FetchRequest{URL: srv.URL + "/price",
			Header: http.Header{"Idempotency-Key": {wf.RunID() + "/price"}}},
			&hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Millisecond, Jitter: hopper.NoJitter}})
		if err != nil {
			return quote{}, err
		}
		missing, err := hopper.Fetch(wf, "missing", &hopper.FetchRequest{URL: srv.URL + "/missing"}, nil)
		if err != nil {
			return quote{}, err
		}
		if missing.Status != http.StatusNotFound {
			return quote{}, fmt.Errorf("status %d", missing.Status)
		}
		if err := wf.Sleep(50 * time.Millisecond); err != nil { // the run suspends, then replays
			return quote{}, err
		}
		var q quote
		return q, resp.JSON(&q)
	}, nil)
	// (The real clock: a step's retry backoff waits on the client's clock.)
	c := newClient(t, hopper.Config{Driver: newDriver(t), FetchAllowPrivate: true})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	q, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, quote{Price: 42, Key: h.ID() + "/price"}, q)
	require.EqualValues(t, 3, hits.Load(), "a 503, the price, the 404; the replay after the sleep requested nothing")
	info, err := c.RunGet(ctx, h.ID())
	require.NoError(t, err)
	require.Equal(t, 2, info.Steps[0].Attempts, "the 503 was retried")

	// By default the internal network is refused, at once and for good.
	strict := newClient(t, hopper.Config{Driver: newDriver(t)})
	require.NoError(t, strict.Register(wf))
	before := hits.Load()
	h, err = wf.Start(ctx, strict, hopper.None{}, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "refused")
	require.Equal(t, before, hits.Load(), "no request reached the server")

	// Bad requests are refused before anything is recorded.
	bad := hopper.Workflow("bad-fetch", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		_, err := hopper.Fetch(wf, "x", &hopper.FetchRequest{URL: "file:///etc/passwd"}, nil)
		if errors.Is(err, hopper.ErrInvalidInput) {
			return 1, nil
		}
		return 0, err
	}, nil)
	require.NoError(t, strict.Register(bad))
	hb, err := bad.Start(ctx, strict, hopper.None{}, nil)
	require.NoError(t, err)
	v, err := hb.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

// TestStepMetadata: a step's function sees its run, name, identity and
// try.
func TestStepMetadata(t *testing.T) {
	t.Parallel()
	var seen []hopper.StepMetadata
	wf := hopper.Workflow("meta", func(wf hopper.WorkflowContext, _ hopper.None) (int, error) {
		return hopper.Step(wf, "flaky", func(ctx context.Context) (int, error) {
			m, ok := hopper.StepFromContext(ctx)
			if !ok {
				return 0, hopper.Fatal(errors.New("no step metadata"))
			}
			seen = append(seen, m)
			if m.Attempt < 2 {
				return 0, errors.New("not yet")
			}
			return m.Attempt, nil
		}, &hopper.StepOpts{Retry: hopper.RetryPolicy{Attempts: 3, Base: time.Millisecond, Jitter: hopper.NoJitter}})
	}, nil)
	c := newClient(t, hopper.Config{})
	require.NoError(t, c.Register(wf))
	ctx := testCtx(t)
	h, err := wf.Start(ctx, c, hopper.None{}, nil)
	require.NoError(t, err)
	v, err := h.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Len(t, seen, 2)
	require.Equal(t, h.ID(), seen[0].RunID)
	require.Equal(t, "flaky", seen[0].Name)
	require.Equal(t, seen[0].ID, seen[1].ID, "the identity is the same on every try")
	require.Equal(t, []int{1, 2}, []int{seen[0].Attempt, seen[1].Attempt})
	_, ok := hopper.StepFromContext(ctx)
	require.False(t, ok)
}
