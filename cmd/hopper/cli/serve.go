package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/server"
)

// serveOpts are the flags of hopper dev and hopper serve.
type serveOpts struct {
	addr     string
	tokens   []string
	examples bool
	// stopWait is how long a stop (Ctrl-C, SIGTERM) waits for running jobs.
	stopWait time.Duration
	// readTimeout bounds the read of a request (server.Options.ReadTimeout).
	readTimeout time.Duration
	// historyLimit caps the store's history the charts read back
	// (server.Options.HistoryLimit).
	historyLimit int
}

func (o *serveOpts) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", envOr("HOPPER_ADDR", "127.0.0.1:7700"), "address of the API and dashboard [$HOPPER_ADDR]")
	var envTokens []string
	for _, t := range strings.Split(os.Getenv("HOPPER_TOKENS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			envTokens = append(envTokens, t)
		}
	}
	f.StringArrayVar(&o.tokens, "token", envTokens, "API token (repeatable) [$HOPPER_TOKENS, comma-separated]")
	f.DurationVar(&o.readTimeout, "read-timeout", time.Minute, "how long a request's headers and body may take to arrive before the connection is cut (headers: at most 10s)")
	f.IntVar(&o.historyLimit, "history-limit", 200_000, "changes of the store's feed read back at start to fill the dashboard's charts with the last day (negative: none)")
	f.DurationVar(&o.stopWait, "stop-timeout", 10*time.Second, "how long Ctrl-C or SIGTERM waits for running jobs before cancelling them (they run again at the next start)")
}

func devCmd(g *globals) *cobra.Command {
	o := &serveOpts{examples: true}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run hopper locally: embedded SQLite, example job types, workers, dashboard and API",
		Long: `Run hopper locally: an embedded SQLite database (./hopper.db unless --db says
otherwise), the example job types registered and their workers running, and the
HTTP API and dashboard on http://127.0.0.1:7700. The database is created when
it does not exist. Ctrl-C stops cleanly; a killed
process loses nothing (unfinished jobs carry on at the next start).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), g, o, "hopper dev") },
	}
	o.add(cmd)
	return cmd
}

func serveCmd(g *globals) *cobra.Command {
	o := &serveOpts{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API and dashboard over a database",
		Long: `Serve the HTTP API and dashboard over a database (--db sqlite://… or
postgres://…; created, with its schema, when missing), for operators. This process takes part in maintenance (rescuing
jobs of dead workers, retention) and runs workers only for job types compiled
into this binary: the examples, with --examples.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), g, o, "hopper serve") },
	}
	o.add(cmd)
	cmd.Flags().BoolVar(&o.examples, "examples", false, "register and run the example job types")
	return cmd
}

func runServe(ctx context.Context, g *globals, o *serveOpts, name string) error {
	// The server refuses these too, but only once it is built: here, before
	// anything is bound, created or started.
	if err := server.CheckTokens(o.tokens); err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	if len(o.tokens) == 0 && !server.IsLoopback(o.addr) {
		return fmt.Errorf("refusing to serve %s without an API token: pass --token (or $HOPPER_TOKENS) with at least %d characters, or bind to 127.0.0.1", o.addr, server.MinTokenLength)
	}
	if o.stopWait <= 0 {
		return errors.New("--stop-timeout must be positive")
	}
	ln, err := net.Listen("tcp", o.addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is in use (another hopper dev or serve?): stop that process, or pass --addr with another address, such as --addr 127.0.0.1:0 for any free port", o.addr)
	}
	if err != nil {
		return fmt.Errorf("listen on --addr %s: %w", o.addr, err)
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String()
	d, err := openDriver(ctx, g.db, createStore)
	if err != nil {
		return err
	}
	defer d.Close()
	logger := slog.New(slog.NewTextHandler(g.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := hopper.New(hopper.Config{Driver: d, Logger: logger, WebhookBaseURL: url + "/v1/webhooks/"})
	if err != nil {
		return err
	}
	if o.examples {
		if err := c.Register(exampleTypes()...); err != nil {
			return err
		}
		for _, sc := range exampleSchedules() {
			if _, err := c.Schedule(sc); err != nil {
				return err
			}
		}
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			stopClient(g, c, name, o.stopWait, false)
		}
	}()
	s := server.New(c, &server.Options{Tokens: o.tokens, Logger: logger, ReadTimeout: o.readTimeout, HistoryLimit: o.historyLimit})
	defer s.Close()
	fmt.Fprintf(g.out, "%s: dashboard and API on %s (database %s)\n", name, url, g.db)
	if len(o.tokens) == 0 {
		fmt.Fprintf(g.out, "  no API token set: listening on loopback only\n")
	}
	if o.examples {
		auth := ""
		if len(o.tokens) > 0 {
			auth = `-H "Authorization: Bearer $TOKEN" `
		}
		fmt.Fprintf(g.out, "  try: curl -s %s%s/v1/jobs --json '{\"type\":\"add\",\"input\":{\"a\":1,\"b\":2}}'\n", auth, url)
		fmt.Fprintf(g.out, "       curl -s %s%s/v1/runs --json '{\"workflow\":\"order\",\"input\":{\"order_id\":\"o1\",\"amount\":42}}'\n", auth, url)
	}
	fmt.Fprintln(g.out, "  Ctrl-C stops")
	err = s.Serve(ctx, ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if ctx.Err() != nil {
		stopped = true
		stopClient(g, c, name, o.stopWait, true)
	}
	return err
}

// stopClient stops c, giving its running jobs wait to finish; when told,
// it says what it waits for and what it left.
func stopClient(g *globals, c *hopper.Client, name string, wait time.Duration, tell bool) {
	active := c.Active()
	if tell {
		if len(active) == 0 {
			fmt.Fprintf(g.out, "%s: stopping: no job running\n", name)
		} else {
			fmt.Fprintf(g.out, "%s: stopping: waiting up to %s for %s to finish: %s\n", name, wait, plural(len(active), "running job"), jobList(active))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := c.Stop(ctx)
	if !tell {
		return
	}
	var left []*hopper.JobRow
	for _, j := range active {
		if row, gerr := c.JobGet(context.Background(), j.ID); gerr == nil && !row.State.Terminal() {
			left = append(left, row)
		}
	}
	switch {
	case err != nil && len(left) > 0:
		fmt.Fprintf(g.out, "%s: stopped; %s did not finish within %s and run again at the next start: %s\n", name, plural(len(left), "job"), wait, jobList(left))
	case err != nil:
		fmt.Fprintf(g.out, "%s: stopped, after cancelling what was still running at %s\n", name, wait)
	default:
		fmt.Fprintf(g.out, "%s: stopped\n", name)
	}
}

// plural says n things.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// jobList names jobs for a status line, at most five.
func jobList(jobs []*hopper.JobRow) string {
	names := make([]string, 0, min(len(jobs), 5))
	for i, j := range jobs {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(jobs)-5))
			break
		}
		names = append(names, j.Type+" "+j.ID)
	}
	return strings.Join(names, ", ")
}
