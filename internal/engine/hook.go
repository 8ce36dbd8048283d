package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
)

// HookResume is a payload for the hook with Token (see
// Client.HookResume).
type HookResume struct {
	Token string
	// Payload is valid JSON; Request (nil: none) the record of the HTTP
	// request it came with, stored beside it.
	Payload json.RawMessage
	Request []byte
}

// HookPayloadMismatch is ResumeHook's refusal of a payload that does not
// fit the schema recorded with the hook; it matches
// hoppertype.ErrInvalidInput.
type HookPayloadMismatch struct {
	// Hook is the hook's name, Reason where the payload does not fit.
	Hook, Reason string
}

func (e *HookPayloadMismatch) Error() string {
	return fmt.Sprintf("hook %q: the payload does not fit its type: %s", e.Hook, e.Reason)
}

// Unwrap returns hoppertype.ErrInvalidInput.
func (e *HookPayloadMismatch) Unwrap() error { return hoppertype.ErrInvalidInput }

// ResumeHook delivers a payload to its hook and wakes the hook's run, in
// one transaction. An unknown token is hoppertype.ErrNotFound. A hook
// already resumed, whose run has finished or is being cancelled, or
// created by an attempt of its run that failed and was retried, is
// hoppertype.ErrStateConflict; a payload that does not fit the hook's
// recorded schema is a *HookPayloadMismatch. Nothing changes then.
func (e *Engine) ResumeHook(ctx context.Context, r HookResume) error {
	now := e.now()
	var queue string
	err := e.drv.InTx(ctx, func(ctx context.Context, tx driver.Executor) error {
		queue = ""
		h, err := tx.HookGet(ctx, &driver.HookGetParams{Token: r.Token})
		if err != nil {
			return err
		}
		run, err := lockRun(ctx, tx, h.RunID, now)
		if err != nil {
			return err
		}
		if run.Status.Terminal() {
			return fmt.Errorf("its run is %s: %w", run.Status, hoppertype.ErrStateConflict)
		}
		if run.Error != nil && run.Error.Kind == hoppertype.ErrorKindCancelled {
			return fmt.Errorf("its run is being cancelled: %w", hoppertype.ErrStateConflict)
		}
		events, err := tx.RunEventList(ctx, &driver.RunEventListParams{RunID: h.RunID})
		if err != nil {
			return err
		}
		created, retried := hookCreated(events, r.Token)
		if retried {
			return fmt.Errorf("the attempt of its run that created it failed and was retried (the new attempt waits on a hook of its own): %w", hoppertype.ErrStateConflict)
		}
		if created != nil && created.Schema != nil {
			if err := checkPayload(created.Schema, r.Payload); err != nil {
				return &HookPayloadMismatch{Hook: h.Name, Reason: err.Error()}
			}
		}
		if _, err := tx.HookResume(ctx, &driver.HookResumeParams{Token: r.Token, Payload: r.Payload, Request: r.Request, Now: now}); err != nil {
			if errors.Is(err, hoppertype.ErrStateConflict) {
				return fmt.Errorf("the hook was already resumed: %w", err)
			}
			return err
		}
		woken, err := tx.JobWake(ctx, &driver.JobWakeParams{IDs: []string{h.RunID}, Now: now})
		if len(woken) > 0 {
			queue = woken[0].Queue
			return tx.Notify(ctx, &driver.NotifyParams{Topic: driver.TopicJobAvailable, Payload: queue})
		}
		return err
	})
	if err != nil {
		return err
	}
	if queue != "" {
		e.wakeQueue(queue, time.Time{})
	}
	return nil
}

// hookCreated finds, in a run's events, the record of the hook with token
// (nil if there is none) and says whether the attempt that created it is
// over: one the workflow retried. Nothing reads that hook any more; the
// new attempt creates hooks of its own. The record's Schema is nil for a
// hook created before schemas were recorded, or with a codec other than
// JSON.
func hookCreated(events []*hoppertype.RunEvent, token string) (data *EventData, retried bool) {
	for _, g := range Generations(events) {
		for _, ev := range g.Events {
			if ev.Kind != EvHookCreated {
				continue
			}
			var d EventData
			if json.Unmarshal(ev.Data, &d) == nil && d.Token == token {
				return &d, g.Retried
			}
		}
	}
	return nil, false
}

// lockRun reads a run and writes its row back unchanged (but for its
// UpdatedAt) in tx, so that tx holds the row until it ends. A run's
// suspension writes the same row in the transaction that commits it, so
// the two serialize where the store runs transactions side by side
// (PostgreSQL): either the suspension committed first, and what tx does
// next sees the run waiting (JobWake wakes it), or it commits after tx,
// and its recheck sees what tx did (a hook resumed). Without it, a wake
// could find the run still running while the recheck read the hook before
// the payload committed: a lost wake-up.
func lockRun(ctx context.Context, tx driver.Executor, id string, now time.Time) (*hoppertype.RunRow, error) {
	for range 5 {
		run, err := tx.RunGet(ctx, &driver.RunGetParams{ID: id})
		if err != nil || run.Status.Terminal() {
			return run, err
		}
		run, err = tx.RunUpdate(ctx, &driver.RunUpdateParams{ID: id, Status: run.Status, ExpectStatuses: []hoppertype.RunStatus{run.Status}, Now: now})
		if !errors.Is(err, hoppertype.ErrStateConflict) {
			return run, err
		}
		// Its status changed between the read and the write: read again.
	}
	return nil, fmt.Errorf("run %s changes status again and again: %w", id, hoppertype.ErrStateConflict)
}
