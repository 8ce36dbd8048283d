package hopper

import (
	"bytes"
	"encoding/json"
)

// Codec turns inputs and outputs into the bytes the store keeps. The default
// is encoding/json; a client-wide Config.Codec or a per-type TypeOpts.Codec
// replaces it.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default codec, encoding/json.
type JSONCodec struct{}

// Marshal implements Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// decodeStrictJSON decodes one JSON value into v, refusing unknown fields and
// trailing data: input from outside is refused, not absorbed.
func decodeStrictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errTrailingData
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return errTrailingData
	}
	return nil
}

type trailingDataError struct{}

func (trailingDataError) Error() string { return "unexpected data after the JSON value" }

var errTrailingData error = trailingDataError{}
