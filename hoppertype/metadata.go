package hoppertype

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// UnmarshalMetadata decodes a job's stored metadata, a JSON object of
// strings, as json.Unmarshal into a map[string]string would (the same
// map, the same errors for what it refuses), without reflection: stores
// decode it for every job they read that has metadata. Input it does not
// read at once (anything but an object of strings, malformed UTF-8) goes
// to json.Unmarshal, whose result it returns.
func UnmarshalMetadata(b []byte) (map[string]string, error) {
	if m, ok := scanMetadata(b); ok {
		return m, nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// scanMetadata reads a JSON object of strings; ok is false for anything
// else (left to encoding/json).
func scanMetadata(b []byte) (m map[string]string, ok bool) {
	i := skipSpace(b, 0)
	if i < len(b) && b[i] == 'n' { // null: a nil map, as encoding/json leaves it
		if len(b)-i >= 4 && string(b[i:i+4]) == "null" && skipSpace(b, i+4) == len(b) {
			return nil, true
		}
		return nil, false
	}
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	m = map[string]string{}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return m, skipSpace(b, i+1) == len(b)
	}
	for {
		var k, v string
		if k, i, ok = scanString(b, i); !ok {
			return nil, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		if v, i, ok = scanString(b, skipSpace(b, i+1)); !ok {
			return nil, false
		}
		m[k] = v
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return m, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads the JSON string at b[i:]: its value and the index past
// it. Strings with escapes are decoded here too; malformed UTF-8 and
// control characters are not ok (encoding/json decides about those).
func scanString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	i++
	start := i
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(b[start:i]), i + 1, true
		case c == '\\':
			return scanEscaped(b, start, i)
		case c < 0x20 || c >= utf8.RuneSelf:
			if c < 0x20 {
				return "", i, false
			}
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return "", i, false
			}
			i += size
		default:
			i++
		}
	}
	return "", i, false
}

// scanEscaped finishes a string that has an escape at b[i], its text
// starting at start.
func scanEscaped(b []byte, start, i int) (string, int, bool) {
	out := make([]byte, 0, i-start+16)
	out = append(out, b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(out), i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return "", i, false
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
				i += 2
			case 'b':
				out, i = append(out, '\b'), i+2
			case 'f':
				out, i = append(out, '\f'), i+2
			case 'n':
				out, i = append(out, '\n'), i+2
			case 'r':
				out, i = append(out, '\r'), i+2
			case 't':
				out, i = append(out, '\t'), i+2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					return "", i, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(0), false
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok2 = hex4(b, i+2)
					}
					if d := utf16.DecodeRune(r, r2); ok2 && d != utf8.RuneError {
						r, i = d, i+6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", i, false
			}
		case c < 0x20:
			return "", i, false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return "", i, false
			}
			out = append(out, b[i:i+size]...)
			i += size
		default:
			out = append(out, c)
			i++
		}
	}
	return "", i, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
