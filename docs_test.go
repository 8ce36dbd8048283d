package hopper_test

import (
	"os"
	"regexp"
	"testing"
)

// TestGettingStartedCompiles: the programs and tests that
// docs/getting-started.md shows are examples/welcome's files, which the
// build compiles and the tests run; a doc that drifts from them, or shows
// Go code that is not one of them, fails here.
func TestGettingStartedCompiles(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindAllSubmatch(doc, -1)
	shown := make([]bool, len(blocks))
	for _, file := range []string{"examples/welcome/main.go", "examples/welcome/main_test.go", "examples/welcome/fanout.go", "examples/welcome/onboard.go", "examples/welcome/workflow_test.go"} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for i, b := range blocks {
			if string(b[1]) == string(want) {
				found, shown[i] = true, true
			}
		}
		if !found {
			t.Errorf("docs/getting-started.md does not show %s as it is: copy the file into the doc", file)
		}
	}
	for i, b := range blocks {
		if !shown[i] {
			t.Errorf("docs/getting-started.md shows Go code that no checked file holds, so nothing compiles it:\n%s", b[1])
		}
	}
}
