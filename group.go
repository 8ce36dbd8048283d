package hopper

import (
	"context"
	"errors"
	"fmt"

	"github.com/hopper-go/hopper/hoppertype"
)

// Spawn fans out: the jobs join this job's group and are stored atomically
// with this attempt's success — if the attempt fails or its result cannot be
// recorded, none of them exists. The group settles once every job in it,
// spawned ones included, is terminal. A job that spawns and returns no value
// of its own (output None) only delegates: its group's value comes from its
// children. Spawn validates each job at once and returns the first error.
func (j *JobContext) Spawn(specs ...*JobSpec) error {
	now := j.c.now()
	rows := make([]*hoppertype.JobRow, 0, len(specs))
	for _, s := range specs {
		row, err := j.c.buildRow(s, now)
		if err != nil {
			return fmt.Errorf("hopper: spawn: %w", err)
		}
		rows = append(rows, row)
	}
	return j.c.withInsertMiddleware(j.ctx, rows, func(context.Context) error { return j.a.Spawn(rows...) })
}

// FinalizeGroup makes this job's result the group's value for good: later
// contributions (children finishing after it) do not change it.
func (j *JobContext) FinalizeGroup() {
	j.a.FinalizeGroup()
}

// FoldGroup makes the job's contribution to its group a fold: when the job
// succeeds, the group value becomes fold(current) — current is the zero T
// when no job has contributed yet. The fold runs inside the transaction that
// records the job's success, holding the group, so concurrent contributions
// are exact (none is lost). Call it from a handler; T must round-trip
// through the client's codec.
func FoldGroup[T any](ctx context.Context, fold func(acc T) T) error {
	j := JobFromContext(ctx)
	if j == nil {
		return errors.New("hopper: FoldGroup outside a job handler")
	}
	codec := j.c.codec
	j.a.FoldGroup(func(existing []byte, set bool) ([]byte, error) {
		var acc T
		if set && len(existing) > 0 {
			if err := codec.Unmarshal(existing, &acc); err != nil {
				return nil, fmt.Errorf("fold group: decode current value: %w", err)
			}
		}
		return codec.Marshal(fold(acc))
	})
	return nil
}

// GroupDecode decodes a settled group's value into a T. It is the typed
// accessor of a group value: the compiler checks T against your use, not
// against what the group's jobs produced, so T must match the type they
// contribute (or fold into).
func GroupDecode[T any](g *GroupValue) (T, error) {
	var v T
	err := g.Decode(&v)
	return v, err
}
