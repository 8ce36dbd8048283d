package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// bulkFlags are what a bulk command acts on and how it is confirmed.
type bulkFlags struct {
	ids    []string
	dryRun bool
	yes    bool
	max    int
}

func (b *bulkFlags) add(cmd *cobra.Command, what string) {
	f := cmd.Flags()
	f.StringSliceVar(&b.ids, "id", nil, what+" ids to act on (instead of a filter; at most 1000)")
	f.BoolVar(&b.dryRun, "dry-run", false, "count what the action selects and change nothing")
	f.IntVar(&b.max, "max", 0, "act on at most this many (by filter: the count confirmed)")
	f.BoolVar(&b.yes, "yes", false, "by filter: act on every match counted now, without --max")
}

const bulkLong = `

Select by --id, or by filter: every match, a page of 500 per transaction.
An action by filter must be confirmed: --dry-run counts the matches, and
--max N acts on at most N of them (what was counted), or --yes acts on what
a count made just before finds. Without either it only counts, and fails.
The action applies to the states it can change: a redrive of --type x
redrives x's dead jobs.`

// bulkRun runs a bulk action: do sends one request (locally or to the
// server); a filter action without confirmation counts, then stops or,
// with --yes, acts on that count.
func bulkRun(g *globals, b *bulkFlags, action string, byFilter bool, do func(dryRun bool, max int) (*server.BulkResultJSON, error)) error {
	if len(b.ids) > 0 && byFilter {
		return fmt.Errorf("--id and filter flags select two ways: give one")
	}
	if len(b.ids) == 0 && !byFilter {
		return fmt.Errorf("bulk %s needs a selection: --id ID (repeatable) or filter flags", action)
	}
	max := b.max
	if byFilter && !b.dryRun && max == 0 {
		count, err := do(true, 0)
		if err != nil {
			return err
		}
		if !b.yes || count.Matched == 0 {
			if count.Matched > 0 {
				return fmt.Errorf("%d match; nothing done: confirm with --max %d (or --yes)", count.Matched, count.Matched)
			}
			return printBulk(g, count)
		}
		max = count.Matched
	}
	res, err := do(b.dryRun, max)
	if err != nil {
		return err
	}
	return printBulk(g, res)
}

func printBulk(g *globals, r *server.BulkResultJSON) error {
	if g.asJSON {
		return writeJSON(g.out, r)
	}
	if r.DryRun {
		fmt.Fprintf(g.out, "%s: %d match (dry run: nothing changed)\n", r.Action, r.Matched)
		return nil
	}
	fmt.Fprintf(g.out, "%s: %d matched, %d changed, %d skipped\n", r.Action, r.Matched, r.Changed, r.Skipped)
	if r.More {
		fmt.Fprintf(g.out, "more match than --max: they were left as they are\n")
	}
	return nil
}

func resultJSON(r *hopper.BulkResult) *server.BulkResultJSON {
	return &server.BulkResultJSON{Action: string(r.Action), DryRun: r.DryRun, Matched: r.Matched, Changed: r.Changed, Skipped: r.Skipped, More: r.More}
}

func jobsBulkCmd(g *globals) *cobra.Command {
	var b bulkFlags
	var states, types, queues []string
	var search searchFlags
	cmd := &cobra.Command{
		Use:       "bulk cancel|retry|redrive|delete",
		Short:     "Cancel, retry, redrive or delete many jobs: by id or by filter",
		Long:      "Cancel, retry, redrive or delete many jobs: by id or by filter." + bulkLong,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"cancel", "retry", "redrive", "delete"},
		RunE: func(cmd *cobra.Command, args []string) error {
			action := args[0]
			q := search.values(url.Values{}, states, types, queues)
			byFilter := len(q) > 0
			var filter *hopper.ListParams
			if byFilter {
				var err error
				if filter, err = server.ParseJobFilter(q); err != nil {
					return err
				}
			}
			return bulkRun(g, &b, action, byFilter, func(dryRun bool, max int) (*server.BulkResultJSON, error) {
				return jobBulk(cmd.Context(), g, &server.BulkRequest{Action: action, IDs: b.ids, DryRun: dryRun, Max: max}, q, filter)
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&states, "state", nil, "job states to select")
	f.StringSliceVar(&types, "type", nil, "job types to select")
	f.StringSliceVar(&queues, "queue", nil, "queues to select")
	search.add(cmd)
	b.add(cmd, "job")
	return cmd
}

// jobBulk sends req, its filter given as q (parsed: filter), to the server
// or to the store.
func jobBulk(ctx context.Context, g *globals, req *server.BulkRequest, q url.Values, filter *hopper.ListParams) (*server.BulkResultJSON, error) {
	if r := g.remote(); r != nil {
		if filter != nil {
			req.Filter = server.JobFilterOf(q)
		}
		var out server.BulkResultJSON
		return &out, r.post(ctx, "/v1/jobs/bulk", req, &out)
	}
	var out *server.BulkResultJSON
	err := withClient(ctx, g, func(c *hopper.Client) error {
		res, err := c.JobBulk(ctx, &hopper.BulkParams{Action: hopper.BulkAction(req.Action), IDs: req.IDs, Filter: filter, DryRun: req.DryRun, Max: req.Max})
		if err == nil {
			out = resultJSON(res)
		}
		return err
	})
	return out, err
}

func runsBulkCmd(g *globals) *cobra.Command {
	var b bulkFlags
	var f server.RunFilterJSON
	cmd := &cobra.Command{
		Use:       "bulk cancel|retry",
		Short:     "Cancel or retry many workflow runs: by id or by filter",
		Long:      "Cancel or retry many workflow runs: by id or by filter (newest first)." + strings.ReplaceAll(bulkLong, ", a page of 500 per transaction", ""),
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"cancel", "retry"},
		RunE: func(cmd *cobra.Command, args []string) error {
			action := args[0]
			byFilter := len(f.Status) > 0 || f.Workflow != "" || f.ParentID != ""
			return bulkRun(g, &b, action, byFilter, func(dryRun bool, max int) (*server.BulkResultJSON, error) {
				req := server.RunBulkRequest{Action: action, IDs: b.ids, DryRun: dryRun, Max: max}
				if byFilter {
					req.Filter = &f
				}
				if r := g.remote(); r != nil {
					var out server.BulkResultJSON
					return &out, r.post(cmd.Context(), "/v1/runs/bulk", req, &out)
				}
				var out *server.BulkResultJSON
				err := withClient(cmd.Context(), g, func(c *hopper.Client) error {
					p := &hopper.RunBulkParams{Action: hopper.BulkAction(action), IDs: b.ids, DryRun: dryRun, Max: max}
					if byFilter {
						p.Filter = &hopper.RunQuery{Workflow: f.Workflow, ParentID: f.ParentID}
						for _, s := range f.Status {
							st := hopper.RunStatus(s)
							if !st.Valid() {
								return fmt.Errorf("--status %q is not a run status", s)
							}
							p.Filter.Statuses = append(p.Filter.Statuses, st)
						}
					}
					res, err := c.RunBulk(cmd.Context(), p)
					if err == nil {
						out = resultJSON(res)
					}
					return err
				})
				return out, err
			})
		},
	}
	cmd.Flags().StringSliceVar(&f.Status, "status", nil, "run statuses to select")
	cmd.Flags().StringVar(&f.Workflow, "workflow", "", "workflow to select")
	cmd.Flags().StringVar(&f.ParentID, "parent", "", "the child runs of this run")
	b.add(cmd, "run")
	return cmd
}
