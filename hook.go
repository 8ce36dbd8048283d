package hopper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hopper-go/hopper/driver"
	"github.com/hopper-go/hopper/hoppertype"
	"github.com/hopper-go/hopper/internal/engine"
	"github.com/hopper-go/hopper/internal/hclock"
)

// Hook is a durable wait for an external payload of type T, found by its
// token (at least 128 random bits): resumed from Go (Client.HookResume),
// the HTTP API or a webhook URL.
type Hook[T any] struct {
	st    *wfState
	name  string
	token string
	req   *HookRequest
}

// HookRequest is the HTTP request that resumed a hook through its webhook
// (/v1/webhooks/{token}): its method, headers and query, so a workflow can
// check a signature or read what the caller sent beside the body. The
// credentials are left out: Authorization, Proxy-Authorization and Cookie
// headers are never stored.
type HookRequest struct {
	Method string      `json:"method"`
	Header http.Header `json:"header,omitempty"`
	Query  url.Values  `json:"query,omitempty"`
}

// Request returns the request that resumed the hook through its webhook,
// once Wait has returned its payload; nil when it was resumed otherwise
// (HookResume, POST /v1/hooks/{token}) or has not been.
func (h *Hook[T]) Request() *HookRequest { return h.req }

// Token returns the hook's token.
func (h *Hook[T]) Token() string { return h.token }

// URL returns the hook's webhook URL (Config.WebhookBaseURL + token), or
// "" when no base URL is configured.
func (h *Hook[T]) URL() string {
	if h.st.c.cfg.WebhookBaseURL == "" {
		return ""
	}
	return h.st.c.cfg.WebhookBaseURL + h.token
}

// ErrHookTimeout is returned by Hook.Wait when its timeout passes first.
var ErrHookTimeout = errors.New("hopper: hook timed out")

// HookType is a typed hook factory: DefineHook[Approval]("approval").
type HookType[T any] struct{ name string }

// DefineHook makes a typed hook factory.
func DefineHook[T any](name string) HookType[T] { return HookType[T]{name: name} }

// Create creates a hook of this type in the run.
func (ht HookType[T]) Create(wf WorkflowContext) (*Hook[T], error) { return NewHook[T](wf, ht.name) }

// NewHook creates a hook in the run: a token is minted (and recorded, so a
// replay gets the same token) and stored, waiting for a payload.
func NewHook[T any](wf WorkflowContext, name string) (*Hook[T], error) {
	st := wf.state()
	if err := st.Check(); err != nil {
		return nil, err
	}
	ev, err := st.Next(name, engine.EvHookCreated)
	if err != nil {
		return nil, err
	}
	if ev != nil {
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return nil, err
		}
		return &Hook[T]{st: st, name: name, token: data.Token}, nil
	}
	if err := st.Live(); err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b)
	data := engine.EventData{Token: token}
	if _, ok := st.c.codec.(JSONCodec); ok {
		// Recorded so that any process refuses a payload that would not
		// decode into a T before it uses the hook (Client.HookResume).
		data.Schema = hookSchema[T]()
	}
	err = st.InTx(engine.EvHookCreated, name, data, func(ctx context.Context, tx driver.Executor) error {
		return tx.HookInsert(ctx, &driver.HookInsertParams{Row: &hoppertype.HookRow{Token: token, RunID: st.Run.ID, Name: name, State: hoppertype.HookWaiting, CreatedAt: st.c.now()}})
	})
	if err != nil {
		return nil, err
	}
	return &Hook[T]{st: st, name: name, token: token}, nil
}

// HookWaitOpts configure a wait. A nil *HookWaitOpts waits forever.
type HookWaitOpts struct {
	// Timeout, when set, ends the wait with ErrHookTimeout.
	Timeout time.Duration
}

// Wait waits durably for the hook's payload and decodes it into a T.
func (h *Hook[T]) Wait(opts *HookWaitOpts) (T, error) {
	st := h.st
	var zero T
	if err := st.Check(); err != nil {
		return zero, err
	}
	ev, err := st.Next(h.name, engine.EvHookWait)
	if err != nil {
		return zero, err
	}
	until := engine.FarFuture
	if ev != nil {
		var data engine.EventData
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			return zero, err
		}
		until = data.Until
	} else {
		if err := st.Live(); err != nil {
			return zero, err
		}
		if opts != nil && opts.Timeout > 0 {
			until = hclock.Truncate(st.c.now().Add(opts.Timeout))
		}
		if err := st.Record(st.Context(), nil, engine.EvHookWait, h.name, engine.EventData{Until: until, Token: h.token}); err != nil {
			return zero, err
		}
	}
	if ev, err := st.Next(h.name, engine.EvHookReceived, engine.EvHookTimeout); err != nil {
		return zero, err
	} else if ev != nil {
		return h.decode(ev)
	}
	if err := st.Live(); err != nil {
		return zero, err
	}
	row, err := st.c.store().HookGet(st.Context(), &driver.HookGetParams{Token: h.token})
	if err != nil {
		return zero, st.Fail(err)
	}
	switch {
	case row.State == hoppertype.HookResumed:
		if err := st.Record(st.Context(), nil, engine.EvHookReceived, h.name, engine.EventData{Output: row.Payload, Request: row.Request}); err != nil {
			return zero, err
		}
	case !st.c.now().Before(until):
		if err := st.Record(st.Context(), nil, engine.EvHookTimeout, h.name, engine.EventData{}); err != nil {
			return zero, err
		}
	default:
		token := h.token
		return zero, st.Suspend(until, func(ctx context.Context) bool {
			r, err := st.c.store().HookGet(ctx, &driver.HookGetParams{Token: token})
			return err == nil && r.State == hoppertype.HookResumed
		})
	}
	return h.decode(st.Events[len(st.Events)-1])
}

// decode reads the hook's payload, and the request that sent it, from its
// hook_received event.
func (h *Hook[T]) decode(ev *hoppertype.RunEvent) (T, error) {
	v, err := decodeHook[T](h.st, h.name, ev)
	if err == nil && ev.Kind == engine.EvHookReceived {
		var data engine.EventData
		if json.Unmarshal(ev.Data, &data) == nil && len(data.Request) > 0 {
			var req HookRequest
			if json.Unmarshal(data.Request, &req) == nil {
				h.req = &req
			}
		}
	}
	return v, err
}

func decodeHook[T any](st *wfState, name string, ev *hoppertype.RunEvent) (T, error) {
	var zero T
	if ev.Kind == engine.EvHookTimeout {
		return zero, fmt.Errorf("%w: %q", ErrHookTimeout, name)
	}
	var data engine.EventData
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(data.Output, &v); err != nil {
		return zero, fmt.Errorf("%w: hook %q payload does not decode into %T: %w", ErrInvalidInput, name, v, err)
	}
	return v, nil
}

// WaitHook creates a hook named name and waits for its payload.
func WaitHook[T any](wf WorkflowContext, name string, opts *HookWaitOpts) (T, error) {
	h, err := NewHook[T](wf, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return h.Wait(opts)
}
