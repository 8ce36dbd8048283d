package pgdriver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/hopper-go/hopper/driver"
)

// Listener tuning.
const (
	// subscriptionBuffer is how many payloads a subscription holds before
	// further ones are dropped.
	subscriptionBuffer = 64
	// listenerPing is how long the listener waits for a notification before
	// it pings its connection, so a silently dead one is noticed.
	listenerPing = 30 * time.Second
	// listenerExecTimeout bounds a LISTEN/UNLISTEN statement (and how long
	// Close waits for one in flight).
	listenerExecTimeout = 5 * time.Second
	// Reconnection backoff bounds.
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// listenerAppPrefix starts the application_name of a listener connection;
// the schema follows it.
const listenerAppPrefix = "hopper-listen:"

// listener owns one dedicated connection that LISTENs on the channels of
// the subscribed topics and fans notifications out to the subscriptions. It
// starts with the first subscription, reconnects with backoff after a
// connection loss, and then sends an empty payload ("look again") to every
// subscription because notifications may have been missed.
type listener struct {
	d       *Driver
	appName string
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	subs    map[string]map[*subscription]struct{} // by topic
	topicOf map[string]string                     // channel → topic, for subscribed topics
	gen     uint64                                // bumped by every subscribe
	synced  uint64                                // subscriptions up to this gen are listened on
	down    bool                                  // the last connection attempt failed or the connection was lost
	changed chan struct{}                         // closed and replaced when synced, down or closed change
	wake    context.CancelFunc                    // interrupts the loop's wait for a notification
	started bool
	closed  bool
}

func newListener(d *Driver) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		d: d, appName: listenerAppPrefix + d.schema, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		subs: make(map[string]map[*subscription]struct{}), topicOf: make(map[string]string),
		changed: make(chan struct{}),
	}
}

// subscription is one Listen call. Its channel is closed exactly once, under
// the listener's lock, so a send never hits a closed channel.
type subscription struct {
	l     *listener
	topic string
	ch    chan string
	// closed and stop are guarded by l.mu.
	closed bool
	stop   func() bool
}

var _ driver.Subscription = (*subscription)(nil)

// C delivers payloads; it is closed when the subscription ends.
func (s *subscription) C() <-chan string { return s.ch }

// Close ends the subscription; closing twice is a no-op.
func (s *subscription) Close() {
	l := s.l
	l.mu.Lock()
	if s.closed {
		l.mu.Unlock()
		return
	}
	l.removeLocked(s)
	l.pokeLocked() // UNLISTEN a channel nobody wants any more
	stop := s.stop
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// removeLocked drops s and closes its channel; l.mu is held.
func (l *listener) removeLocked(s *subscription) {
	s.closed = true
	if set := l.subs[s.topic]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(l.subs, s.topic)
			delete(l.topicOf, l.d.channel(s.topic))
		}
	}
	close(s.ch)
}

// broadcastLocked wakes everyone waiting on l.changed; l.mu is held.
func (l *listener) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// pokeLocked interrupts the loop's wait so it syncs its LISTENs; l.mu is
// held.
func (l *listener) pokeLocked() {
	if l.wake != nil {
		l.wake()
	}
}

// subscribe registers a subscription that ends when ctx is done, and waits
// until its channel is listened on (or the connection is down: the driver
// keeps retrying and sends an empty payload once it is back).
func (l *listener) subscribe(ctx context.Context, topic string) (*subscription, error) {
	s := &subscription{l: l, topic: topic, ch: make(chan string, subscriptionBuffer)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, driverClosed("listen")
	}
	set := l.subs[topic]
	if set == nil {
		set = make(map[*subscription]struct{})
		l.subs[topic] = set
		l.topicOf[l.d.channel(topic)] = topic
	}
	set[s] = struct{}{}
	l.gen++
	mine := l.gen
	if !l.started {
		l.started = true
		go l.run()
	}
	l.pokeLocked()
	l.mu.Unlock()

	// AfterFunc starts no goroutine until ctx is done; Close stops it.
	stop := context.AfterFunc(ctx, s.Close)
	l.mu.Lock()
	s.stop = stop
	closed := s.closed
	l.mu.Unlock()
	if closed {
		stop()
	}
	for {
		l.mu.Lock()
		if s.closed || l.closed || l.down || l.synced >= mine {
			l.mu.Unlock()
			return s, nil
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
	}
}

// close ends every subscription and stops the loop, waiting for it.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	var stops []func() bool
	for _, set := range l.subs {
		for s := range set {
			l.removeLocked(s)
			if s.stop != nil {
				stops = append(stops, s.stop)
			}
		}
	}
	l.broadcastLocked()
	started := l.started
	l.mu.Unlock()
	l.cancel()
	if started {
		<-l.done
	}
	for _, stop := range stops {
		stop()
	}
}

// run connects, serves and reconnects until the listener is closed.
func (l *listener) run() {
	defer close(l.done)
	backoff := minBackoff
	lost := false // a connection failed or was lost: tell subscribers to look again
	for {
		conn, err := l.connect()
		if err == nil {
			var healthy bool
			healthy, err = l.serve(conn, lost)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(closeCtx) //nolint:errcheck // the connection is being dropped
			cancel()
			if healthy {
				backoff = minBackoff
			}
		}
		if l.ctx.Err() != nil {
			return
		}
		lost = true
		l.mu.Lock()
		l.down = true
		l.broadcastLocked()
		l.mu.Unlock()
		timer := time.NewTimer(backoff)
		select {
		case <-l.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connect opens the listener's own connection with the pool's settings and
// hooks, named by application_name. Its context watcher only sets deadlines
// (no cancel requests), so interrupting a wait cannot cancel a later
// statement.
func (l *listener) connect() (*pgx.Conn, error) {
	pcfg := l.d.pool.Config()
	cfg := pcfg.ConnConfig
	cfg.RuntimeParams["application_name"] = l.appName
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	if pcfg.BeforeConnect != nil {
		if err := pcfg.BeforeConnect(l.ctx, cfg); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(l.ctx, cfg)
	if err != nil {
		return nil, err
	}
	if pcfg.AfterConnect != nil {
		if err := pcfg.AfterConnect(l.ctx, conn); err != nil {
			conn.Close(context.Background()) //nolint:errcheck // failed setup
			return nil, err
		}
	}
	return conn, nil
}

// serve keeps conn's LISTENs in step with the subscriptions and dispatches
// notifications until the connection fails or the listener closes. After a
// reconnect (lost) it sends an empty payload to every subscription once the
// channels are listened on again. healthy reports whether it got that far.
func (l *listener) serve(conn *pgx.Conn, lost bool) (healthy bool, err error) {
	listened := make(map[string]bool)
	for {
		l.mu.Lock()
		gen := l.gen
		want := make(map[string]bool, len(l.topicOf))
		for ch := range l.topicOf {
			want[ch] = true
		}
		waitCtx, cancel := context.WithTimeout(l.ctx, listenerPing)
		l.wake = cancel
		l.mu.Unlock()

		var stmts []string
		for ch := range want {
			if !listened[ch] {
				stmts = append(stmts, "LISTEN "+pgx.Identifier{ch}.Sanitize())
			}
		}
		for ch := range listened {
			if !want[ch] {
				stmts = append(stmts, "UNLISTEN "+pgx.Identifier{ch}.Sanitize())
			}
		}
		if len(stmts) > 0 {
			// Seen through even when the listener closes meanwhile: a
			// statement interrupted midway leaves pgx draining the
			// connection in the background for up to 15 s after Close.
			execCtx, cancelExec := context.WithTimeout(context.WithoutCancel(l.ctx), listenerExecTimeout)
			_, err := conn.Exec(execCtx, strings.Join(stmts, "; "))
			cancelExec()
			if err != nil {
				cancel()
				return healthy, err
			}
			listened = want
		}
		l.mu.Lock()
		l.synced = max(l.synced, gen)
		l.down = false
		l.broadcastLocked()
		if !healthy && lost {
			for _, set := range l.subs {
				for s := range set {
					send(s, "")
				}
			}
		}
		l.mu.Unlock()
		healthy = true

		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		if n != nil {
			l.dispatch(n.Channel, n.Payload)
		}
		switch {
		case err == nil:
		case l.ctx.Err() != nil:
			return healthy, err
		case errors.Is(waitCtx.Err(), context.DeadlineExceeded) && !conn.IsClosed():
			pingCtx, cancelPing := context.WithTimeout(l.ctx, 10*time.Second)
			err := conn.Ping(pingCtx)
			cancelPing()
			if err != nil {
				return healthy, err
			}
		case errors.Is(waitCtx.Err(), context.Canceled) && !conn.IsClosed():
			// Woken to sync the LISTENs.
		default:
			return healthy, err
		}
	}
}

// dispatch hands a notification to the subscriptions of its topic.
func (l *listener) dispatch(channel, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	topic, ok := l.topicOf[channel]
	if !ok {
		return
	}
	for s := range l.subs[topic] {
		send(s, payload)
	}
}

// send delivers payload to s unless its buffer is full; the listener's lock
// is held.
func send(s *subscription, payload string) {
	select {
	case s.ch <- payload:
	default:
	}
}
