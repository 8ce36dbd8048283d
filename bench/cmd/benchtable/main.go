// Command benchtable is run.sh's helper: it records runs, writes the markdown
// table of medians and ratios, and makes and drops the fresh PostgreSQL
// databases every PostgreSQL run gets.
//
//	benchtable add RAW GROUP ROW SIDE LABEL OUTFILE [ERRFILE [CMD]]
//	    append one run to RAW (JSON lines). SIDE is hopper or peer; OUTFILE
//	    holds the program's --json output (empty or invalid: the run failed,
//	    and ERRFILE's last line says why); CMD is the command that ran.
//	benchtable note RAW GROUP TEXT     a note printed under GROUP's table
//	benchtable report RAW              markdown tables on stdout
//	benchtable pgdb create URL         make a fresh database, print its URL
//	benchtable pgdb drop URL           drop that database
//	benchtable pgdb settle URL         CHECKPOINT: write out what earlier runs left dirty
//	benchtable pgdb version URL        print the server's version()
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

type record struct {
	Group  string          `json:"group"`
	Row    string          `json:"row,omitempty"`
	Side   string          `json:"side,omitempty"`
	Label  string          `json:"label,omitempty"`
	Note   string          `json:"note,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Cmd    string          `json:"cmd,omitempty"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: benchtable add|note|report|pgdb …")
	}
	switch args[0] {
	case "add":
		if len(args) < 7 {
			return errors.New("usage: benchtable add RAW GROUP ROW SIDE LABEL OUTFILE [ERRFILE]")
		}
		r := record{Group: args[2], Row: args[3], Side: args[4], Label: args[5]}
		if len(args) > 8 {
			r.Cmd = args[8]
		}
		out, _ := os.ReadFile(args[6])
		var probe map[string]any
		if err := json.Unmarshal(out, &probe); err == nil && probe["mode"] != nil {
			if addCPU(probe) {
				if out, err = json.Marshal(probe); err != nil {
					return err
				}
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, out); err != nil {
				return err
			}
			r.Result = json.RawMessage(buf.String())
		} else {
			r.Error = "no result"
			if len(args) > 7 {
				if b, err := os.ReadFile(args[7]); err == nil {
					if l := lastLine(string(b)); l != "" {
						r.Error = l
					}
				}
			}
		}
		return appendRecord(args[1], r)
	case "note":
		if len(args) != 4 {
			return errors.New("usage: benchtable note RAW GROUP TEXT")
		}
		return appendRecord(args[1], record{Group: args[2], Note: args[3]})
	case "report":
		if len(args) != 2 {
			return errors.New("usage: benchtable report RAW")
		}
		return report(args[1])
	case "pgdb":
		if len(args) != 3 {
			return errors.New("usage: benchtable pgdb create|drop|settle|version|postmaster URL")
		}
		return pgdb(args[1], args[2])
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// addCPU adds the CPU a run cost per job (throughput) or per workflow
// (workflow mode) to its result, from the seconds run.sh measured:
// BENCH_CPU_CLIENT_S (the benchmark process and its children) and
// BENCH_CPU_SERVER_S (PostgreSQL's backends that exited during the run,
// when the server is on this machine). A workflow run's CPU is the whole
// process's (its sequential runs and set-up included) over its workflows.
// It reports whether it added any.
func addCPU(res map[string]any) bool {
	var n float64
	var client, server string
	switch res["mode"] {
	case "throughput":
		n, _ = res["jobs"].(float64)
		if backlog, _ := res["backlog"].(float64); backlog > 0 {
			return false // a backlog run's CPU is mostly storing the backlog
		}
		client, server = "client_cpu_us_per_job", "server_cpu_us_per_job"
	case "workflow":
		n, _ = res["workflows"].(float64)
		client, server = "client_cpu_us_per_run", "server_cpu_us_per_run"
	default:
		return false
	}
	if n <= 0 {
		return false
	}
	added := false
	for env, key := range map[string]string{"BENCH_CPU_CLIENT_S": client, "BENCH_CPU_SERVER_S": server} {
		if v, err := strconv.ParseFloat(os.Getenv(env), 64); err == nil && v > 0 {
			res[key] = v * 1e6 / n
			added = true
		}
	}
	return added
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func appendRecord(path string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// metric is one number a row compares.
type metric struct {
	key         string
	name        string
	lowerBetter bool
	// optional metrics are left out of a row where neither side has them
	// (the server's CPU without a local server).
	optional bool
}

func metricsFor(mode string) []metric {
	switch mode {
	case "throughput":
		return []metric{{"work_jobs_per_s", "work jobs/s", false, false}, {"insert_jobs_per_s", "insert jobs/s", false, false},
			{"client_cpu_us_per_job", "client CPU µs/job", true, true}, {"server_cpu_us_per_job", "server CPU µs/job", true, true}}
	case "latency":
		return []metric{{"p50_ms", "enqueue→start p50 ms", true, false}, {"p99_ms", "enqueue→start p99 ms", true, false}, {"max_ms", "enqueue→start max ms", true, false}}
	case "workflow":
		return []metric{{"workflows_per_s", "workflows/s", false, false}, {"steps_per_s", "steps/s", false, false}, {"seq_p50_ms", "sequential p50 ms", true, false}, {"seq_p99_ms", "sequential p99 ms", true, false},
			{"client_cpu_us_per_run", "client CPU µs/workflow", true, true}, {"server_cpu_us_per_run", "server CPU µs/workflow", true, true}}
	}
	return nil
}

type runRes struct {
	mode   string
	values map[string]float64
	config string
	raw    map[string]any
}

func parse(raw json.RawMessage) (*runRes, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	r := &runRes{values: map[string]float64{}, raw: m}
	r.mode, _ = m["mode"].(string)
	r.config, _ = m["config"].(string)
	for k, v := range m {
		if f, ok := v.(float64); ok {
			r.values[k] = f
		}
	}
	return r, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func fmtNum(x float64) string {
	switch {
	case x >= 1000:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}

type side struct {
	label  string
	cmd    string
	runs   []*runRes
	errors []string
}

func (s *side) add(r record) {
	if s.label == "" {
		s.label = r.Label
	}
	if s.cmd == "" {
		s.cmd = r.Cmd
	}
	if r.Result == nil {
		s.errors = append(s.errors, r.Error)
		return
	}
	if p, err := parse(r.Result); err == nil {
		s.runs = append(s.runs, p)
	} else {
		s.errors = append(s.errors, err.Error())
	}
}

func (s *side) mode() string {
	for _, r := range s.runs {
		return r.mode
	}
	return ""
}

// cell is the median of key over s's runs, with failures noted.
func (s *side) cell(key string) (string, float64, bool) {
	var xs []float64
	for _, r := range s.runs {
		if v, ok := r.values[key]; ok {
			xs = append(xs, v)
		}
	}
	fail := ""
	if len(s.errors) > 0 {
		fail = fmt.Sprintf(" (%d failed)", len(s.errors))
	}
	if len(xs) == 0 {
		if len(s.errors) > 0 {
			return "failed" + fail, 0, false
		}
		return "n/a", 0, false
	}
	m := median(xs)
	return fmtNum(m) + fail, m, true
}

type group struct {
	name   string
	hopper side
	rows   []string
	peers  map[string]*side
	notes  []string
}

func report(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var groups []*group
	byName := map[string]*group{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return err
		}
		g := byName[r.Group]
		if g == nil {
			g = &group{name: r.Group, peers: map[string]*side{}}
			byName[r.Group] = g
			groups = append(groups, g)
		}
		switch {
		case r.Note != "":
			g.notes = append(g.notes, r.Note)
		case r.Side == "hopper":
			g.hopper.add(r)
		default:
			p := g.peers[r.Row]
			if p == nil {
				p = &side{}
				g.peers[r.Row] = p
				g.rows = append(g.rows, r.Row)
			}
			p.add(r)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintln(w, "Ratio: hopper ÷ peer for rates (jobs/s, workflows/s), peer ÷ hopper for times (ms), so **> 1 means hopper is better** on every line. Each cell is the median of the repetitions (failed runs are left out and counted).")
	fmt.Fprintln(w)
	for _, g := range groups {
		fmt.Fprintf(w, "### %s\n\n", g.name)
		fmt.Fprintln(w, "| comparison | metric | hopper | hopper median | peer median | ratio |")
		fmt.Fprintln(w, "|---|---|---|---:|---:|---:|")
		for _, row := range g.rows {
			p := g.peers[row]
			mode := p.mode()
			if mode == "" {
				mode = g.hopper.mode()
			}
			ms := metricsFor(mode)
			if len(ms) == 0 {
				hc, _, _ := g.hopper.cell("")
				pc, _, _ := p.cell("")
				fmt.Fprintf(w, "| %s | – | %s | %s | %s | – |\n", row, cmp.Or(g.hopper.label, "(skipped)"), hc, pc)
				continue
			}
			shown := 0
			for _, m := range ms {
				hc, hv, hok := g.hopper.cell(m.key)
				pc, pv, pok := p.cell(m.key)
				if m.optional && !hok && !pok {
					continue
				}
				ratio := "n/a"
				if hok && pok && hv > 0 && pv > 0 {
					r := hv / pv
					if m.lowerBetter {
						r = pv / hv
					}
					ratio = fmt.Sprintf("%.2f×", r)
				}
				name := row
				if shown > 0 {
					name = "〃"
				}
				shown++
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", name, m.name, cmp.Or(g.hopper.label, "(skipped)"), hc, pc, ratio)
			}
		}
		fmt.Fprintln(w)
		for _, n := range g.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		if len(g.hopper.errors) > 0 {
			fmt.Fprintf(w, "- hopper failures: %s\n", strings.Join(uniq(g.hopper.errors), "; "))
		}
		for _, row := range g.rows {
			if errs := g.peers[row].errors; len(errs) > 0 {
				fmt.Fprintf(w, "- %s failures: %s\n", row, strings.Join(uniq(errs), "; "))
			}
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "### Configurations and every run")
	fmt.Fprintln(w)
	for _, g := range groups {
		sides := []*side{&g.hopper}
		names := []string{"hopper: " + g.hopper.label}
		for _, row := range g.rows {
			sides = append(sides, g.peers[row])
			names = append(names, row)
		}
		fmt.Fprintf(w, "**%s**\n\n", g.name)
		for i, s := range sides {
			if len(s.runs) == 0 {
				continue
			}
			fmt.Fprintf(w, "- %s\n", names[i])
			if s.cmd != "" {
				fmt.Fprintf(w, "  - command: `%s`\n", s.cmd)
			}
			if c := s.runs[0].config; c != "" {
				fmt.Fprintf(w, "  - config: %s\n", c)
			}
			for _, r := range s.runs {
				var parts []string
				for _, m := range metricsFor(r.mode) {
					parts = append(parts, fmt.Sprintf("%s %s", m.name, fmtNum(r.values[m.key])))
				}
				if n, ok := r.values["completed"]; ok {
					parts = append(parts, fmt.Sprintf("completed %.0f", n))
				}
				if n, ok := r.values["jobs"]; ok && r.mode == "latency" {
					parts = append(parts, fmt.Sprintf("jobs %.0f", n))
				}
				fmt.Fprintf(w, "  - run: %s\n", strings.Join(parts, ", "))
			}
		}
		fmt.Fprintln(w)
	}
	return nil
}

func uniq(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// queryOne reads one row of query, on a connection of its own, into dest.
func queryOne(ctx context.Context, raw, query string, dest ...any) error {
	c, err := pgx.Connect(ctx, raw)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.QueryRow(ctx, query).Scan(dest...)
}

func pgdb(cmd, raw string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch cmd {
	case "version":
		var v string
		if err := queryOne(ctx, raw, `SELECT version()`, &v); err != nil {
			return err
		}
		fmt.Println(v)
		return nil
	case "postmaster":
		// The PID of the server's postmaster, when it runs on this
		// machine: the parent of this connection's backend, read while
		// the connection is open (the backend exits with it).
		c, err := pgx.Connect(ctx, raw)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		var pid int
		if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return fmt.Errorf("the server is not on this machine: %w", err)
		}
		// Fields after the command name, which is in parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			return errors.New("unreadable /proc stat")
		}
		fmt.Println(f[1])
		return nil
	case "create":
		var b [5]byte
		_, _ = rand.Read(b[:])
		name := "hopper_bench_" + hex.EncodeToString(b[:])
		c, err := pgx.Connect(ctx, raw)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
		u.Path = "/" + name
		fmt.Println(u.String())
		return nil
	case "settle":
		// The previous run's dirty pages, written out now rather than by
		// the background writer and the timed checkpoint during the next
		// run (whichever program it measures, on either store: they share
		// the disk).
		c, err := pgx.Connect(ctx, raw)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "CHECKPOINT")
		return err
	case "drop":
		name := strings.TrimPrefix(u.Path, "/")
		if !strings.HasPrefix(name, "hopper_bench_") {
			return fmt.Errorf("refusing to drop %q: not a database benchtable made", name)
		}
		u.Path = "/postgres"
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	}
	return fmt.Errorf("unknown pgdb command %q", cmd)
}
