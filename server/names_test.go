package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/server"
)

// TestAPIRefusesUnknownNames: pausing a queue or a schedule nothing has
// used, or defining a schedule of a type no worker registers, answers 404
// with a message that says what to send to go ahead (?create=true,
// ?force=true), and stores nothing.
func TestAPIRefusesUnknownNames(t *testing.T) {
	t.Parallel()
	e := setup(t, &server.Options{Tokens: []string{token}})
	var eb errBody
	require.Equal(t, 404, e.do("POST", "/v1/queues/nosuch/pause", "", &eb))
	require.Equal(t, "not_found", eb.Error.Code)
	require.Contains(t, eb.Error.Message, `"nosuch"`)
	require.Contains(t, eb.Error.Message, "default", "the message lists the queues in use")
	require.Contains(t, eb.Error.Message, "?create=true")
	require.Equal(t, 404, e.do("POST", "/v1/queues/nosuch/resume", "", nil))
	var qs struct{ Queues []server.QueueJSON }
	require.Equal(t, 200, e.do("GET", "/v1/queues", "", &qs))
	for _, q := range qs.Queues {
		require.NotEqual(t, "nosuch", q.Name, "a refused pause stores nothing")
	}
	require.Equal(t, 400, e.do("POST", "/v1/queues/nosuch/pause?create=maybe", "", nil))
	require.Equal(t, 200, e.do("POST", "/v1/queues/nosuch/pause?create=true", "", nil))
	require.Equal(t, 200, e.do("POST", "/v1/queues/nosuch/resume", "", nil), "its stored state names it now")

	eb = errBody{}
	require.Equal(t, 404, e.do("POST", "/v1/schedules/typo/pause", "", &eb))
	require.Equal(t, "not_found", eb.Error.Code)
	require.Contains(t, eb.Error.Message, "?create=true")
	var scheds struct{ Schedules []server.ScheduleJSON }
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.Empty(t, scheds.Schedules, "a refused pause stores nothing")
	require.Equal(t, 200, e.do("POST", "/v1/schedules/later/pause?create=true", "", nil))

	eb = errBody{}
	require.Equal(t, 404, e.do("POST", "/v1/schedules", `{"name":"s","cron":"@daily","type":"ad"}`, &eb))
	require.Equal(t, "unknown_type", eb.Error.Code)
	require.Contains(t, eb.Error.Message, "add, block, fail", "the message lists the registered types")
	require.Contains(t, eb.Error.Message, "?force=true")
	require.Equal(t, 404, e.do("POST", "/v1/schedules", `{"name":"s","cron":"@daily","workflow":"sag"}`, &eb))
	require.Contains(t, eb.Error.Message, "approval, saga")
	require.Equal(t, 200, e.do("GET", "/v1/schedules", "", &scheds))
	require.Len(t, scheds.Schedules, 1, "nothing stored for the refused definitions")
	require.Equal(t, 201, e.do("POST", "/v1/schedules?force=true", `{"name":"s","cron":"@daily","type":"ad"}`, nil))
}
