package memsnap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// WriteJSON writes s as one JSON object with PyTorch's key names.
func WriteJSON(w io.Writer, s *Snapshot) error {
	bw := bufio.NewWriter(w)
	var buf []byte
	buf = appendJSON(buf, s.tree())
	buf = append(buf, '\n')
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	return bw.Flush()
}

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case dict:
		b = append(b, '{')
		for i, it := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, it.k)
			b = append(b, ':')
			b = appendJSON(b, it.v)
		}
		return append(b, '}')
	case []any:
		return appendList(b, x)
	case tuple:
		return appendList(b, x)
	case frames:
		b = append(b, '[')
		for i, f := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"filename":`...)
			b = appendString(b, f.Filename)
			b = append(b, `,"line":`...)
			b = strconv.AppendInt(b, int64(f.Line), 10)
			b = append(b, `,"name":`...)
			b = appendString(b, f.Name)
			b = append(b, '}')
		}
		return append(b, ']')
	case string:
		return appendString(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return append(b, "null"...)
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, x)
	case nil:
		return append(b, "null"...)
	}
	panic(fmt.Sprintf("memsnap: internal error: no JSON form for %T", v))
}

func appendList(b []byte, l []any) []byte {
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, v)
	}
	return append(b, ']')
}

// appendString writes s as a JSON string (encoding/json's escaping).
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// ReadJSON reads a snapshot written by WriteJSON (or PyTorch's dictionary dumped as
// JSON). A syntax error names its line and column; a bad value its key path.
func ReadJSON(r io.Reader) (*Snapshot, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%s: %w", position(data, se.Offset), err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%s: %w", position(data, te.Offset), err)
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%s: unexpected end of JSON", position(data, int64(len(data))))
		}
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the snapshot's JSON object", position(data, dec.InputOffset()))
	}
	v, err = numbers(v, "")
	if err != nil {
		return nil, err
	}
	return fromTree(v)
}

// position is "line L column C" of byte offset off.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d column %d", line, col)
}

// joinKey is the path of key k under path.
func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// numbers replaces every json.Number by an int64, uint64 or float64.
func numbers(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			n, err := numbers(e, joinKey(path, k))
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := numbers(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, &FieldError{Path: path, Msg: fmt.Sprintf("number %s out of range", x)}
		}
		return f, nil
	}
	return v, nil
}
