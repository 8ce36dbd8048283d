package hopper

// StopGrace is how long past its ctx's end Client.Stop may take.
const StopGrace = stopGrace
