// Package jsonkeys checks the key convention of sublet's JSON outputs: snake_case, the
// convention of PyTorch's memory_stats() keys, which the outputs carry as they are.
//
//	bad, err := jsonkeys.Bad(out, "SUBLET_ALLOC_CONF") // out: what a command printed
//
// A key passes when it is lower-case letters, digits and underscores, in words joined by
// dots (allocated_bytes.all.current); except names keys another format fixes.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
)

var snake = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*(\.[a-z0-9]+(_[a-z0-9]+)*)*$`)

// Bad returns the path of every object key in data that breaks the convention, in
// document order. data is one JSON value or several in a row (JSON lines).
func Bad(data []byte, except ...string) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var bad []string
	for n := 0; ; n++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return nil, errors.New("jsonkeys: no JSON value")
			}
			return bad, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jsonkeys: value %d: %w", n+1, err)
		}
		walk(v, "", except, &bad)
	}
}

func walk(v any, path string, except []string, bad *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !snake.MatchString(k) && !slices.Contains(except, k) {
				*bad = append(*bad, path+"/"+k)
			}
			walk(x[k], path+"/"+k, except, bad)
		}
	case []any:
		for i, e := range x {
			walk(e, fmt.Sprintf("%s[%d]", path, i), except, bad)
		}
	}
}
