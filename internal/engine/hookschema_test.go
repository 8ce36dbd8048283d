package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type schemaProbe struct {
	Approved bool              `json:"approved"`
	By       string            `json:"by,omitempty"`
	Count    int8              `json:"count"`
	Size     uint16            `json:"size"`
	Ratio    float64           `json:"ratio"`
	Tags     []string          `json:"tags"`
	Scores   map[int]string    `json:"scores"`
	Labels   map[string]int    `json:"labels"`
	At       time.Time         `json:"at"`
	Raw      json.RawMessage   `json:"raw"`
	Blob     []byte            `json:"blob"`
	Ptr      *struct{ X bool } `json:"ptr"`
	Skipped  int               `json:"-"`
	Any      any               `json:"any"`
	embedded
	hidden int
}

type embedded struct {
	Inner bool `json:"inner"`
}

// TestHookSchema: the schema refuses what json.Unmarshal refuses, naming
// where, and accepts what it accepts.
func TestHookSchema(t *testing.T) {
	t.Parallel()
	schema := HookSchema(reflect.TypeFor[schemaProbe]())
	for _, tc := range []struct {
		payload string
		refuse  string // "" accepts
	}{
		{`{"approved":true,"by":"ada","count":-128,"size":65535,"ratio":1.5,"tags":["a"],"scores":{"1":"x"},"labels":{"a":1},"at":"2026-01-01T00:00:00Z","raw":{"k":[1]},"blob":"aGk=","ptr":{"X":true},"any":[1,"a"],"inner":false}`, ""},
		{`null`, ""},
		{`{}`, ""},
		{`{"approved":null,"count":null,"tags":null}`, ""},
		{`{"unknown":1,"Approved":false}`, ""},
		{`{"APPROVED":true}`, ""},
		{`{"-":"x","Skipped":"not a number but ignored"}`, ""},
		{`{"approved":"yes"}`, `.approved: want true or false, got the string "yes"`},
		{`{"APPROVED":"yes"}`, `.APPROVED: want true or false`},
		{`{"count":1.5}`, ".count: want a whole number that fits 8 bits, got 1.5"},
		{`{"count":128}`, ".count: want a whole number that fits 8 bits, got 128"},
		{`{"size":-1}`, ".size: want a whole number from 0"},
		{`{"ratio":"1"}`, ".ratio: want a number"},
		{`{"tags":"a"}`, ".tags: want an array"},
		{`{"tags":["a",2]}`, ".tags[1]: want a string, got the number 2"},
		{`{"scores":{"one":"x"}}`, `key "one" is not a whole number`},
		{`{"labels":{"a":"b"}}`, ".labels.a: want a whole number"},
		{`{"blob":[1,2]}`, ""},
		{`{"blob":[1,256]}`, ".blob[1]: want a whole number from 0 that fits 8 bits"},
		{`{"blob":"not base64!"}`, ".blob: want base64"},
		{`{"blob":true}`, ".blob: want a base64 string"},
		{`{"ptr":{"X":1}}`, ".ptr.X: want true or false"},
		{`{"inner":"x"}`, ".inner: want true or false"},
		{`[1]`, "the payload: want an object, got an array"},
		{`"x"`, "the payload: want an object"},
	} {
		err := checkPayload(schema, []byte(tc.payload))
		var v schemaProbe
		uerr := json.Unmarshal([]byte(tc.payload), &v)
		if tc.refuse == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.payload, err)
			}
			if uerr != nil {
				t.Errorf("%s: the test expects json.Unmarshal to accept it: %v", tc.payload, uerr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.refuse) {
			t.Errorf("%s: got %v, want %q", tc.payload, err, tc.refuse)
		}
		if uerr == nil {
			t.Errorf("%s: refused, but json.Unmarshal accepts it", tc.payload)
		}
	}
}

// FuzzHookSchema: the schema never refuses a payload json.Unmarshal
// accepts (a refusal of a good payload would strand a run).
func FuzzHookSchema(f *testing.F) {
	for _, s := range []string{`{"approved":true}`, `{"count":12,"tags":["x"]}`, `{"scores":{"3":"a"}}`, `[]`, `null`, `{"ptr":{"X":false}}`, `{"count":1e2}`, `{"blob":[1,2]}`, `{"blob":"aGk="}`, `{"labels":{"a":1.0}}`, `{"scores":{"-1":"x"}}`} {
		f.Add(s)
	}
	schema := HookSchema(reflect.TypeFor[schemaProbe]())
	f.Fuzz(func(t *testing.T, payload string) {
		if !json.Valid([]byte(payload)) {
			return
		}
		var v schemaProbe
		if json.Unmarshal([]byte(payload), &v) == nil {
			if err := checkPayload(schema, []byte(payload)); err != nil {
				t.Fatalf("%s decodes, but the schema refuses it: %v", payload, err)
			}
		}
	})
}
