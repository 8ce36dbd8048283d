package hopper

import "github.com/hopper-go/hopper/internal/engine"

// StopGrace is how long past its ctx's end Client.Stop may take.
const StopGrace = engine.StopGrace
