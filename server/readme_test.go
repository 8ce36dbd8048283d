package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-go/hopper/server"
)

// TestReadmeAnswersAreTheWireTypes: every answer in the README's curl
// session decodes into the type the server answers with, naming no field
// the type lacks, and an answer shown whole (no "…" line) has every field
// the server would send with those values.
func TestReadmeAnswersAreTheWireTypes(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	session := regexp.MustCompile("(?s)### A curl session\n.*?```console\n(.*?)```\n").FindSubmatch(doc)
	require.NotNil(t, session, "README.md has no curl session")

	type answerType struct {
		cmd *regexp.Regexp
		new func() any
	}
	types := []answerType{
		{regexp.MustCompile(`/v1/jobs --json `), func() any { return new(server.EnqueueResponse) }},
		{regexp.MustCompile(`/v1/jobs/[^/ ]+/result`), func() any { return new(server.JobJSON) }},
		{regexp.MustCompile(`/v1/groups/`), func() any { return new(server.GroupJSON) }},
		{regexp.MustCompile(`/v1/runs --json `), func() any { return new(server.StartRunResponse) }},
		{regexp.MustCompile(`/v1/runs/[^/ ]+$`), func() any { return new(server.RunJSON) }},
	}
	answers := 0
	for _, part := range strings.Split("\n"+string(session[1]), "\n$ ")[1:] {
		cmd, answer, _ := strings.Cut(part, "\n")
		i := slices.IndexFunc(types, func(a answerType) bool { return a.cmd.MatchString(cmd) })
		require.GreaterOrEqual(t, i, 0, "README.md shows %q: name its answer's type in this test", cmd)
		var lines []string
		cut := false
		for _, l := range strings.Split(strings.TrimSpace(answer), "\n") {
			if strings.TrimSpace(l) == "…" {
				cut = true
				continue
			}
			lines = append(lines, l)
		}
		text := []byte(strings.Join(lines, "\n"))
		v := types[i].new()
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(v), "README.md's answer to %q", cmd)
		sent, err := json.Marshal(v)
		require.NoError(t, err)
		var shown, real any
		require.NoError(t, json.Unmarshal(text, &shown))
		require.NoError(t, json.Unmarshal(sent, &real))
		sameKeys(t, cmd, "", shown, real, cut)
		answers++
	}
	require.Equal(t, 6, answers, "the README's curl session changed: check this test still reads every answer")
}

// sameKeys compares the keys of the README's answer with those the server
// would send; a cut answer may leave top-level keys out.
func sameKeys(t *testing.T, cmd, path string, shown, real any, cut bool) {
	t.Helper()
	switch s := shown.(type) {
	case map[string]any:
		r, ok := real.(map[string]any)
		if !ok {
			return
		}
		for k, v := range r {
			if _, ok := s[k]; !ok && !cut {
				t.Errorf("README.md's answer to %q lacks %q, which the server sends", cmd, path+k)
			}
			if sv, ok := s[k]; ok {
				sameKeys(t, cmd, path+k+".", sv, v, false)
			}
		}
	case []any:
		r, ok := real.([]any)
		if !ok {
			return
		}
		for i := range min(len(s), len(r)) {
			sameKeys(t, cmd, path, s[i], r[i], false)
		}
	}
}
