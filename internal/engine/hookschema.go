package engine

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// payloadSchema describes, for a hook's payload type, what encoding/json
// would certainly refuse to decode into it: a wrong JSON type, a fraction
// or an out-of-range number for an integer, a key that is not a number for
// a map keyed by integers. It is recorded with the hook (in its
// hook_created event), so any process can refuse a payload before it is
// stored and the hook is used, without the workflow's code. It does not
// describe more than json.Unmarshal checks: unknown fields are allowed,
// null fits anything, and a type that decodes itself (json.Unmarshaler,
// encoding.TextUnmarshaler) accepts anything.
type payloadSchema struct {
	// Type is "any", "bool", "string", "int", "uint", "float", "bytes",
	// "object" (a struct, with Fields), "map" (with Values; IntKeys for
	// integer keys) or "array" (with Items).
	Type    string                    `json:"type"`
	Bits    int                       `json:"bits,omitempty"`
	Fields  map[string]*payloadSchema `json:"fields,omitempty"`
	Items   *payloadSchema            `json:"items,omitempty"`
	Values  *payloadSchema            `json:"values,omitempty"`
	IntKeys bool                      `json:"int_keys,omitempty"`
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// schemaFor describes t; depth bounds recursive types.
func schemaFor(t reflect.Type, depth int) *payloadSchema {
	if depth > 16 {
		return &payloadSchema{Type: "any"}
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return &payloadSchema{Type: "any"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaFor(t.Elem(), depth+1)
	case reflect.Bool:
		return &payloadSchema{Type: "bool"}
	case reflect.String:
		return &payloadSchema{Type: "string"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &payloadSchema{Type: "int", Bits: t.Bits()}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &payloadSchema{Type: "uint", Bits: t.Bits()}
	case reflect.Float32, reflect.Float64:
		return &payloadSchema{Type: "float"}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return &payloadSchema{Type: "bytes"} // base64 in a string
		}
		return &payloadSchema{Type: "array", Items: schemaFor(t.Elem(), depth+1)}
	case reflect.Map:
		s := &payloadSchema{Type: "map", Values: schemaFor(t.Elem(), depth+1)}
		switch t.Key().Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			s.IntKeys = !t.Key().Implements(textUnmarshalerType) && !reflect.PointerTo(t.Key()).Implements(textUnmarshalerType)
		}
		return s
	case reflect.Struct:
		s := &payloadSchema{Type: "object", Fields: map[string]*payloadSchema{}}
		addFields(s, t, depth)
		return s
	}
	return &payloadSchema{Type: "any"} // interfaces, and what JSON cannot decode into anyway
}

// addFields adds t's JSON fields to s, as encoding/json names them,
// promoting the fields of untagged embedded structs.
func addFields(s *payloadSchema, t reflect.Type, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := s.Fields[name]; !taken {
			s.Fields[name] = schemaFor(f.Type, depth+1)
		}
	}
}

// HookSchema is the recorded schema of a hook's payload type t.
func HookSchema(t reflect.Type) json.RawMessage {
	b, err := json.Marshal(schemaFor(t, 0))
	if err != nil {
		return nil
	}
	return b
}

// checkPayload reports the first place where payload does not fit the
// schema, as an error naming it.
func checkPayload(schema json.RawMessage, payload []byte) error {
	var s payloadSchema
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil // not a schema this binary reads: the workflow decides
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return s.check("", v)
}

// check walks v (decoded with UseNumber) along s.
func (s *payloadSchema) check(path string, v any) error {
	if s == nil || s.Type == "any" || v == nil {
		return nil // null fits anything: json.Unmarshal leaves the zero value
	}
	at := path
	if at == "" {
		at = "the payload"
	}
	wrong := func(want string) error {
		return fmt.Errorf("%s: want %s, got %s", at, want, jsonKind(v))
	}
	switch s.Type {
	case "bool":
		if _, ok := v.(bool); !ok {
			return wrong("true or false")
		}
	case "string":
		if _, ok := v.(string); !ok {
			return wrong("a string")
		}
	case "bytes":
		switch v := v.(type) {
		case string:
			if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				return fmt.Errorf("%s: want base64, got a string that is not", at)
			}
		case []any: // json.Unmarshal takes an array of bytes too
			item := &payloadSchema{Type: "uint", Bits: 8}
			for i, b := range v {
				if err := item.check(fmt.Sprintf("%s[%d]", path, i), b); err != nil {
					return err
				}
			}
		default:
			return wrong("a base64 string")
		}
	case "float":
		if _, ok := v.(json.Number); !ok {
			return wrong("a number")
		}
	case "int", "uint":
		n, ok := v.(json.Number)
		if !ok {
			return wrong("a whole number")
		}
		if s.Type == "int" {
			if _, err := strconv.ParseInt(string(n), 10, max(s.Bits, 8)); err != nil {
				return fmt.Errorf("%s: want a whole number that fits %d bits, got %s", at, s.Bits, n)
			}
		} else if _, err := strconv.ParseUint(string(n), 10, max(s.Bits, 8)); err != nil {
			return fmt.Errorf("%s: want a whole number from 0 that fits %d bits, got %s", at, s.Bits, n)
		}
	case "array":
		list, ok := v.([]any)
		if !ok {
			return wrong("an array")
		}
		for i, item := range list {
			if err := s.Items.check(fmt.Sprintf("%s[%d]", path, i), item); err != nil {
				return err
			}
		}
	case "map":
		obj, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		for k, item := range obj {
			if s.IntKeys {
				if _, err := strconv.ParseInt(k, 10, 64); err != nil {
					if _, err := strconv.ParseUint(k, 10, 64); err != nil {
						return fmt.Errorf("%s: key %q is not a whole number", at, k)
					}
				}
			}
			if err := s.Values.check(path+"."+k, item); err != nil {
				return err
			}
		}
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		for k, item := range obj {
			f := s.field(k)
			if f == nil {
				continue // unknown fields are ignored, as json.Unmarshal does
			}
			if err := f.check(path+"."+k, item); err != nil {
				return err
			}
		}
	}
	return nil
}

// field finds the field a key decodes into: its exact name, else one that
// matches without regard to case (encoding/json's rule).
func (s *payloadSchema) field(key string) *payloadSchema {
	if f, ok := s.Fields[key]; ok {
		return f
	}
	for name, f := range s.Fields {
		if strings.EqualFold(name, key) {
			return f
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return "the string " + strconv.Quote(v)
	case json.Number:
		return "the number " + string(v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}
