package sqlitedriver

import (
	"context"
	"sync"

	"github.com/hopper-go/hopper/driver"
)

// subscriptionBuffer is how many payloads a subscription holds before
// further ones are dropped.
const subscriptionBuffer = 64

// note is a notification buffered until the transaction that raised it
// commits.
type note struct {
	topic, payload string
}

// hubs is the process-wide registry of brokers, one per database file, so
// every Driver open on a file in this process shares its notifications.
var hubs = struct {
	mu sync.Mutex
	m  map[string]*hub
}{m: make(map[string]*hub)}

// acquireHub returns the broker of the file at path, creating it, and counts
// one more Driver using it.
func acquireHub(path string) *hub {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h := hubs.m[path]
	if h == nil {
		h = &hub{subs: make(map[string]map[*subscription]struct{})}
		hubs.m[path] = h
	}
	h.refs++
	return h
}

// releaseHub counts one Driver less on the broker of path and forgets the
// broker when none is left.
func releaseHub(path string, h *hub) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h.refs--
	if h.refs == 0 && hubs.m[path] == h {
		delete(hubs.m, path)
	}
}

// hub fans notifications out to the subscribers of every Driver on one file.
type hub struct {
	refs int // guarded by hubs.mu

	mu   sync.Mutex
	subs map[string]map[*subscription]struct{} // guarded by mu
	n    int                                   // number of subscriptions, guarded by mu
}

// subscription is one Listen call. Its channel is closed exactly once, under
// the hub's lock, so a publish never sends on a closed channel.
type subscription struct {
	h     *hub
	owner *Driver
	topic string
	ch    chan string
	// closed and stop are guarded by h.mu.
	closed bool
	stop   func() bool
}

var _ driver.Subscription = (*subscription)(nil)

// C delivers payloads; it is closed when the subscription ends.
func (s *subscription) C() <-chan string { return s.ch }

// Close ends the subscription; closing twice is a no-op.
func (s *subscription) Close() {
	s.h.mu.Lock()
	if s.closed {
		s.h.mu.Unlock()
		return
	}
	s.h.removeLocked(s)
	stop := s.stop
	s.h.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// subscribe registers a subscription of owner that ends when ctx is done.
func (h *hub) subscribe(ctx context.Context, owner *Driver, topic string) (*subscription, error) {
	s := &subscription{h: h, owner: owner, topic: topic, ch: make(chan string, subscriptionBuffer)}
	h.mu.Lock()
	if owner.closed.Load() {
		h.mu.Unlock()
		return nil, driver.ErrClosed
	}
	set := h.subs[topic]
	if set == nil {
		set = make(map[*subscription]struct{})
		h.subs[topic] = set
	}
	set[s] = struct{}{}
	h.n++
	h.mu.Unlock()

	// AfterFunc starts no goroutine until ctx is done; Close stops it.
	stop := context.AfterFunc(ctx, s.Close)
	h.mu.Lock()
	s.stop = stop
	closed := s.closed
	h.mu.Unlock()
	if closed {
		stop()
	}
	return s, nil
}

// removeLocked removes s and closes its channel; h.mu is held.
func (h *hub) removeLocked(s *subscription) {
	s.closed = true
	if set := h.subs[s.topic]; set != nil {
		delete(set, s)
		h.n--
		if len(set) == 0 {
			delete(h.subs, s.topic)
		}
	}
	close(s.ch)
}

// hasSubscribers reports whether anyone listens on this file.
func (h *hub) hasSubscribers() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n > 0
}

// publish delivers notes to the current subscribers, dropping a payload for
// a subscriber whose buffer is full.
func (h *hub) publish(notes []note) {
	if len(notes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range notes {
		for s := range h.subs[n.topic] {
			select {
			case s.ch <- n.payload:
			default:
			}
		}
	}
}

// closeOwner ends every subscription made through owner. Subscriptions of
// other Drivers on the same file go on. owner is already marked closed, so
// no new subscription of it can slip in.
func (h *hub) closeOwner(owner *Driver) {
	h.mu.Lock()
	var stops []func() bool
	for _, set := range h.subs {
		for s := range set {
			if s.owner != owner {
				continue
			}
			h.removeLocked(s)
			if s.stop != nil {
				stops = append(stops, s.stop)
			}
		}
	}
	h.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
