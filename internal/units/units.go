// Package units formats byte counts and parses and formats lists of sizes the way
// sublet's programs (examples, cmd/sublet) print and read them, so that every program
// writes a figure the same way.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes formats n in the largest unit of 1024 it reaches, with two decimals ("7.63 MiB",
// "-1.50 KiB"; PyTorch's out-of-memory messages have two too), or in bytes below 1 KiB
// ("512 B").
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
	return fmt.Sprintf("%.2f %s", v, names[i])
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

// byteUnits are the units ParseBytes reads, by their lower-case names.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// ParseBytes reads a byte count, the value of the flag named flag: a number of bytes
// ("150109880320") or a number and a unit, binary (KiB, MiB, GiB, TiB) or decimal (KB,
// MB, GB, TB), in any case, with or without a space ("80GiB", "1.5 TiB", "141 GB"). The
// result is rounded to a whole byte; it must be positive.
func ParseBytes(flag, s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	unit, ok := byteUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	v, err := strconv.ParseFloat(t[:i], 64)
	n := math.Round(v * unit)
	if !ok || err != nil || !(n >= 1 && n <= math.MaxInt64/2) {
		return 0, fmt.Errorf("%s %q: want a positive byte count such as 150109880320, 80GiB or 141GB (units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", flag, s)
	}
	return int64(n), nil
}
