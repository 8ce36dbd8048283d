package hopper

import "github.com/hopper-go/hopper/internal/engine"

// StopGrace is how long past its ctx's end Client.Stop may take.
const StopGrace = engine.StopGrace

// StatsPending bounds the jobs a StatsRecorder remembers.
const StatsPending = statsPending

// LeadershipChanged returns a channel closed when c next begins or stops
// leading.
func (c *Client) LeadershipChanged() <-chan struct{} { return c.eng.LeadershipChanged() }

// OnWaitBlock has f called with a job's id each time a wait for it,
// registered and done reading, is about to block.
func (c *Client) OnWaitBlock(f func(id string)) { c.eng.OnWaitBlock(f) }

// OnBatchJoin has f called each time a job joins a batch, with the batch
// type's name and the batch's size then.
func (c *Client) OnBatchJoin(f func(name string, n int)) { c.batchJoined.Store(&f) }
