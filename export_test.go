package hopper

import "github.com/hopper-go/hopper/internal/engine"

// StopGrace is how long past its ctx's end Client.Stop may take.
const StopGrace = engine.StopGrace

// LeadershipChanged returns a channel closed when c next begins or stops
// leading.
func (c *Client) LeadershipChanged() <-chan struct{} { return c.eng.LeadershipChanged() }

// OnWatch has f called with the id of each wait for a job or group, once
// registered.
func (c *Client) OnWatch(f func(id string)) { c.eng.OnWatch(f) }
