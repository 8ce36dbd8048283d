package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/server"
)

func runsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "List, show, cancel workflow runs and export their histories",
		Long: "List, show, cancel and tail workflow runs and export their histories." + existingNote}
	var (
		statuses []string
		workflow string
		parent   string
		limit    int
		offset   int
		cursor   string
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List workflow runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := &hopper.RunQuery{Workflow: workflow, ParentID: parent, Limit: limit, Offset: offset, Cursor: cursor}
			for _, s := range statuses {
				st := hopper.RunStatus(s)
				if !st.Valid() {
					return fmt.Errorf("--status %q is not a run status (%s)", s, joinNames(hoppertype.RunStatuses()))
				}
				q.Statuses = append(q.Statuses, st)
			}
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--limit must be between 1 and 1000")
			}
			if r := g.remote(); r != nil {
				return remoteRunList(cmd.Context(), g, r, statuses, workflow, parent, limit, offset, cursor)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				page, err := c.RunList(cmd.Context(), q)
				if err != nil {
					return err
				}
				if g.asJSON {
					out := server.RunListJSON{Runs: make([]*server.RunJSON, len(page.Runs)), NextCursor: page.NextCursor}
					for i, r := range page.Runs {
						out.Runs[i] = server.RunToJSON(r)
					}
					return writeJSON(g.out, out)
				}
				return printRunTable(g, page.Runs, page.NextCursor)
			})
		},
	}
	f := list.Flags()
	f.StringSliceVar(&statuses, "status", nil, "statuses to list (repeatable or comma-separated)")
	f.StringVar(&workflow, "workflow", "", "only runs of this workflow")
	f.StringVar(&parent, "parent", "", "only children of this run")
	f.IntVar(&limit, "limit", 50, "runs to list (at most 1000)")
	f.StringVar(&cursor, "cursor", "", "continue a listing where the previous page ended (its \"more: --cursor\" line)")
	f.IntVar(&offset, "offset", 0, "runs to skip (prefer --cursor)")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a run: status, steps, compensations, hooks",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				return remoteRun(cmd.Context(), g, r, args[0])
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				info, err := c.RunGet(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printRun(g, info)
			})
		},
	}
	history := &cobra.Command{
		Use:   "history ID",
		Short: "Print a run's history as JSON (save it in testdata/histories for replay tests)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				var h json.RawMessage
				if err := r.get(cmd.Context(), "/v1/runs/"+pathEsc(args[0])+"/history", nil, &h); err != nil {
					return err
				}
				return writeJSON(g.out, h)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				h, err := c.RunHistory(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return writeJSON(g.out, h)
			})
		},
	}
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a run: it stops at its next operation, runs its compensations, and its children are cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				if err := r.post(cmd.Context(), "/v1/runs/"+pathEsc(args[0])+"/cancel", nil, nil); err != nil {
					return err
				}
				return remoteRun(cmd.Context(), g, r, args[0])
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				if err := c.RunCancel(cmd.Context(), args[0]); err != nil {
					return err
				}
				info, err := c.RunGet(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printRun(g, info)
			})
		},
	}
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Run again a run that failed, compensated, was cancelled or quarantined: a fresh attempt with its whole retry budget",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				if err := r.post(cmd.Context(), "/v1/runs/"+pathEsc(args[0])+"/retry", nil, nil); err != nil {
					return err
				}
				return remoteRun(cmd.Context(), g, r, args[0])
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				if err := c.RunRetry(cmd.Context(), args[0]); err != nil {
					return err
				}
				info, err := c.RunGet(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printRun(g, info)
			})
		},
	}
	var (
		from   int64
		follow bool
		every  time.Duration
	)
	tail := &cobra.Command{
		Use:   "tail ID",
		Short: "Print a run's stream from --from, following it until the run ends (--follow=false: what is there now)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 0 {
				return fmt.Errorf("--from must not be negative")
			}
			if every <= 0 {
				return fmt.Errorf("--poll must be positive")
			}
			if r := g.remote(); r != nil {
				return tailStream(cmd.Context(), g, r.chunks, args[0], from, follow, every)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				return tailStream(cmd.Context(), g, storeChunks(c), args[0], from, follow, every)
			})
		},
	}
	tail.Flags().Int64Var(&from, "from", 0, "the first offset to print")
	tail.Flags().BoolVar(&follow, "follow", true, "keep printing new chunks until the run ends")
	tail.Flags().DurationVar(&every, "poll", 250*time.Millisecond, "how often to look for new chunks while following (from the database or --server)")
	for _, c := range []*cobra.Command{show, history, cancel, retry, tail} {
		reword(c, "run", "hopper runs list")
	}
	cmd.AddCommand(list, show, history, cancel, retry, tail, runsBulkCmd(g))
	return cmd
}

// tailPage is how many chunks a read of a run's stream asks for.
const tailPage = 1000

// chunkReader reads a page of a run's stream from offset from: the run's
// status, read first, then its chunks.
type chunkReader func(ctx context.Context, id string, from int64) (*server.ChunkListJSON, error)

// storeChunks reads a run's stream from the store.
func storeChunks(c *hopper.Client) chunkReader {
	return func(ctx context.Context, id string, from int64) (*server.ChunkListJSON, error) {
		info, err := c.RunGet(ctx, id)
		if err != nil {
			return nil, err
		}
		chunks, err := c.StreamRead(ctx, id, from, tailPage)
		if err != nil {
			return nil, err
		}
		page := &server.ChunkListJSON{Chunks: make([]server.ChunkJSON, len(chunks)), Next: from, Status: string(info.Status)}
		for i, ch := range chunks {
			page.Chunks[i] = server.ChunkToJSON(ch)
			page.Next = ch.Offset + 1
		}
		return page, nil
	}
}

// tailStream prints a run's stream chunks, one per line ("offset data", or
// the chunk as JSON with --json), from the store or a server alike, until
// the run ends when following.
func tailStream(ctx context.Context, g *globals, read chunkReader, id string, from int64, follow bool, every time.Duration) error {
	for {
		page, err := read(ctx, id, from)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while following
			}
			return err
		}
		for _, ch := range page.Chunks {
			if g.asJSON {
				line, err := json.Marshal(ch)
				if err != nil {
					return err
				}
				fmt.Fprintln(g.out, string(line))
			} else {
				fmt.Fprintf(g.out, "%d %s\n", ch.Offset, compact(ch.Data))
			}
		}
		from = page.Next
		if len(page.Chunks) == tailPage {
			continue
		}
		if !follow || hopper.RunStatus(page.Status).Terminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func hooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "hooks", Short: "Resume workflow hooks", Long: "Resume workflow hooks." + existingNote}
	var payload string
	resume := &cobra.Command{
		Use:   "resume TOKEN [PAYLOAD]",
		Short: "Deliver a JSON payload (an argument, or --payload) to the run waiting on a hook",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				if cmd.Flags().Changed("payload") {
					return fmt.Errorf("give the payload as an argument or with --payload, not both")
				}
				payload = args[1]
			}
			if !json.Valid([]byte(payload)) {
				return fmt.Errorf("--payload is not valid JSON: %q", payload)
			}
			if r := g.remote(); r != nil {
				if _, err := r.do(cmd.Context(), http.MethodPost, "/v1/hooks/"+pathEsc(args[0]), nil, []byte(payload)); err != nil {
					return err
				}
				if g.asJSON {
					return writeJSON(g.out, map[string]bool{"resumed": true})
				}
				fmt.Fprintln(g.out, "resumed")
				return nil
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				if err := c.HookResume(cmd.Context(), args[0], json.RawMessage(payload)); err != nil {
					return err
				}
				if g.asJSON {
					return writeJSON(g.out, map[string]bool{"resumed": true})
				}
				fmt.Fprintln(g.out, "resumed")
				return nil
			})
		},
	}
	resume.Flags().StringVar(&payload, "payload", "null", "the payload, as JSON")
	cmd.AddCommand(reword(resume, "hook with token", "hopper runs show RUN_ID"))
	return cmd
}

func printRun(g *globals, r *hopper.RunInfo) error {
	if g.asJSON {
		return writeJSON(g.out, server.RunToJSON(r))
	}
	return printRunText(g, r)
}

// printRunTable prints runs for humans.
func printRunTable(g *globals, runs []*hopper.RunInfo, next string) error {
	rows := make([][]string, len(runs))
	for i, r := range runs {
		rows[i] = []string{r.ID, r.Workflow, string(r.Status), orDash(r.ParentID), fmtTime(r.CreatedAt), fmtTime(r.EndedAt)}
	}
	if err := table(g.out, []string{"ID", "WORKFLOW", "STATUS", "PARENT", "CREATED", "ENDED"}, rows); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(g.out, "\nmore: --cursor %s\n", next)
	}
	return nil
}

// printRunText prints a run for humans.
func printRunText(g *globals, r *hopper.RunInfo) error {
	lines := [][2]string{
		{"id", r.ID}, {"workflow", r.Workflow}, {"status", string(r.Status)}, {"parent", orDash(r.ParentID)},
		{"attempt", fmt.Sprint(r.Attempt)}, {"created", fmtTime(r.CreatedAt)}, {"ended", fmtTime(r.EndedAt)},
		{"input", string(r.Input)},
	}
	if len(r.Output) > 0 {
		lines = append(lines, [2]string{"output", string(r.Output)})
	}
	if r.Error != nil {
		lines = append(lines, [2]string{"error", fmt.Sprintf("[%s] %s", r.Error.Kind, r.Error.Message)})
	}
	for _, l := range lines {
		fmt.Fprintf(g.out, "%-9s %s\n", l[0]+":", l[1])
	}
	if len(r.Steps) > 0 {
		fmt.Fprintln(g.out, "\nsteps:")
		rows := make([][]string, len(r.Steps))
		for i, s := range r.Steps {
			res := string(s.Output)
			if s.Error != nil {
				res = "error: " + s.Error.Message
			}
			rows[i] = []string{fmt.Sprint(i + 1), s.Name, s.Kind, truncate(res, 60), fmtTime(s.At)}
		}
		if err := table(g.out, []string{"#", "STEP", "KIND", "RESULT", "AT"}, rows); err != nil {
			return err
		}
	}
	if len(r.Compensations) > 0 {
		fmt.Fprintln(g.out, "\ncompensations:")
		rows := make([][]string, len(r.Compensations))
		for i, c := range r.Compensations {
			state := "pending"
			switch {
			case c.Executed && c.Error != "":
				state = "failed: " + c.Error
			case c.Executed:
				state = "executed"
			}
			rows[i] = []string{c.Name, state}
		}
		if err := table(g.out, []string{"NAME", "STATE"}, rows); err != nil {
			return err
		}
	}
	if len(r.Hooks) > 0 {
		fmt.Fprintln(g.out, "\nhooks:")
		rows := make([][]string, len(r.Hooks))
		for i, h := range r.Hooks {
			rows[i] = []string{h.Name, string(h.State), h.Token}
		}
		if err := table(g.out, []string{"NAME", "STATE", "TOKEN"}, rows); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
