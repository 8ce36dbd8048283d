package hopper

import "github.com/hopper-go/hopper/internal/engine"

// StopGrace is how long past its ctx's end Client.Stop may take.
const StopGrace = engine.StopGrace

// LeadershipChanged returns a channel closed when c next begins or stops
// leading.
func (c *Client) LeadershipChanged() <-chan struct{} { return c.eng.LeadershipChanged() }
