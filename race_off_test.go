//go:build !race

package hopper_test

// raceEnabled is set when the tests run under the race detector, which
// makes them several times slower: long tests shrink.
const raceEnabled = false
