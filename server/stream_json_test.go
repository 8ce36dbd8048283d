package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// TestAPIStreamPage: GET /v1/runs/{id}/stream with Accept: application/json
// answers a page of chunks with their times and the run's status, not
// Server-Sent Events.
func TestAPIStreamPage(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Equal(t, 201, e.do("POST", "/v1/runs", `{"workflow":"approval"}`, &started))
	e.await(t, "the run to wait", func() bool {
		info, err := e.c.RunGet(ctx, started.RunID)
		require.NoError(t, err)
		return info.Status == hopper.RunWaiting
	})
	page := func(query string) (int, server.ChunkListJSON) {
		t.Helper()
		req, err := http.NewRequest("GET", e.url+"/v1/runs/"+started.RunID+"/stream"+query, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out server.ChunkListJSON
		if resp.StatusCode == 200 {
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		}
		return resp.StatusCode, out
	}
	code, got := page("")
	require.Equal(t, 200, code)
	require.Equal(t, "waiting", got.Status)
	require.Len(t, got.Chunks, 1)
	require.Equal(t, int64(0), got.Chunks[0].Offset)
	require.JSONEq(t, `{"waiting":"approval"}`, string(got.Chunks[0].Data))
	require.False(t, got.Chunks[0].At.IsZero(), "each chunk has its time")
	require.Equal(t, int64(1), got.Next)
	code, got = page("?from=1&limit=10")
	require.Equal(t, 200, code)
	require.Empty(t, got.Chunks)
	require.Equal(t, int64(1), got.Next, "an empty page keeps the offset")
	code, _ = page("?limit=0")
	require.Equal(t, 400, code)
	require.Equal(t, 404, e.do("GET", "/v1/runs/nope/stream", "", nil), "an unknown run, JSON or not")
}
