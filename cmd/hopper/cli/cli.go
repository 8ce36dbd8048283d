// Package cli implements the hopper command line. main stays tiny; every
// command lives here so it can be tested in-process.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Version is the hopper version, set at build time with
// -ldflags "-X github.com/hopper-go/hopper/cmd/hopper/cli.Version=v1.2.3".
var Version = "dev"

// Main runs the command line with args and returns the exit code. SIGINT
// and SIGTERM stop it cleanly (hopper dev and serve say what they wait
// for).
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mainContext(ctx, args, stdout, stderr)
}

// mainContext is Main under ctx, whose end stops the command as a signal
// does.
func mainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, errorLine(err))
		return 1
	}
	return 0
}

// errorLine is how an error reads on stderr: "hopper: " once, and no clause
// said twice in a row (the client, its driver and a server each name what
// failed, and hopper's sentinel errors start with "hopper: " too).
func errorLine(err error) string {
	var kept []string
	for _, part := range strings.Split(err.Error(), ": ") {
		if part == "hopper" || part == "" {
			continue
		}
		if n := len(kept); n > 0 && sameClause(kept[n-1], part) {
			continue
		}
		kept = append(kept, part)
	}
	return "hopper: " + strings.Join(kept, ": ")
}

// sameClause reports whether two clauses say the same, quotes aside
// (`get job x` and `get job "x"`).
func sameClause(a, b string) bool {
	unquote := func(s string) string { return strings.ReplaceAll(s, `"`, "") }
	return unquote(a) == unquote(b)
}

// globals are the flags every command shares.
type globals struct {
	db     string
	asJSON bool
	// server and apiToken, when server is set, send the operator commands
	// to a hopper server's HTTP API instead of the database.
	server   string
	apiToken string
	out      io.Writer
	errw     io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{out: stdout, errw: stderr}
	root := &cobra.Command{
		Use:           "hopper",
		Short:         "hopper: a durable job queue and workflow engine for Go",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return g.checkServer() }
	root.PersistentFlags().StringVar(&g.db, "db", envOr("HOPPER_DB", "sqlite://hopper.db"), "database: a file path or URL (sqlite://…, postgres://…[?schema=NAME], memory://); only migrate, dev, serve, bench and schedules define create a missing one [$HOPPER_DB]")
	root.PersistentFlags().BoolVar(&g.asJSON, "json", false, "print JSON for scripts instead of tables")
	root.PersistentFlags().StringVar(&g.server, "server", os.Getenv("HOPPER_SERVER"), "send jobs, dead, queues, runs, hooks and schedules commands to this hopper server (http://host:port; a bare host:port means http://) instead of --db [$HOPPER_SERVER]")
	root.PersistentFlags().StringVar(&g.apiToken, "api-token", os.Getenv("HOPPER_API_TOKEN"), "the API token for --server [$HOPPER_API_TOKEN]")
	root.AddCommand(versionCmd(g), benchCmd(g), jobsCmd(g), deadCmd(g), queuesCmd(g), workersCmd(g), eventsCmd(g), runsCmd(g), hooksCmd(g), schedulesCmd(g), devCmd(g), serveCmd(g), migrateCmd(g))
	return root
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the hopper version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := Version
			if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			if g.asJSON {
				return writeJSON(g.out, map[string]string{"version": v})
			}
			fmt.Fprintln(g.out, "hopper", v)
			return nil
		},
	}
}
