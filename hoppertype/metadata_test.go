package hoppertype

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// metadataCases are stored metadata and stranger inputs: each decodes as
// json.Unmarshal decodes it, or fails where it fails.
var metadataCases = []string{
	`{}`, `null`, ` { "a" : "b" , "c":"d" } `, `{"otel":"{\"traceparent\":\"00-0af7-01\"}"}`,
	`{"k":"line\nbreak\ttab \u00e9 \ud83d\ude00 \/ \\"}`, `{"dup":"1","dup":"2"}`, `{"lone":"\ud800x"}`,
	`{"a":1}`, `{"a":null}`, `[]`, `"x"`, `{"a":"b",}`, `{"a" "b"}`, `{"a":"b"`, `{"a":"\x"}`, "{\"a\":\"\x01\"}",
	"{\"bad\":\"\xff\"}", `{"é":"ü"}`, ``, `{"a":"b"} x`, `{"a":"\u12"}`, `{"a":"b"}{}`,
}

func TestUnmarshalMetadata(t *testing.T) {
	for _, in := range metadataCases {
		got, err := UnmarshalMetadata([]byte(in))
		var want map[string]string
		wantErr := json.Unmarshal([]byte(in), &want)
		if wantErr != nil {
			require.Error(t, err, "%q", in)
			continue
		}
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
	}
}

func FuzzUnmarshalMetadata(f *testing.F) {
	for _, in := range metadataCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := UnmarshalMetadata(in)
		var want map[string]string
		if wantErr := json.Unmarshal(in, &want); wantErr != nil {
			if err == nil {
				t.Fatalf("%q: decoded %v, json.Unmarshal refuses: %v", in, got, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v, json.Unmarshal decodes %v", in, err, want)
		}
		require.Equal(t, want, got, "%q", in)
	})
}

func BenchmarkUnmarshalMetadata(b *testing.B) {
	in := []byte(`{"otel":"{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}","tenant":"acme"}`)
	b.Run("fast", func(b *testing.B) {
		for range b.N {
			if _, err := UnmarshalMetadata(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for range b.N {
			var m map[string]string
			if err := json.Unmarshal(in, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
