package engine

import (
	"fmt"
	"slices"

	"github.com/hopper-go/hopper/hoppertype"
)

type subscriber struct{ fn func(hoppertype.Event) }

// Subscribe registers fn to receive every event this engine emits, as
// Hooks.OnEvent does; the returned function removes it. The same rules
// apply: fn runs on the engine's goroutines and must be quick.
func (e *Engine) Subscribe(fn func(hoppertype.Event)) (unsubscribe func()) {
	s := &subscriber{fn: fn}
	e.subsMu.Lock()
	var cur []*subscriber
	if p := e.subs.Load(); p != nil {
		cur = *p
	}
	next := append(slices.Clip(cur), s)
	e.subs.Store(&next)
	e.subsMu.Unlock()
	return func() {
		e.subsMu.Lock()
		defer e.subsMu.Unlock()
		p := e.subs.Load()
		if p == nil {
			return
		}
		next := slices.DeleteFunc(slices.Clone(*p), func(x *subscriber) bool { return x == s })
		e.subs.Store(&next)
	}
}

// emit delivers an event to the engine's hook, the subscribers and the
// type's hook.
func (e *Engine) emit(ev hoppertype.Event) {
	e.nudgeFeed()
	if e.outcomes != nil {
		e.outcomes.Observe(ev)
	}
	if h := e.cfg.Hooks.OnEvent; h != nil {
		e.callHook(h, ev)
	}
	if p := e.subs.Load(); p != nil {
		for _, s := range *p {
			e.callHook(s.fn, ev)
		}
	}
	if ev.Type != "" {
		if t := e.lookupType(ev.Type); t != nil {
			if h := t.OnEvent(); h != nil {
				e.callHook(h, ev)
			}
		}
	}
}

// Emit delivers an event as the engine's own are.
func (e *Engine) Emit(ev hoppertype.Event) { e.emit(ev) }

func (e *Engine) callHook(h func(hoppertype.Event), ev hoppertype.Event) {
	defer func() {
		if r := recover(); r != nil {
			e.reportError(fmt.Errorf("event hook panicked on %s: %w", ev.Kind, PanicCause(r)), hoppertype.PhaseHook)
		}
	}()
	h(ev)
}
