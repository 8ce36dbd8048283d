package cli

import (
	"bufio"
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

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("server: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
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
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", r.base, err)
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
		return nil, &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
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
	q := url.Values{}
	if len(states) > 0 {
		q.Set("state", strings.Join(states, ","))
	}
	if len(p.types) > 0 {
		q.Set("type", strings.Join(p.types, ","))
	}
	if len(p.queues) > 0 {
		q.Set("queue", strings.Join(p.queues, ","))
	}
	q.Set("limit", strconv.Itoa(p.limit))
	if p.cursor != "" {
		q.Set("cursor", p.cursor)
	}
	var page server.JobListJSON
	if err := r.get(ctx, "/v1/jobs", q, &page); err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, page)
	}
	rows := make([][]string, len(page.Jobs))
	for i, j := range page.Jobs {
		ended := time.Time{}
		if j.EndedAt != nil {
			ended = *j.EndedAt
		}
		rows[i] = []string{j.ID, j.Type, j.Queue, j.State, fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), fmtTime(j.QueuedAt), fmtTime(ended)}
	}
	if err := table(g.out, []string{"ID", "TYPE", "QUEUE", "STATE", "ATTEMPT", "QUEUED", "ENDED"}, rows); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(g.out, "\nmore: --cursor %s\n", page.NextCursor)
	}
	return nil
}

func printRemoteJob(g *globals, j *server.JobJSON) error {
	if g.asJSON {
		return writeJSON(g.out, j)
	}
	ended := time.Time{}
	if j.EndedAt != nil {
		ended = *j.EndedAt
	}
	lines := [][2]string{
		{"id", j.ID}, {"type", j.Type}, {"queue", j.Queue}, {"state", j.State},
		{"attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts)}, {"priority", strconv.Itoa(j.Priority)},
		{"group", j.GroupID}, {"queued", fmtTime(j.QueuedAt)}, {"due", fmtTime(j.RunAt)}, {"ended", fmtTime(ended)},
		{"input", compact(j.Input)},
	}
	if len(j.Result) > 0 && string(j.Result) != "null" {
		lines = append(lines, [2]string{"result", compact(j.Result)})
	}
	if j.Error != nil {
		lines = append(lines, [2]string{"error", fmt.Sprintf("[%s, attempt %d] %s", j.Error.Kind, j.Error.Attempt, j.Error.Message)})
	}
	for _, l := range lines {
		fmt.Fprintf(g.out, "%-9s %s\n", l[0]+":", l[1])
	}
	return nil
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
	return printRemoteJob(g, &j)
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
	if err := r.get(ctx, "/v1/queues", nil, &wrapped); err != nil {
		return err
	}
	qs := wrapped.Queues
	if g.asJSON {
		return writeJSON(g.out, map[string]any{"queues": qs})
	}
	header := []string{"QUEUE", "PAUSED"}
	states := []string{"pending", "scheduled", "running", "retrying", "succeeded", "dead", "expired", "cancelled", "stuck"}
	for _, s := range states {
		header = append(header, strings.ToUpper(s))
	}
	rows := make([][]string, len(qs))
	for i, q := range qs {
		row := []string{q.Name, strconv.FormatBool(q.Paused)}
		for _, s := range states {
			row = append(row, strconv.Itoa(q.Counts[s]))
		}
		rows[i] = row
	}
	return table(g.out, header, rows)
}

// Runs over the API.

func remoteRunList(ctx context.Context, g *globals, r *remote, statuses []string, workflow, parent string, limit, offset int) error {
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
	q.Set("offset", strconv.Itoa(offset))
	var list server.RunListJSON
	if err := r.get(ctx, "/v1/runs", q, &list); err != nil {
		return err
	}
	if g.asJSON {
		return writeJSON(g.out, list)
	}
	rows := make([][]string, len(list.Runs))
	for i, run := range list.Runs {
		ended := time.Time{}
		if run.EndedAt != nil {
			ended = *run.EndedAt
		}
		rows[i] = []string{run.RunID, run.Workflow, run.Status, orDash(run.ParentID), fmtTime(run.CreatedAt), fmtTime(ended)}
	}
	return table(g.out, []string{"ID", "WORKFLOW", "STATUS", "PARENT", "CREATED", "ENDED"}, rows)
}

func printRemoteRun(g *globals, run *server.RunJSON) error {
	if g.asJSON {
		return writeJSON(g.out, run)
	}
	ended := time.Time{}
	if run.EndedAt != nil {
		ended = *run.EndedAt
	}
	lines := [][2]string{
		{"id", run.RunID}, {"workflow", run.Workflow}, {"status", run.Status}, {"parent", orDash(run.ParentID)},
		{"attempt", strconv.Itoa(run.Attempt)}, {"created", fmtTime(run.CreatedAt)}, {"ended", fmtTime(ended)},
		{"input", compact(run.Input)},
	}
	if len(run.Output) > 0 && string(run.Output) != "null" {
		lines = append(lines, [2]string{"output", compact(run.Output)})
	}
	if run.Error != nil {
		lines = append(lines, [2]string{"error", fmt.Sprintf("[%s] %s", run.Error.Kind, run.Error.Message)})
	}
	for _, l := range lines {
		fmt.Fprintf(g.out, "%-9s %s\n", l[0]+":", l[1])
	}
	if len(run.Steps) > 0 {
		fmt.Fprintln(g.out, "\nsteps:")
		rows := make([][]string, len(run.Steps))
		for i, s := range run.Steps {
			res := string(s.Output)
			if s.Error != nil {
				res = "error: " + s.Error.Message
			}
			rows[i] = []string{strconv.Itoa(i + 1), s.Name, s.Kind, truncate(res, 60), fmtTime(s.At)}
		}
		if err := table(g.out, []string{"#", "STEP", "KIND", "RESULT", "AT"}, rows); err != nil {
			return err
		}
	}
	if len(run.Hooks) > 0 {
		fmt.Fprintln(g.out, "\nhooks:")
		rows := make([][]string, len(run.Hooks))
		for i, h := range run.Hooks {
			rows[i] = []string{h.Name, h.State, h.Token}
		}
		if err := table(g.out, []string{"NAME", "STATE", "TOKEN"}, rows); err != nil {
			return err
		}
	}
	return nil
}

func remoteRun(ctx context.Context, g *globals, r *remote, id string) error {
	var run server.RunJSON
	if err := r.get(ctx, "/v1/runs/"+pathEsc(id), nil, &run); err != nil {
		return err
	}
	return printRemoteRun(g, &run)
}

// remoteTail prints a run's stream from the API's Server-Sent Events,
// following it until the run ends (or, without follow, until the chunks
// written so far are printed: the server sends them first).
func remoteTail(ctx context.Context, g *globals, r *remote, id string, from int64, follow bool) error {
	if !follow {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	u := fmt.Sprintf("%s/v1/runs/%s/stream?from=%d", r.base, pathEsc(id), from)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w", r.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var event, offset, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			offset = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
			switch event {
			case "chunk":
				if g.asJSON {
					n, _ := strconv.ParseInt(offset, 10, 64)
					b, err := json.Marshal(struct {
						Offset int64           `json:"offset"`
						Data   json.RawMessage `json:"data"`
					}{n, rawOrNil([]byte(data))})
					if err != nil {
						return err
					}
					fmt.Fprintln(g.out, string(b))
				} else {
					fmt.Fprintf(g.out, "%s %s\n", offset, data)
				}
			case "end":
				return nil
			case "error":
				return fmt.Errorf("server: %s", data)
			case "caught-up":
				if !follow {
					return nil
				}
			}
			event, offset, data = "", "", ""
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
