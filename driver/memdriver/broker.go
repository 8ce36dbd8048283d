package memdriver

import (
	"context"
	"sync"

	"github.com/hopper-go/hopper/driver"
)

// subscriptionBuffer is how many payloads a subscription holds before
// further ones are dropped.
const subscriptionBuffer = 64

// broker fans notifications out to in-process subscribers.
type broker struct {
	mu     sync.Mutex
	closed bool
	subs   map[string]map[*subscription]struct{}
}

func newBroker() *broker {
	return &broker{subs: make(map[string]map[*subscription]struct{})}
}

// subscription is one Listen call. Its channel is closed exactly once, under
// the broker's lock, so a publish never sends on a closed channel.
type subscription struct {
	b     *broker
	topic string
	ch    chan string
	// closed and stop are guarded by b.mu.
	closed bool
	stop   func() bool
}

var _ driver.Subscription = (*subscription)(nil)

// C delivers payloads; it is closed when the subscription ends.
func (s *subscription) C() <-chan string { return s.ch }

// Close ends the subscription; closing twice is a no-op.
func (s *subscription) Close() {
	s.b.mu.Lock()
	if s.closed {
		s.b.mu.Unlock()
		return
	}
	s.b.unsubscribeLocked(s)
	stop := s.stop
	s.b.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// subscribe registers a subscription that ends when ctx is done.
func (b *broker) subscribe(ctx context.Context, topic string) (*subscription, error) {
	s := &subscription{b: b, topic: topic, ch: make(chan string, subscriptionBuffer)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, driver.ErrClosed
	}
	set := b.subs[topic]
	if set == nil {
		set = make(map[*subscription]struct{})
		b.subs[topic] = set
	}
	set[s] = struct{}{}
	b.mu.Unlock()

	// AfterFunc starts no goroutine until ctx is done; Close stops it.
	stop := context.AfterFunc(ctx, s.Close)
	b.mu.Lock()
	s.stop = stop
	closed := s.closed
	b.mu.Unlock()
	if closed {
		stop()
	}
	return s, nil
}

// unsubscribeLocked removes s and closes its channel; b.mu is held.
func (b *broker) unsubscribeLocked(s *subscription) {
	s.closed = true
	if set := b.subs[s.topic]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(b.subs, s.topic)
		}
	}
	close(s.ch)
}

// publish delivers notes to the current subscribers, dropping a payload for
// a subscriber whose buffer is full.
func (b *broker) publish(notes []note) {
	if len(notes) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range notes {
		for s := range b.subs[n.topic] {
			select {
			case s.ch <- n.payload:
			default:
			}
		}
	}
}

// close ends every subscription and refuses new ones.
func (b *broker) close() {
	b.mu.Lock()
	b.closed = true
	var stops []func() bool
	for _, set := range b.subs {
		for s := range set {
			b.unsubscribeLocked(s)
			if s.stop != nil {
				stops = append(stops, s.stop)
			}
		}
	}
	b.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
