package memdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// HookInsert stores a copy of row; an empty State is stored as waiting.
func (x *executor) HookInsert(ctx context.Context, params *driver.HookInsertParams) (err error) {
	row := params.Row
	t, err := x.begin(ctx)
	if err != nil {
		return err
	}
	defer x.end(t, &err)
	if row == nil || row.Token == "" {
		return errors.New("insert hook: hook has no token")
	}
	if t.st.hooks[row.Token] != nil {
		return fmt.Errorf("insert hook %q: %w", row.Token, hoppertype.ErrDuplicateID)
	}
	h := cloneHook(row)
	if h.State == "" {
		h.State = hoppertype.HookWaiting
	}
	h.CreatedAt = trunc(h.CreatedAt)
	h.ResumedAt = trunc(h.ResumedAt)
	t.putHook(h)
	return nil
}

// HookGet returns a copy of a hook.
func (x *executor) HookGet(ctx context.Context, params *driver.HookGetParams) (_ *hoppertype.HookRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	h := t.st.hooks[params.Token]
	if h == nil {
		return nil, fmt.Errorf("get hook %q: %w", params.Token, hoppertype.ErrNotFound)
	}
	return cloneHook(h), nil
}

// HookResume moves a waiting hook to resumed with the payload; a hook that
// is not waiting is returned as it is with ErrStateConflict.
func (x *executor) HookResume(ctx context.Context, params *driver.HookResumeParams) (_ *hoppertype.HookRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	cur := t.st.hooks[params.Token]
	if cur == nil {
		return nil, fmt.Errorf("resume hook %q: %w", params.Token, hoppertype.ErrNotFound)
	}
	if cur.State != hoppertype.HookWaiting {
		return cloneHook(cur), fmt.Errorf("resume hook %q in state %s: %w", params.Token, cur.State, hoppertype.ErrStateConflict)
	}
	h := cloneHook(cur)
	h.State = hoppertype.HookResumed
	h.Payload = cloneBytes(params.Payload)
	h.Request = cloneBytes(params.Request)
	h.ResumedAt = trunc(params.Now)
	t.putHook(h)
	return cloneHook(h), nil
}

// HookListByRun returns copies of a run's hooks by CreatedAt, then token.
func (x *executor) HookListByRun(ctx context.Context, params *driver.HookListByRunParams) (_ []*hoppertype.HookRow, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	tokens := t.st.runHooks[params.RunID]
	out := make([]*hoppertype.HookRow, 0, len(tokens))
	for tok := range tokens {
		out = append(out, cloneHook(t.st.hooks[tok]))
	}
	slices.SortFunc(out, func(a, b *hoppertype.HookRow) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Token, b.Token)
	})
	return out, nil
}

// StreamAppend appends chunks to a run's stream at the next offsets.
func (x *executor) StreamAppend(ctx context.Context, params *driver.StreamAppendParams) (_ []*hoppertype.StreamChunk, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	cur := t.st.streams[params.RunID]
	now := trunc(params.Now)
	out := make([]*hoppertype.StreamChunk, len(params.Chunks))
	chunks := cur
	for i, data := range params.Chunks {
		c := &hoppertype.StreamChunk{RunID: params.RunID, Offset: int64(len(chunks)), Data: cloneBytes(data), At: now}
		// Appending may write into the spare capacity of the stored slice,
		// past its length: no stored or saved slice sees it.
		chunks = append(chunks, c)
		out[i] = cloneChunk(c)
	}
	if len(params.Chunks) > 0 {
		t.setStream(params.RunID, chunks)
	}
	return out, nil
}

// StreamRead returns copies of a run's chunks from offset From, at most
// Limit.
func (x *executor) StreamRead(ctx context.Context, params *driver.StreamReadParams) (_ []*hoppertype.StreamChunk, err error) {
	t, err := x.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer x.end(t, &err)
	if params.Limit <= 0 {
		return nil, errors.New("read stream: limit must be > 0")
	}
	chunks := t.st.streams[params.RunID]
	from := min(max(params.From, 0), int64(len(chunks)))
	chunks = chunks[from:]
	chunks = chunks[:min(params.Limit, len(chunks))]
	out := make([]*hoppertype.StreamChunk, len(chunks))
	for i, c := range chunks {
		out[i] = cloneChunk(c)
	}
	return out, nil
}

// putHook stores a hook row and records how to restore the previous one. A
// hook's run never changes, so only a new hook touches the run index.
func (t *executor) putHook(row *hoppertype.HookRow) {
	st := t.st
	old, had := st.hooks[row.Token]
	st.hooks[row.Token] = row
	if !had {
		st.indexHook(row)
	}
	t.undo = append(t.undo, func() {
		if had {
			st.hooks[row.Token] = old
		} else {
			delete(st.hooks, row.Token)
			st.unindexHook(row)
		}
	})
}

// deleteHook removes a hook and records how to restore it.
func (t *executor) deleteHook(token string) {
	st := t.st
	old := st.hooks[token]
	if old == nil {
		return
	}
	delete(st.hooks, token)
	st.unindexHook(old)
	t.undo = append(t.undo, func() {
		st.hooks[token] = old
		st.indexHook(old)
	})
}

func (s *store) indexHook(h *hoppertype.HookRow) {
	set := s.runHooks[h.RunID]
	if set == nil {
		set = make(map[string]struct{})
		s.runHooks[h.RunID] = set
	}
	set[h.Token] = struct{}{}
}

func (s *store) unindexHook(h *hoppertype.HookRow) {
	set := s.runHooks[h.RunID]
	delete(set, h.Token)
	if len(set) == 0 {
		delete(s.runHooks, h.RunID)
	}
}

// setStream stores a run's chunks (none when chunks is empty) and records
// how to restore the previous ones. Stored chunks are never modified.
func (t *executor) setStream(runID string, chunks []*hoppertype.StreamChunk) {
	setOrDelete(t, t.st.streams, runID, chunks)
}

func cloneHook(h *hoppertype.HookRow) *hoppertype.HookRow {
	c := *h
	c.Payload = cloneBytes(h.Payload)
	c.Request = cloneBytes(h.Request)
	return &c
}

func cloneChunk(c *hoppertype.StreamChunk) *hoppertype.StreamChunk {
	o := *c
	o.Data = cloneBytes(c.Data)
	return &o
}
