package hopper_test

import (
	"os"
	"regexp"
	"testing"
)

// TestGettingStartedCompiles: the program and the test that
// docs/getting-started.md shows are examples/welcome's files, which the
// build compiles and the tests run; a doc that drifts from them fails here.
func TestGettingStartedCompiles(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindAllSubmatch(doc, -1)
	for _, file := range []string{"examples/welcome/main.go", "examples/welcome/main_test.go", "examples/welcome/workflow_test.go"} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range blocks {
			if string(b[1]) == string(want) {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/getting-started.md does not show %s as it is: copy the file into the doc", file)
		}
	}
}
