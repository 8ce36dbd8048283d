package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
)

// workersCmd lists the clients that run jobs on the store.
func workersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workers", Short: "List the clients that run jobs on the store, with their status and slots"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List workers: status (idle, busy, stopping, dead), slots used of total, completed and failed attempts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := loadWorkers(cmd.Context(), g)
			if err != nil {
				return err
			}
			if g.asJSON {
				return writeJSON(g.out, map[string]any{"workers": ws})
			}
			rows := make([][]string, len(ws))
			for i, w := range ws {
				rows[i] = []string{w.ID, w.Status, fmt.Sprintf("%d/%d", w.Active, w.Slots), slotBounds(w),
					strconv.FormatInt(w.Completed, 10), strconv.FormatInt(w.Failed, 10), w.Host, w.SeenAt.UTC().Format(time.RFC3339)}
			}
			return table(g.out, []string{"ID", "STATUS", "SLOTS", "BOUNDS", "COMPLETED", "FAILED", "HOST", "SEEN"}, rows)
		},
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one worker: its queues, types, the jobs and runs it runs now, and its latest scaling decisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := loadWorkers(cmd.Context(), g)
			if err != nil {
				return err
			}
			for _, w := range ws {
				if w.ID != args[0] {
					continue
				}
				if g.asJSON {
					return writeJSON(g.out, w)
				}
				for _, kv := range [][2]string{
					{"id", w.ID}, {"status", w.Status}, {"host", w.Host}, {"pid", strconv.Itoa(w.PID)},
					{"slots", fmt.Sprintf("%d used of %d (%s)", w.Active, w.Slots, slotBounds(w))},
					{"completed", strconv.FormatInt(w.Completed, 10)}, {"failed", strconv.FormatInt(w.Failed, 10)},
					{"leader", strconv.FormatBool(w.Leader)}, {"queues", strings.Join(w.Queues, ", ")},
					{"types", strings.Join(w.Types, ", ")}, {"workflows", strings.Join(w.Workflows, ", ")},
					{"jobs", strings.Join(w.Jobs, ", ")}, {"runs", strings.Join(w.Runs, ", ")},
					{"started", w.StartedAt.UTC().Format(time.RFC3339)}, {"seen", w.SeenAt.UTC().Format(time.RFC3339)},
				} {
					fmt.Fprintf(g.out, "%-10s %s\n", kv[0]+":", kv[1])
				}
				writeScalings(g, w.Scalings)
				return nil
			}
			return fmt.Errorf("worker %q: %w", args[0], hopper.ErrNotFound)
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

// writeScalings prints a worker's latest autoscaling decisions, oldest
// first, one a line: when, the slots before and after, and the workload
// and busy slots that decided it.
func writeScalings(g *globals, ss []hopper.ScalingInfo) {
	if len(ss) == 0 {
		fmt.Fprintf(g.out, "%-10s %s\n", "scalings:", "none")
		return
	}
	fmt.Fprintf(g.out, "scalings:\n")
	for _, s := range ss {
		fmt.Fprintf(g.out, "  %s  %d -> %d slots  workload %.2f, %d busy\n",
			s.At.UTC().Format(time.RFC3339), s.Before, s.After, s.Workload, s.Busy)
	}
}

// slotBounds says how a worker's slots are bounded: fixed, or the
// autoscaler's range.
func slotBounds(w *hopper.WorkerInfo) string {
	if w.MinWorkers > 0 {
		return fmt.Sprintf("autoscaled %d-%d", w.MinWorkers, w.MaxWorkers)
	}
	return "fixed"
}

// loadWorkers lists the workers from the server (--server) or the store.
func loadWorkers(ctx context.Context, g *globals) ([]*hopper.WorkerInfo, error) {
	if r := g.remote(); r != nil {
		var wrapped struct {
			Workers []*hopper.WorkerInfo `json:"workers"`
		}
		if err := r.get(ctx, "/v1/workers", nil, &wrapped); err != nil {
			return nil, err
		}
		return wrapped.Workers, nil
	}
	var ws []*hopper.WorkerInfo
	err := withClient(ctx, g, func(c *hopper.Client) error {
		var err error
		ws, err = c.WorkerList(ctx)
		return err
	})
	return ws, err
}
