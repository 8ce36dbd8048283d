package engine

import "sync/atomic"

// signal announces that something happened to whoever waits: C returns a
// channel closed at the next fire. The zero value is ready; a fire nobody
// waits for costs one atomic load.
type signal struct{ p atomic.Pointer[chan struct{}] }

// C returns a channel closed at the next fire.
func (s *signal) C() <-chan struct{} {
	for {
		if p := s.p.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if s.p.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// fire closes the channel C gave, if any.
func (s *signal) fire() {
	if s.p.Load() == nil {
		return
	}
	if p := s.p.Swap(nil); p != nil {
		close(*p)
	}
}
