package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// remote talks to a hopper server's HTTP API: the commands' --server mode.
type remote struct {
	base  string
	token string
	hc    *http.Client
}

// remote returns the API client of --server, or nil without it.
func (g *globals) remote() *remote {
	if g.server == "" {
		return nil
	}
	return &remote{base: strings.TrimRight(g.server, "/"), token: g.apiToken, hc: &http.Client{Timeout: 60 * time.Second}}
}

// checkServer reads --server: a bare host:port is http://host:port; a
// scheme other than http or https, or no host, is refused.
func (g *globals) checkServer() error {
	if g.server == "" {
		return nil
	}
	if !strings.Contains(g.server, "://") {
		g.server = "http://" + g.server
	}
	u, err := url.Parse(g.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--server %q is not a server address: give http://host:port (or https://…)", g.server)
	}
	return nil
}

// apiError is an error answer of the API.
type apiError struct {
	Server  string
	Status  int
	Code    string
	Message string
}

// Is lets errors.Is match a server's "not found" answer with
// hopper.ErrNotFound, as the client's own.
func (e *apiError) Is(target error) bool {
	return target == hopper.ErrNotFound && e.Status == http.StatusNotFound && e.Code == "not_found"
}

func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		msg += "; pass the server's token with --api-token (or $HOPPER_API_TOKEN)"
	case http.StatusForbidden:
		msg += "; the --api-token given is not allowed this"
	}
	return fmt.Sprintf("%s (server %s answered %d)", msg, e.Server, e.Status)
}

// do sends a request and returns the body of a 2xx answer; any other is an
// *apiError.
func (r *remote) do(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, error) {
	u := r.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, unreachable(r.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
			e.Error.Code, e.Error.Message = "http", strings.TrimSpace(string(b))
		}
		return nil, &apiError{Server: r.base, Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return b, nil
}

// get decodes a GET's answer into out.
func (r *remote) get(ctx context.Context, path string, query url.Values, out any) error {
	b, err := r.do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// post sends in as JSON (nil: no body) and decodes the answer into out
// (nil: ignored).
func (r *remote) post(ctx context.Context, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	b, err := r.do(ctx, http.MethodPost, path, nil, body)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func pathEsc(s string) string { return url.PathEscape(s) }

// unreachable is the error of a request that got no answer.
func unreachable(base string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("no answer from the server at %s (is hopper serve or hopper dev running there? check --server): %w", base, err)
}

// compact prints JSON on one line (the API indents it).
func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// Jobs over the API.

func remoteJobList(ctx context.Context, g *globals, r *remote, p *listFlags, states []string) error {
	q := p.values(states)
	var page server.JobListJSON
	if err := r.get(ctx, "/v1/jobs", q, &page); err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, page)
	}
	return printJobTable(g, page.Jobs, page.NextCursor, p.limit)
}

func remoteJob(ctx context.Context, g *globals, r *remote, method, path string) error {
	var j server.JobJSON
	var err error
	if method == http.MethodGet {
		err = r.get(ctx, path, nil, &j)
	} else {
		err = r.post(ctx, path, nil, &j)
	}
	if err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, j)
	}
	return printJobText(g, &j)
}

func remoteRedrive(ctx context.Context, g *globals, r *remote, req server.RedriveRequest) error {
	var out map[string]int
	if err := r.post(ctx, "/v1/dead/redrive", req, &out); err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, out)
	}
	fmt.Fprintf(g.out, "redriven: %d\n", out["redriven"])
	return nil
}

func remoteQueues(ctx context.Context, g *globals, r *remote) error {
	var wrapped struct {
		Queues []server.QueueJSON `json:"queues"`
	}
	if err := r.get(ctx, "/v1/queues", url.Values{"counts": {"true"}}, &wrapped); err != nil {
		return err
	}
	return printQueues(g, wrapped.Queues)
}

// printQueues prints queues as the API lists them (--json), or as a table:
// how long the oldest due job has waited, then the jobs in each state.
func printQueues(g *globals, qs []server.QueueJSON) error {
	if g.asJSON {
		return writeJSON(g.out, map[string]any{"queues": qs})
	}
	header := []string{"QUEUE", "PAUSED", "OLDEST DUE"}
	for _, s := range hoppertype.JobStates() {
		header = append(header, strings.ToUpper(string(s)))
	}
	rows := make([][]string, len(qs))
	for i, q := range qs {
		oldest := "-"
		if q.Depth.OldestDueAt != nil {
			oldest = time.Duration(q.Depth.OldestDueAge).Round(time.Second).String()
		}
		row := []string{q.Name, strconv.FormatBool(q.Paused), oldest}
		for _, s := range hoppertype.JobStates() {
			row = append(row, strconv.Itoa(q.Counts[string(s)]))
		}
		rows[i] = row
	}
	return table(g.out, header, rows)
}

// Runs over the API.

func remoteRunList(ctx context.Context, g *globals, r *remote, statuses []string, workflow, parent string, limit, offset int, cursor string) error {
	q := url.Values{}
	if len(statuses) > 0 {
		q.Set("status", strings.Join(statuses, ","))
	}
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	if parent != "" {
		q.Set("parent", parent)
	}
	q.Set("limit", strconv.Itoa(limit))
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var list server.RunListJSON
	if err := r.get(ctx, "/v1/runs", q, &list); err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, list)
	}
	runs := make([]*hopper.RunInfo, len(list.Runs))
	for i, run := range list.Runs {
		runs[i] = runFromJSON(run)
	}
	return printRunTable(g, runs, list.NextCursor)
}

// runFromJSON turns the API's run into the view the human printers take.
func runFromJSON(r *server.RunJSON) *hopper.RunInfo {
	info := &hopper.RunInfo{ID: r.RunID, Workflow: r.Workflow, Status: hopper.RunStatus(r.Status), ParentID: r.ParentID,
		CodeVersion: r.CodeVersion, Attempt: r.Attempt, Input: []byte(compact(r.Input)), CreatedAt: r.CreatedAt}
	if r.EndedAt != nil {
		info.EndedAt = *r.EndedAt
	}
	if len(r.Output) > 0 && string(r.Output) != "null" {
		info.Output = []byte(compact(r.Output))
	}
	errInfo := func(e *server.ErrorJSON) *hoppertype.ErrorInfo {
		if e == nil {
			return nil
		}
		return &hoppertype.ErrorInfo{Kind: hoppertype.ErrorKind(e.Kind), Message: e.Message, Attempt: e.Attempt, At: e.At}
	}
	info.Error = errInfo(r.Error)
	for _, s := range r.Steps {
		info.Steps = append(info.Steps, hopper.StepInfo{Name: s.Name, Kind: s.Kind, Output: s.Output, Error: errInfo(s.Error), Attempts: s.Attempts, At: s.At})
	}
	for _, c := range r.Compensations {
		info.Compensations = append(info.Compensations, hopper.CompensationInfo{Name: c.Name, Executed: c.Executed, Error: c.Error})
	}
	for _, h := range r.Hooks {
		info.Hooks = append(info.Hooks, &hoppertype.HookRow{Name: h.Name, Token: h.Token, State: hoppertype.HookState(h.State)})
	}
	return info
}

func remoteRun(ctx context.Context, g *globals, r *remote, id string) error {
	var run server.RunJSON
	if err := r.get(ctx, "/v1/runs/"+pathEsc(id), nil, &run); err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, run)
	}
	return printRunText(g, runFromJSON(&run))
}

// chunks reads a page of a run's stream from the API.
func (r *remote) chunks(ctx context.Context, id string, from int64) (*server.ChunkListJSON, error) {
	var page server.ChunkListJSON
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "limit": {strconv.Itoa(tailPage)}}
	if err := r.get(ctx, "/v1/runs/"+pathEsc(id)+"/stream", q, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// schedulesCmd lists, pauses, resumes and deletes the schedules the store
// keeps (with --server, a server's process adds the ones it runs).
func schedulesCmd(g *globals) *cobra.Command {
	list := func(cmd *cobra.Command, _ []string) error {
		var infos []server.ScheduleJSON
		if r := g.remote(); r != nil {
			var wrapped struct {
				Schedules []server.ScheduleJSON `json:"schedules"`
			}
			if err := r.get(cmd.Context(), "/v1/schedules", nil, &wrapped); err != nil {
				return err
			}
			infos = wrapped.Schedules
		} else {
			err := withClient(cmd.Context(), g, func(c *hopper.Client) error {
				got, err := c.ScheduleList(cmd.Context())
				for _, in := range got {
					infos = append(infos, server.ScheduleJSONOf(in))
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		if infos == nil {
			infos = []server.ScheduleJSON{}
		}
		if g.asJSON {
			return writeJSON(g.out, map[string]any{"schedules": infos})
		}
		rows := make([][]string, len(infos))
		for i, s := range infos {
			// A name paused ahead of its deploy has no spec and no next
			// occurrence yet.
			known := s.Registered || s.Occurrences > 0 || s.Next != nil
			cron, next, last := s.Cron, "-", "-"
			if cron == "" && known {
				cron = "(Go function)"
			} else if cron == "" {
				cron = "-"
			}
			if s.Next != nil {
				next = s.Next.UTC().Format(time.RFC3339)
			} else if known {
				next = "ended"
			}
			if s.Last != nil {
				last = s.Last.UTC().Format(time.RFC3339)
			}
			target := "(code)"
			switch {
			case s.Type != "":
				target = s.Type
			case s.Workflow != "":
				target = "workflow " + s.Workflow
			}
			rows[i] = []string{s.Name, cron, target, strconv.FormatBool(s.Paused), next, strconv.FormatInt(s.Occurrences, 10), last}
		}
		return table(g.out, []string{"SCHEDULE", "CRON", "RUNS", "PAUSED", "NEXT", "FIRED", "LAST"}, rows)
	}
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List, define, pause, resume and delete schedules",
		Long: `List the schedules the store keeps: every schedule a process registered in
code (Client.Schedule), defined in the store (define) or paused by name, with
what it runs, whether it is paused, its next occurrence, how many occurrences
fired and the latest. With --server, the server's process adds the schedules
it runs that the store has not heard of yet. A paused schedule's occurrences
enqueue nothing, on every process.

Listing, pausing, resuming and deleting need an existing database (hopper
migrate --db … or hopper dev creates one); define creates it when missing.`,
		Args: cobra.NoArgs,
		RunE: list,
	}
	cmd.AddCommand(&cobra.Command{Use: "list", Short: "List schedules (the default)", Args: cobra.NoArgs, RunE: list})
	// act is a command that acts on one schedule by name: apply with the
	// client, or method on the API route /v1/schedules/NAME+route().
	act := func(use, short string, apply func(ctx context.Context, c *hopper.Client, name string) error, method string, route func() string, mode func() openMode, done, field string, value bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " SCHEDULE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var err error
				if r := g.remote(); r != nil {
					_, err = r.do(cmd.Context(), method, "/v1/schedules/"+pathEsc(args[0])+route(), nil, nil)
				} else {
					err = withClientMode(cmd.Context(), g, mode(), func(c *hopper.Client) error { return apply(cmd.Context(), c, args[0]) })
				}
				if err != nil {
					if use == "pause" {
						return withFlagHint(err, createHint)
					}
					return err
				}
				if g.asJSON {
					return writeJSON(g.out, map[string]any{"name": args[0], field: value})
				}
				fmt.Fprintf(g.out, "schedule %s %s\n", args[0], done)
				return nil
			},
		}
	}
	fixed := func(route string) func() string { return func() string { return route } }
	existing := func() openMode { return existingStore }
	var createPaused bool
	pause := act("pause", "Stop a schedule's occurrences from enqueueing, on every process",
		func(ctx context.Context, c *hopper.Client, name string) error {
			return c.SchedulePause(ctx, name, &hopper.PauseOpts{Create: createPaused})
		}, http.MethodPost, func() string {
			if createPaused {
				return "/pause?create=true"
			}
			return "/pause"
		}, func() openMode {
			if createPaused {
				return createStore
			}
			return existingStore
		}, "paused", "paused", true)
	pause.Long = `Stop a schedule's occurrences from enqueueing, on every process that runs it,
until "hopper schedules resume". A name that neither the store nor any
process knows is refused (a typo would otherwise be stored for good);
--create pauses it ahead of the deploy that registers it (and creates the
database when it does not exist).`
	pause.Flags().BoolVar(&createPaused, "create", false, "pause a schedule no process has registered yet")
	var def server.DefineScheduleJSON
	var force bool
	define := &cobra.Command{
		Use:   "define SCHEDULE --cron EXPR (--type TYPE | --workflow NAME) [--input JSON]",
		Short: "Define a schedule in the store: the processes that register its type or workflow run it",
		Long: `Define (or redefine) a schedule in the store rather than in a program's code:
every started process that registers its job type (--type) or workflow
(--workflow) enqueues that job, or starts that run, with --input at each
occurrence of --cron, once across the fleet. Processes pick it up within five
poll intervals. Its pause and counts stay when it is defined again;
"hopper schedules delete" removes it and every process stops running it.
A type or workflow that no running process registers is refused (the error
lists the registered ones): --force defines it anyway, for a deploy to come.
The database is created when it does not exist.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			def.Name = args[0]
			if r := g.remote(); r != nil {
				path := "/v1/schedules"
				if force {
					path += "?force=true"
				}
				var out server.ScheduleJSON
				if err := r.post(cmd.Context(), path, def, &out); err != nil {
					return withFlagHint(err, forceHint)
				}
			} else {
				s, err := def.StoredSchedule()
				if err != nil {
					return err
				}
				err = withClientMode(cmd.Context(), g, createStore, func(c *hopper.Client) error {
					if !force {
						if err := c.ScheduleCheckTarget(cmd.Context(), s); err != nil {
							return withFlagHint(err, forceHint)
						}
					}
					return c.ScheduleDefine(cmd.Context(), s)
				})
				if err != nil {
					return err
				}
			}
			if g.asJSON {
				return writeJSON(g.out, map[string]any{"name": def.Name, "defined": true})
			}
			fmt.Fprintf(g.out, "schedule %s defined\n", def.Name)
			return nil
		},
	}
	var input string
	define.Flags().BoolVar(&force, "force", false, "define it even though no running process registers its type or workflow")
	define.Flags().StringVar(&def.Cron, "cron", "", "cron expression (5 fields, or @hourly, @every 10m, …)")
	define.Flags().StringVar(&def.Location, "location", "", "IANA time zone the expression is read in (default UTC)")
	define.Flags().StringVar(&def.CatchUp, "catch-up", "", "how late an occurrence may still fire (default 1m; 0s: on time only)")
	define.Flags().StringVar(&def.Type, "type", "", "job type to enqueue")
	define.Flags().StringVar(&def.Workflow, "workflow", "", "workflow to start")
	define.Flags().StringVar(&input, "input", "", "JSON input of each occurrence's job or run (default null)")
	define.PreRunE = func(*cobra.Command, []string) error {
		// Say what is wrong in the flags' names, before the client or the
		// server says it in its own.
		switch {
		case def.Cron == "":
			return errors.New("schedules define needs --cron EXPR (5 fields, or @hourly, @every 10m, …)")
		case strings.HasPrefix(strings.TrimSpace(def.Cron), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(def.Cron), "TZ="):
			return errors.New("give the time zone with --location, not in --cron")
		case (def.Type == "") == (def.Workflow == ""):
			return errors.New("schedules define needs one of --type TYPE and --workflow NAME")
		}
		if def.CatchUp != "" {
			if _, err := time.ParseDuration(def.CatchUp); err != nil {
				return fmt.Errorf("--catch-up %q is not a duration (like 5m or 0s)", def.CatchUp)
			}
		}
		if input != "" {
			if !json.Valid([]byte(input)) {
				return errors.New("--input is not JSON")
			}
			def.Input = json.RawMessage(input)
		}
		return nil
	}
	cmd.AddCommand(define, pause,
		act("resume", "Let a paused schedule's occurrences fire again",
			func(ctx context.Context, c *hopper.Client, name string) error { return c.ScheduleResume(ctx, name) },
			http.MethodPost, fixed("/resume"), existing, "resumed", "paused", false),
		reword(act("delete", "Remove a stored schedule, or forget a retired code schedule's state and pause",
			func(ctx context.Context, c *hopper.Client, name string) error { return c.ScheduleDelete(ctx, name) },
			http.MethodDelete, fixed(""), existing, "deleted", "deleted", true), "schedule", "hopper schedules"),
	)
	return cmd
}

// The flags that go ahead with a name nothing knows yet, as the errors
// that refuse one suggest them.
const (
	createHint = "pass --create to pause it ahead of its first use"
	forceHint  = "pass --force to define it anyway (a process that registers it later runs it)"
)

// withFlagHint ends the error of an unknown queue, schedule or target,
// from the client or from a server, with the flag that goes ahead anyway
// (a server's own hint names its query parameter, which is replaced).
func withFlagHint(err error, hint string) error {
	var name *hopper.UnknownNameError
	var target *hopper.UnknownTargetError
	if errors.As(err, &name) || errors.As(err, &target) {
		return fmt.Errorf("%w; %s", err, hint)
	}
	var ae *apiError
	if errors.As(err, &ae) {
		if msg, _, ok := strings.Cut(ae.Message, "; add ?"); ok {
			withHint := *ae
			withHint.Message = msg + "; " + hint
			return &withHint
		}
	}
	return err
}

// notFound rewords a "not found" answer, from the store or from a server,
// as what is missing, where, and the command that lists what there is.
func notFound(err error, what, id, list string) error {
	if err == nil || !errors.Is(err, hopper.ErrNotFound) {
		return err
	}
	where := "in the database"
	var ae *apiError
	if errors.As(err, &ae) {
		where = "on the server at " + ae.Server
	}
	return fmt.Errorf("no %s %q %s (%s lists them)", what, id, where, list)
}

// reword makes a command that takes an id as its first argument say
// "not found" with notFound.
func reword(c *cobra.Command, what, list string) *cobra.Command {
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		return notFound(run(cmd, args), what, args[0], list)
	}
	return c
}
