// Package units formats byte counts and parses and formats lists of sizes the way
// sublet's programs (examples, cmd/sublet) print and read them, so that every program
// writes a figure the same way.
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes formats n in units of 1024 with one decimal ("1.5 GiB"), or in bytes below
// 1 KiB ("512 B").
func Bytes(n int64) string {
	v, names := float64(n), []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for (v >= 1024 || v <= -1024) && i < len(names)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, names[i])
}

// ParseInts reads a comma-separated list of positive integers, the value of the flag
// named flag ("-sizes"), which the error names.
func ParseInts(flag, s string) ([]int, error) {
	var v []int
	for _, w := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s %q: want positive integers separated by commas", flag, s)
		}
		v = append(v, n)
	}
	return v, nil
}

// ParseLayerSizes reads an MLP's layer sizes (inputs, hidden widths, outputs) from the
// value of the flag named flag: ParseInts, and at least two sizes.
func ParseLayerSizes(flag, s string) ([]int, error) {
	v, err := ParseInts(flag, s)
	if err == nil && len(v) < 2 {
		err = fmt.Errorf("%s %q: want the inputs and the outputs at least, separated by commas", flag, s)
	}
	return v, err
}

// JoinInts writes v with sep between the numbers ("2-128-3").
func JoinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}
