package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/server"
)

// withClient opens the --db store, which must exist, makes an unstarted
// client over it and runs fn.
func withClient(ctx context.Context, g *globals, fn func(c *hopper.Client) error) error {
	return withClientMode(ctx, g, existingStore, fn)
}

// withClientMode is withClient for a command that may create the store.
func withClientMode(ctx context.Context, g *globals, mode openMode, fn func(c *hopper.Client) error) error {
	d, err := openDriver(ctx, g.db, mode)
	if err != nil {
		return err
	}
	defer d.Close()
	c, err := hopper.New(hopper.Config{Driver: d})
	if err != nil {
		return err
	}
	return fn(c)
}

// existingNote ends the help of the commands that need an existing
// database.
const existingNote = `

These commands read and change an existing database: a --db that names no
hopper database is an error, and none is created (hopper migrate --db … or
hopper dev creates one).`

func jobsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "List, show, cancel and retry jobs", Long: "List, show, cancel and retry jobs." + existingNote}
	var p listFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			params, err := p.params()
			if err != nil {
				return err
			}
			if r := g.remote(); r != nil {
				return remoteJobList(cmd.Context(), g, r, &p, p.states)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error { return printPage(cmd.Context(), g, c, params) })
		},
	}
	p.add(list, true)
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one job",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				return remoteJob(cmd.Context(), g, r, http.MethodGet, "/v1/jobs/"+pathEsc(args[0]))
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				row, err := c.JobGet(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printJob(g, row)
			})
		},
	}
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job (a running one is asked to stop)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				return remoteJob(cmd.Context(), g, r, http.MethodPost, "/v1/jobs/"+pathEsc(args[0])+"/cancel")
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				row, err := c.JobCancel(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printJob(g, row)
			})
		},
	}
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Move a dead, expired, cancelled or stuck job back to pending",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if r := g.remote(); r != nil {
				return remoteJob(cmd.Context(), g, r, http.MethodPost, "/v1/jobs/"+pathEsc(args[0])+"/retry")
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				row, err := c.JobRetry(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printJob(g, row)
			})
		},
	}
	attempts := &cobra.Command{
		Use:   "attempts ID",
		Short: "List a job's attempts (from the change feed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var list server.AttemptListJSON
			if r := g.remote(); r != nil {
				if err := r.get(cmd.Context(), "/v1/jobs/"+pathEsc(args[0])+"/attempts", nil, &list); err != nil {
					return err
				}
			} else if err := withClient(cmd.Context(), g, func(c *hopper.Client) error {
				as, err := c.JobAttempts(cmd.Context(), args[0])
				list.Attempts = server.AttemptsToJSON(as)
				return err
			}); err != nil {
				return err
			}
			if g.asJSON {
				return writeJSON(g.out, list)
			}
			rows := make([][]string, len(list.Attempts))
			for i, a := range list.Attempts {
				ended, outcome, why := "-", "running", ""
				if a.EndedAt != nil {
					ended, outcome = fmtTime(*a.EndedAt), a.Outcome
				}
				if a.Error != nil {
					why = a.Error.Kind + ": " + a.Error.Message
				} else if a.Stuck != nil {
					why = a.Stuck.Cause
				}
				rows[i] = []string{strconv.Itoa(a.Generation), strconv.Itoa(a.Number), a.Worker, fmtTime(a.StartedAt), ended, outcome, why}
			}
			return table(g.out, []string{"LIFE", "ATTEMPT", "WORKER", "STARTED", "ENDED", "OUTCOME", "ERROR"}, rows)
		},
	}
	for _, c := range []*cobra.Command{show, cancel, retry, attempts} {
		reword(c, "job", "hopper jobs list")
	}
	cmd.AddCommand(list, show, cancel, retry, attempts, jobsBulkCmd(g))
	return cmd
}

// listFlags are the filters of a job listing.
type listFlags struct {
	states, types, queues []string
	limit, scan           int
	cursor                string
	search                searchFlags
}

// searchFlags are the filters of a job search, beside state, type and
// queue.
type searchFlags struct {
	meta                      []string
	uniqueKey, errText        string
	queuedAfter, queuedBefore string
	endedAfter, endedBefore   string
}

func (s *searchFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&s.meta, "meta", nil, "metadata key=value the jobs hold (repeatable: every pair)")
	f.StringVar(&s.uniqueKey, "unique-key", "", "jobs with this unique key")
	f.StringVar(&s.errText, "error", "", "jobs whose last error contains this text (case-sensitive)")
	f.StringVar(&s.queuedAfter, "queued-after", "", "jobs enqueued at or after this time (RFC 3339, or 2006-01-02T15:04 in UTC)")
	f.StringVar(&s.queuedBefore, "queued-before", "", "jobs enqueued before this time")
	f.StringVar(&s.endedAfter, "ended-after", "", "jobs that ended (a dead letter: died) at or after this time")
	f.StringVar(&s.endedBefore, "ended-before", "", "jobs that ended before this time")
}

// values puts the filters in a listing's query, as GET /v1/jobs takes it.
func (s *searchFlags) values(q url.Values, states, types, queues []string) url.Values {
	for k, v := range map[string][]string{"state": states, "type": types, "queue": queues} {
		if len(v) > 0 {
			q.Set(k, strings.Join(v, ","))
		}
	}
	for k, v := range map[string]string{"unique_key": s.uniqueKey, "error": s.errText, "queued_after": s.queuedAfter, "queued_before": s.queuedBefore,
		"ended_after": s.endedAfter, "ended_before": s.endedBefore} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for _, kv := range s.meta {
		q.Add("meta", kv)
	}
	return q
}

func (p *listFlags) add(cmd *cobra.Command, withState bool) {
	f := cmd.Flags()
	if withState {
		f.StringSliceVar(&p.states, "state", nil, "states to list (repeatable or comma-separated)")
	}
	f.StringSliceVar(&p.types, "type", nil, "job types to list")
	f.StringSliceVar(&p.queues, "queue", nil, "queues to list")
	f.IntVar(&p.limit, "limit", 50, "page size (at most 1000)")
	f.StringVar(&p.cursor, "cursor", "", "continue after this cursor")
	f.IntVar(&p.scan, "scan", hopper.DefaultScanLimit, "jobs a search by --meta, --unique-key or --error examines a page")
	p.search.add(cmd)
}

// values is the listing's query (states as given).
func (p *listFlags) values(states []string) url.Values {
	q := url.Values{"limit": {strconv.Itoa(p.limit)}}
	if p.cursor != "" {
		q.Set("cursor", p.cursor)
	}
	if p.scan != hopper.DefaultScanLimit {
		q.Set("scan", strconv.Itoa(p.scan))
	}
	return p.search.values(q, states, p.types, p.queues)
}

func (p *listFlags) params() (*hopper.ListParams, error) {
	for _, s := range p.states {
		if !hopper.JobState(s).Valid() {
			return nil, fmt.Errorf("--state %q is not a job state (%s)", s, joinNames(hoppertype.JobStates()))
		}
	}
	if p.limit < 1 || p.limit > hopper.MaxListLimit {
		return nil, fmt.Errorf("--limit must be between 1 and %d", hopper.MaxListLimit)
	}
	return server.ParseJobFilter(p.values(p.states))
}

func printPage(ctx context.Context, g *globals, c *hopper.Client, p *hopper.ListParams) error {
	page, err := c.JobList(ctx, p)
	if err != nil {
		return err
	}
	if g.asJSON {
		out := server.JobListJSON{Jobs: make([]*server.JobJSON, len(page.Jobs)), NextCursor: page.NextCursor}
		for i, j := range page.Jobs {
			out.Jobs[i] = server.JobToJSON(j)
		}
		return writeJSON(g.out, out)
	}
	return printJobTable(g, jobsJSON(page.Jobs), page.NextCursor, p.Limit)
}

// printJobTable prints a page of jobs for humans, as the API shows them
// (the same through --server and on the database). A page shorter than
// limit with a cursor is a search that stopped at its --scan window.
func printJobTable(g *globals, jobs []*server.JobJSON, next string, limit int) error {
	rows := make([][]string, len(jobs))
	for i, j := range jobs {
		rows[i] = []string{j.ID, jobTypeText(j), j.Queue, j.State, fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts), fmtTime(j.QueuedAt), fmtTimePtr(j.EndedAt)}
	}
	if err := table(g.out, []string{"ID", "TYPE", "QUEUE", "STATE", "ATTEMPT", "QUEUED", "ENDED"}, rows); err != nil {
		return err
	}
	switch {
	case next != "" && len(jobs) < limit:
		fmt.Fprintf(g.out, "\nthe search stopped after --scan jobs; search on: --cursor %s\n", next)
	case next != "":
		fmt.Fprintf(g.out, "\nmore: --cursor %s\n", next)
	}
	return nil
}

// jobTypeText names a job's type for humans: a workflow run's job and a
// gate's say what they are.
func jobTypeText(j *server.JobJSON) string {
	switch {
	case j.RunID != "":
		return "workflow " + j.Workflow + " (run " + j.RunID + ")"
	case j.Gate != nil:
		return "gate"
	}
	return j.Type
}

// jobsJSON puts rows as the API shows them.
func jobsJSON(rows []*hopper.JobRow) []*server.JobJSON {
	out := make([]*server.JobJSON, len(rows))
	for i, j := range rows {
		out[i] = server.JobToJSON(j)
	}
	return out
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func printJob(g *globals, j *hopper.JobRow) error {
	if g.asJSON {
		return writeJSON(g.out, server.JobToJSON(j))
	}
	return printJobText(g, server.JobToJSON(j))
}

// printJobText prints a job for humans, as the API shows it.
func printJobText(g *globals, j *server.JobJSON) error {
	lines := [][2]string{
		{"id", j.ID}, {"type", jobTypeText(j)}, {"queue", j.Queue}, {"state", j.State},
		{"attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts)}, {"priority", strconv.Itoa(j.Priority)},
		{"group", j.GroupID}, {"queued", fmtTime(j.QueuedAt)}, {"due", fmtTime(j.RunAt)}, {"ended", fmtTimePtr(j.EndedAt)},
	}
	if g := j.Gate; g != nil {
		lines = append(lines, [2]string{"waits", "until " + g.WaitsUntil + ": " + strings.Join(g.On, ", ")})
		for _, n := range g.Next {
			lines = append(lines, [2]string{"then", n.Type + " " + n.ID + " " + compact(n.Input)})
		}
	} else {
		lines = append(lines, [2]string{"input", compact(j.Input)})
	}
	if len(j.Result) > 0 && string(j.Result) != "null" {
		lines = append(lines, [2]string{"result", compact(j.Result)})
	}
	if j.Error != nil {
		lines = append(lines, [2]string{"error", fmt.Sprintf("[%s, attempt %d] %s", j.Error.Kind, j.Error.Attempt, j.Error.Message)})
	}
	if j.Stuck != nil {
		lines = append(lines, [2]string{"stuck", j.Stuck.Cause + ": " + j.Stuck.Detail})
	}
	if j.RunID != "" {
		lines = append(lines, [2]string{"run", "hopper runs show " + j.RunID})
	}
	for _, l := range lines {
		fmt.Fprintf(g.out, "%-9s %s\n", l[0]+":", l[1])
	}
	return nil
}

func deadCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "dead", Short: "List and redrive dead-lettered jobs", Long: "List and redrive dead-lettered jobs." + existingNote}
	var p listFlags
	var compensated bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			params, err := p.params()
			if err != nil {
				return err
			}
			params.States = []hopper.JobState{hopper.StateDead}
			params.HideCompensated = !compensated // a compensated saga is no dead letter
			if r := g.remote(); r != nil {
				q := p.values([]string{"dead"})
				q.Set("hide_compensated", strconv.FormatBool(!compensated))
				var page server.JobListJSON
				if err := r.get(cmd.Context(), "/v1/jobs", q, &page); err != nil {
					return err
				}
				if g.asJSON {
					return writeJSON(g.out, page)
				}
				return printJobTable(g, page.Jobs, page.NextCursor, p.limit)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error { return printPage(cmd.Context(), g, c, params) })
		},
	}
	p.add(list, false)
	list.Flags().BoolVar(&compensated, "compensated", false, "also list the jobs of workflow runs that ended compensated (sagas that undid their work)")
	var ids []string
	var typ string
	var all bool
	var limit int
	redrive := &cobra.Command{
		Use:   "redrive",
		Short: "Move dead jobs back to pending as fresh jobs (--id, --type or --all)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(ids) == 0 && typ == "" && !all {
				return errors.New("dead redrive needs a selection: --id ID (repeatable), --type TYPE or --all")
			}
			if limit < 0 {
				return errors.New("--limit must not be negative (0: no cap)")
			}
			if r := g.remote(); r != nil {
				return remoteRedrive(cmd.Context(), g, r, server.RedriveRequest{IDs: ids, Type: typ, All: all, Limit: limit})
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				n, err := c.JobRedrive(cmd.Context(), &hopper.RedriveParams{IDs: ids, Type: typ, All: all, Limit: limit})
				if err != nil {
					return err
				}
				if g.asJSON {
					return writeJSON(g.out, map[string]int{"redriven": n})
				}
				fmt.Fprintf(g.out, "redriven: %d\n", n)
				return nil
			})
		},
	}
	redrive.Flags().StringSliceVar(&ids, "id", nil, "job ids to redrive")
	redrive.Flags().StringVar(&typ, "type", "", "redrive every dead job of this type")
	redrive.Flags().BoolVar(&all, "all", false, "redrive every dead job")
	redrive.Flags().IntVar(&limit, "limit", 0, "redrive at most this many (0: no cap)")
	cmd.AddCommand(list, redrive)
	return cmd
}

func queuesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "queues", Short: "List, pause and resume queues", Long: "List, pause and resume queues." + existingNote}
	list := &cobra.Command{
		Use:   "list",
		Short: "List queues with their job counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r := g.remote(); r != nil {
				return remoteQueues(cmd.Context(), g, r)
			}
			return withClient(cmd.Context(), g, func(c *hopper.Client) error {
				depths, err := c.QueueDepths(cmd.Context())
				if err != nil {
					return err
				}
				qs, err := c.QueueList(cmd.Context())
				if err != nil {
					return err
				}
				return printQueues(g, server.QueuesToJSON(depths, qs))
			})
		},
	}
	setPaused := func(use, short string, pause bool) *cobra.Command {
		var create bool
		c := &cobra.Command{
			Use:   use + " QUEUE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var err error
				if r := g.remote(); r != nil {
					path := "/v1/queues/" + pathEsc(args[0]) + "/" + use
					if create {
						path += "?create=true"
					}
					err = r.post(cmd.Context(), path, nil, nil)
				} else {
					mode := existingStore
					if create {
						mode = createStore
					}
					err = withClientMode(cmd.Context(), g, mode, func(c *hopper.Client) error {
						if pause {
							return c.QueuePause(cmd.Context(), args[0], &hopper.PauseOpts{Create: create})
						}
						return c.QueueResume(cmd.Context(), args[0])
					})
				}
				if err != nil {
					if pause {
						return withFlagHint(err, createHint)
					}
					return err
				}
				if g.asJSON {
					return writeJSON(g.out, map[string]any{"name": args[0], "paused": pause})
				}
				fmt.Fprintf(g.out, "queue %s paused: %v\n", args[0], pause)
				return nil
			},
		}
		if pause {
			c.Long = `Stop every process from starting the queue's jobs until "hopper queues
resume"; running jobs finish. A queue that no job, worker or earlier pause has
named is refused (a typo would otherwise be stored for good); --create pauses
it ahead of its first job (and creates the database when it does not exist).`
			c.Flags().BoolVar(&create, "create", false, "pause a queue nothing has used yet")
		}
		return c
	}
	demand := &cobra.Command{
		Use:   "demand QUEUE",
		Short: "How many worker processes the queue needs: due and running jobs, arrivals, completions, run time, desired slots and workers",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d hopper.QueueDemand
			if r := g.remote(); r != nil {
				if err := r.get(cmd.Context(), "/v1/queues/"+pathEsc(args[0])+"/demand", nil, &d); err != nil {
					return err
				}
			} else if err := withClient(cmd.Context(), g, func(c *hopper.Client) error {
				got, err := c.QueueDemand(cmd.Context(), args[0])
				if err == nil {
					d = *got
				}
				return err
			}); err != nil {
				return err
			}
			if g.asJSON {
				return writeJSON(g.out, d)
			}
			fmt.Fprintf(g.out, "queue %s%s: %d due (oldest %s), %d running, %.2f arrivals/s, %.2f completions/s, mean run %s\n", d.Queue,
				map[bool]string{true: " (paused)"}[d.Paused], d.Due, d.OldestDueAge, d.Running, d.ArrivalPerSecond, d.CompletionPerSecond, d.MeanRun)
			fmt.Fprintf(g.out, "backlog to start within %s\n", d.Drain)
			fmt.Fprintf(g.out, "needs %d slots: %d workers of %d slots (%d working it now)\n", d.DesiredSlots, d.DesiredWorkers, d.SlotsPerWorker, d.Workers)
			return nil
		},
	}
	cmd.AddCommand(list, demand, setPaused("pause", "Stop every process from starting the queue's jobs", true),
		setPaused("resume", "Let a paused queue's jobs start again", false))
	return cmd
}

// joinNames lists states or statuses for a message.
func joinNames[T ~string](names []T) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	return strings.Join(out, ", ")
}
