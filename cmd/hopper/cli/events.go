package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// eventsCmd reads the lifecycle events the store records.
func eventsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Read the lifecycle events of every process sharing the store",
		Long: "Read the lifecycle events of every process sharing the store: jobs queued, started, failed,\n" +
			"succeeded…, and workflow runs' statuses, derived from the store's change feed." + existingNote}
	var (
		after  string
		kinds  []string
		types  []string
		follow bool
		steps  bool
		every  time.Duration
	)
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print events after --after (a cursor, start, or end: only those to come), following the store",
		Long: "Print events, one per line (cursor, time, kind, type, id, details; --json: one object per line),\n" +
			"after --after: an event's cursor to resume from, \"start\" for the oldest events retention kept,\n" +
			"or \"end\" (the default) for only the events to come. --follow=false prints what is there and\n" +
			"stops. The events are read from the database, or from --server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every <= 0 {
				return fmt.Errorf("--poll must be positive")
			}
			for _, k := range kinds {
				if !slices.Contains(hopper.EventKinds(), hopper.EventKind(k)) {
					return fmt.Errorf("--kind %q: not an event kind (one of %s)", k, kindList())
				}
			}
			if after == "start" {
				after = ""
			} else if after != "end" {
				if _, err := server.ParseCursor(after); err != nil {
					return fmt.Errorf("--after %q: a cursor is TX.POSITION, as an event's cursor (or start, end)", after)
				}
			}
			if r := g.remote(); r != nil {
				read := func(ctx context.Context, after string) (*server.EventListJSON, error) {
					q := url.Values{"after": {after}, "limit": {"1000"}, "steps": {strconv.FormatBool(steps)}}
					if len(kinds) > 0 {
						q.Set("kind", strings.Join(kinds, ","))
					}
					if len(types) > 0 {
						q.Set("type", strings.Join(types, ","))
					}
					var page server.EventListJSON
					err := r.get(ctx, "/v1/events/list", q, &page)
					return &page, err
				}
				return tailEvents(cmd.Context(), g, read, after, follow, every)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				return tailEvents(cmd.Context(), g, storeEvents(c, kinds, types, steps), after, follow, every)
			})
		},
	}
	tail.Flags().StringVar(&after, "after", "end", "where to start: an event's cursor, start or end")
	tail.Flags().StringSliceVar(&kinds, "kind", nil, "only events of these kinds (comma-separated)")
	tail.Flags().StringSliceVar(&types, "type", nil, "only events of these job types or workflows (comma-separated)")
	tail.Flags().BoolVar(&follow, "follow", true, "keep printing new events until interrupted")
	tail.Flags().BoolVar(&steps, "steps", false, "also print each workflow step an execution completed (run-step; reads each execution's history)")
	tail.Flags().DurationVar(&every, "poll", 250*time.Millisecond, "how often to look for new events while following")
	cmd.AddCommand(tail)
	return cmd
}

func kindList() string {
	var ks []string
	for _, k := range hopper.EventKinds() {
		ks = append(ks, string(k))
	}
	return strings.Join(ks, ", ")
}

// eventReader reads a page of events after a cursor ("end": the feed's
// tail).
type eventReader func(ctx context.Context, after string) (*server.EventListJSON, error)

// storeEvents reads events from the store, filtered by kind and type.
func storeEvents(c *hopper.Client, kinds, types []string, steps bool) eventReader {
	return func(ctx context.Context, after string) (*server.EventListJSON, error) {
		var cur hopper.ChangeCursor
		var err error
		if after == "end" {
			cur, err = c.ChangeTail(ctx)
		} else {
			cur, err = server.ParseCursor(after)
		}
		if err != nil {
			return nil, err
		}
		evs, next, err := c.EventList(ctx, cur, &hopper.EventOpts{Limit: 1000, Steps: steps})
		if err != nil {
			return nil, err
		}
		page := &server.EventListJSON{Next: server.FormatCursor(next)}
		for _, e := range evs {
			if (len(kinds) == 0 || slices.Contains(kinds, string(e.Kind))) && (len(types) == 0 || slices.Contains(types, e.Type)) {
				page.Events = append(page.Events, server.EventToJSON(e))
			}
		}
		return page, nil
	}
}

// tailEvents prints events from the store or a server alike, page after
// page, then, when following, what comes until ctx ends.
func tailEvents(ctx context.Context, g *globals, read eventReader, after string, follow bool, every time.Duration) error {
	for {
		page, err := read(ctx, after)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while following
			}
			return err
		}
		for _, e := range page.Events {
			if g.asJSON {
				line, err := json.Marshal(e)
				if err != nil {
					return err
				}
				fmt.Fprintln(g.out, string(line))
				continue
			}
			fmt.Fprintln(g.out, eventLine(e))
		}
		moved := page.Next != after
		after = page.Next
		if moved && after != "" {
			continue // read on until a page finds nothing new
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// eventLine is an event as one line of text.
func eventLine(e server.EventJSON) string {
	id := e.JobID
	for _, other := range []string{e.RunID, e.Schedule, e.Worker} {
		if id == "" {
			id = other
		}
	}
	parts := []string{e.Cursor, e.At.UTC().Format(time.RFC3339Nano), e.Kind, e.Type, id}
	if e.Attempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt=%d", e.Attempt))
	}
	if e.Step != "" {
		parts = append(parts, "step="+e.Step)
	}
	if e.Worker != "" {
		parts = append(parts, "worker="+e.Worker)
	}
	if e.WillRetry {
		parts = append(parts, "will-retry")
	}
	if e.Error != "" {
		parts = append(parts, "error="+fmt.Sprintf("%q", e.Error))
	}
	return strings.Join(parts, " ")
}
