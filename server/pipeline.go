package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hoppertype"
)

// Fan-out, gates and groups: the gates watching a job (GET
// /v1/jobs/{id}/gates), a group's counts, and the job page's view of a
// pipeline — its children, group, gates and a small graph (parent →
// job → children → gate → next jobs).

// inspectRoutes are the API routes of fan-outs, gates and run timelines.
func (s *Server) inspectRoutes() {
	s.mux.Handle("GET /v1/jobs/{id}/gates", s.auth(http.HandlerFunc(s.listGates)))
	s.mux.Handle("GET /v1/runs/{id}/timeline", s.auth(http.HandlerFunc(s.runTimeline)))
}

// GatesJSON is the answer of GET /v1/jobs/{id}/gates.
type GatesJSON struct {
	Gates []*GateJSON `json:"gates"`
}

// listGates serves GET /v1/jobs/{id}/gates: the gates that watch the job,
// each with what it has seen and where it stands.
func (s *Server) listGates(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > hopper.MaxListLimit {
			s.fail(w, r, badRequest("limit must be between 1 and %d", hopper.MaxListLimit))
			return
		}
		limit = n
	}
	gates, err := s.c.GatesWatching(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := GatesJSON{Gates: make([]*GateJSON, len(gates))}
	for i, g := range gates {
		out.Gates[i] = gateJSON(g)
	}
	writeJSON(w, http.StatusOK, out)
}

// groupCountCap is how many of a group's jobs the job page counts by
// state, from the group's index: a few milliseconds on either store.
const groupCountCap = 10_000

// childrenPage is how many children the job page lists at a time.
const childrenPage = 25

// graphWidth caps how many nodes a column of the pipeline graph shows.
const graphWidth = 8

// jobPipeline adds to the job page's data what the job fanned out, its
// group, the gates watching it and the pipeline graph.
func (s *Server) jobPipeline(ctx context.Context, row *hopper.JobRow, q url.Values, data map[string]any) error {
	cursor := q.Get("children")
	kids, err := s.c.JobList(ctx, &hopper.ListParams{ParentID: row.ID, Limit: childrenPage, Cursor: cursor, Ascending: true})
	if err != nil {
		return err
	}
	data["Children"] = kids.Jobs
	if kids.NextCursor != "" {
		data["ChildrenNext"] = kids.NextCursor
	}
	data["ChildrenPaged"] = cursor != ""
	if len(kids.Jobs) > 0 || row.GroupID != row.ID || cursor != "" {
		g, err := s.c.GroupGet(ctx, row.GroupID)
		if err != nil && !errors.Is(err, hopper.ErrNotFound) {
			return err
		}
		if g != nil {
			gc, err := s.c.GroupCount(ctx, row.GroupID, groupCountCap)
			if err != nil {
				return err
			}
			data["Group"], data["GroupCounts"], data["GroupCounted"] = g, stateCounts(byStateName(gc.ByState)), gc

		}
	}
	watching, err := s.c.GatesWatching(ctx, row.ID, 20)
	if err != nil {
		return err
	}
	data["Watching"] = watching
	first := kids.Jobs
	more := kids.NextCursor != ""
	if cursor != "" { // the graph always shows the first children
		pg, err := s.c.JobList(ctx, &hopper.ListParams{ParentID: row.ID, Limit: childrenPage, Ascending: true})
		if err != nil {
			return err
		}
		first, more = pg.Jobs, pg.NextCursor != ""
	}
	gr, err := s.pipelineGraph(ctx, row, first, more, watching)
	if err != nil {
		return err
	}
	if gr != nil {
		data["Graph"] = gr
	}
	return nil
}

// byStateName keys counts by their states' names.
func byStateName(m map[hopper.JobState]int) map[string]int {
	out := make(map[string]int, len(m))
	for st, n := range m {
		out[string(st)] = n
	}
	return out
}

// stateCount is one state's count, in the order of hopper's states.
type stateCount struct {
	State string
	N     int
}

func stateCounts(m map[string]int) []stateCount {
	var out []stateCount
	for _, st := range hoppertype.JobStates() {
		if n := m[string(st)]; n > 0 {
			out = append(out, stateCount{State: string(st), N: n})
		}
	}
	return out
}

// graphNode is a box of the pipeline graph.
type graphNode struct {
	ID, Label, Sub, State string
	// Link is the page it opens; empty for a "more" box.
	Link                string
	Current             bool
	col                 int
	X, Y                float64
	TextX, LabelY, SubY float64
	// Shown is Label cut to fit its box.
	Shown string
}

// graphEdge is an arrow between two boxes, as an SVG path.
type graphEdge struct {
	from, to string
	D        string
}

// pipelineGraph is a laid-out graph of a job's pipeline.
type pipelineGraph struct {
	Width, Height float64
	NodeW, NodeH  float64
	Nodes         []*graphNode
	Edges         []graphEdge
}

type graphBuilder struct {
	s     *Server
	ctx   context.Context
	nodes []*graphNode
	byID  map[string]*graphNode
	edges []graphEdge
	seen  map[[2]string]bool
}

func (b *graphBuilder) node(col int, id string, row *hopper.JobRow) *graphNode {
	if n := b.byID[id]; n != nil {
		return n
	}
	n := &graphNode{ID: id, col: col, Label: "not queued yet", Sub: shortID(id), Link: "/jobs/" + url.PathEscape(id)}
	if row != nil {
		n.State = string(row.State)
		switch {
		case hopper.IsGate(row):
			n.Label = "gate"
		default:
			if wf, _, ok := hopper.RunOf(row); ok {
				n.Label = "workflow " + wf
			} else {
				n.Label = row.Type
			}
		}
	}
	b.nodes = append(b.nodes, n)
	b.byID[id] = n
	return n
}

// lookup reads a job for a box; nil when it does not exist (yet).
func (b *graphBuilder) lookup(id string) (*hopper.JobRow, error) {
	row, err := b.s.c.JobGet(b.ctx, id)
	if errors.Is(err, hopper.ErrNotFound) {
		return nil, nil
	}
	return row, err
}

func (b *graphBuilder) more(col int, key, label string) *graphNode {
	n := &graphNode{ID: "more:" + key, col: col, Label: label, Sub: ""}
	b.nodes = append(b.nodes, n)
	b.byID[n.ID] = n
	return n
}

func (b *graphBuilder) edge(from, to string) {
	k := [2]string{from, to}
	if from == to || b.seen[k] {
		return
	}
	b.seen[k] = true
	b.edges = append(b.edges, graphEdge{from: from, to: to})
}

// gateNext adds a gate's next jobs in col.
func (b *graphBuilder) gateNext(col int, g *hopper.GateInfo) error {
	for i, n := range g.Next {
		if i == graphWidth/2 {
			m := b.more(col, g.ID+":next", fmt.Sprintf("+%d more", len(g.Next)-i))
			b.edge(g.ID, m.ID)
			break
		}
		row, err := b.lookup(n.ID)
		if err != nil {
			return err
		}
		nd := b.node(col, n.ID, row)
		if row == nil {
			nd.Label = n.Type + " (not queued yet)"
		}
		b.edge(g.ID, n.ID)
	}
	return nil
}

// pipelineGraph draws a job's pipeline: its parent, itself, its first
// children, the gates watching it or them, and what those gates queue. A
// gate's page draws the jobs it watches, the gate and what it queues. It
// returns nil when there is nothing to draw beyond the job itself.
func (s *Server) pipelineGraph(ctx context.Context, row *hopper.JobRow, kids []*hopper.JobRow, moreKids bool, watching []*hopper.GateInfo) (*pipelineGraph, error) {
	b := &graphBuilder{s: s, ctx: ctx, byID: map[string]*graphNode{}, seen: map[[2]string]bool{}}
	if g, ok := hopper.ParseGate(row); ok {
		for i, on := range g.On {
			if i == graphWidth {
				m := b.more(0, "on", fmt.Sprintf("+%d more", len(g.On)-i))
				b.edge(m.ID, row.ID)
				break
			}
			r, err := b.lookup(on)
			if err != nil {
				return nil, err
			}
			b.node(0, on, r)
			b.edge(on, row.ID)
		}
		b.node(1, row.ID, row).Current = true
		if err := b.gateNext(2, g); err != nil {
			return nil, err
		}
		return b.layout(), nil
	}
	col := 0
	if row.ParentID != "" {
		p, err := b.lookup(row.ParentID)
		if err != nil {
			return nil, err
		}
		b.node(0, row.ParentID, p)
		b.edge(row.ParentID, row.ID)
		col = 1
	}
	b.node(col, row.ID, row).Current = true
	var gates []*hopper.GateInfo
	addGate := func(g *hopper.GateInfo) {
		for _, have := range gates {
			if have.ID == g.ID {
				return
			}
		}
		gates = append(gates, g)
	}
	for _, g := range watching {
		addGate(g)
	}
	shown := 0
	for _, k := range kids {
		if hopper.IsGate(k) {
			if g, err := s.c.GateGet(ctx, k.ID); err == nil {
				addGate(g)
			} else if !errors.Is(err, hopper.ErrNotFound) {
				return nil, err
			}
			continue
		}
		if shown == graphWidth {
			moreKids = true
			continue
		}
		shown++
		b.node(col+1, k.ID, k)
		b.edge(row.ID, k.ID)
		ws, err := s.c.GatesWatching(ctx, k.ID, 4)
		if err != nil {
			return nil, err
		}
		for _, g := range ws {
			addGate(g)
		}
	}
	if moreKids {
		m := b.more(col+1, "kids", "more children…")
		b.edge(row.ID, m.ID)
	}
	if len(gates) > graphWidth/2 {
		gates = gates[:graphWidth/2]
	}
	gateCol := col + 2
	if shown == 0 && !moreKids {
		gateCol = col + 1
	}
	for _, g := range gates {
		gr, err := b.lookup(g.ID)
		if err != nil {
			return nil, err
		}
		b.node(gateCol, g.ID, gr)
		linked := false
		for _, on := range g.On {
			if n := b.byID[on]; n != nil && n.col < gateCol {
				b.edge(on, g.ID)
				linked = true
			}
		}
		if !linked {
			b.edge(row.ID, g.ID)
		}
		if err := b.gateNext(gateCol+1, g); err != nil {
			return nil, err
		}
	}
	if len(b.nodes) == 1 {
		return nil, nil
	}
	return b.layout(), nil
}

// layout places the boxes in their columns, centred, and routes the
// arrows between them.
func (b *graphBuilder) layout() *pipelineGraph {
	const (
		nodeW, nodeH = 160.0, 40.0
		gapX, gapY   = 56.0, 12.0
		pad          = 8.0
	)
	cols := map[int][]*graphNode{}
	maxCol, tallest := 0, 0
	for _, n := range b.nodes {
		cols[n.col] = append(cols[n.col], n)
		maxCol = max(maxCol, n.col)
		tallest = max(tallest, len(cols[n.col]))
	}
	height := pad*2 + float64(tallest)*nodeH + float64(tallest-1)*gapY
	for c, ns := range cols {
		colH := float64(len(ns))*nodeH + float64(len(ns)-1)*gapY
		y0 := (height - colH) / 2
		for i, n := range ns {
			n.X = pad + float64(c)*(nodeW+gapX)
			n.Y = round1(y0 + float64(i)*(nodeH+gapY))
			n.TextX, n.LabelY, n.SubY = n.X+8, n.Y+16, n.Y+32
			n.Shown = n.Label
			if r := []rune(n.Label); len(r) > 21 {
				n.Shown = string(r[:20]) + "…"
			}
		}
	}
	g := &pipelineGraph{Width: pad*2 + float64(maxCol+1)*nodeW + float64(maxCol)*gapX, Height: height, NodeW: nodeW, NodeH: nodeH, Nodes: b.nodes}
	for _, e := range b.edges {
		f, t := b.byID[e.from], b.byID[e.to]
		if f == nil || t == nil {
			continue
		}
		x1, y1 := f.X+nodeW, f.Y+nodeH/2
		x2, y2 := t.X-2, t.Y+nodeH/2
		if t.col <= f.col { // backwards: should not happen, draw straight
			x1, x2 = f.X+nodeW/2, t.X+nodeW/2
		}
		mx := (x1 + x2) / 2
		e.D = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x1, y1, mx, y1, mx, y2, x2, y2)
		g.Edges = append(g.Edges, e)
	}
	return g
}
