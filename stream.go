package hopper

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hopper-go/hopper/driver"
)

// Stream is a run's durable, append-only stream of chunks: progress for
// clients that read it from any offset or tail it live.
type Stream struct{ st *wfState }

// Write appends v (JSON-encoded) to the stream. Written from workflow code,
// a chunk is written exactly once (the write is recorded in history, with
// the chunk's offset). A run has one stream: a retried attempt's chunks
// follow the earlier attempts', and each attempt's history names the
// offsets of those it wrote.
func (s *Stream) Write(v any) error {
	st := s.st
	if err := st.check(); err != nil {
		return err
	}
	ev, err := st.next("", evStreamWrite)
	if err != nil || ev != nil {
		return err
	}
	if err := st.live(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("hopper: stream write: %w", err)
	}
	return st.inTxData(evStreamWrite, "", func(ctx context.Context, tx driver.Executor) (evData, error) {
		chunks, err := tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: st.run.ID, Chunks: [][]byte{b}, Now: st.c.now()})
		if err != nil {
			return evData{}, err
		}
		if len(chunks) != 1 {
			return evData{}, fmt.Errorf("hopper: stream write: the store appended %d chunks, not 1", len(chunks))
		}
		return evData{Offset: &chunks[0].Offset}, nil
	})
}
