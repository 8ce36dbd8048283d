package hopper

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/internal/engine"
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
	if err := st.Check(); err != nil {
		return err
	}
	ev, err := st.Next("", engine.EvStreamWrite)
	if err != nil || ev != nil {
		return err
	}
	if err := st.Live(); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("hopper: stream write: %w", err)
	}
	return st.InTxData(engine.EvStreamWrite, "", func(ctx context.Context, tx driver.Executor) (engine.EventData, error) {
		chunks, err := tx.StreamAppend(ctx, &driver.StreamAppendParams{RunID: st.Run.ID, Chunks: [][]byte{b}, Now: st.c.now()})
		if err != nil {
			return engine.EventData{}, err
		}
		if len(chunks) != 1 {
			return engine.EventData{}, fmt.Errorf("hopper: stream write: the store appended %d chunks, not 1", len(chunks))
		}
		return engine.EventData{Offset: &chunks[0].Offset}, nil
	})
}
