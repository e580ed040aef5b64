package memviz

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/memsnap"
)

// A trace longer than the chart has columns: each column covers several events, and
// the peaks of allocated, reserved and active memory all survive, though they come at
// different events of a column.
func TestColumnsKeepEveryPeak(t *testing.T) {
	const M = 1 << 20
	n := 2 * maxColumns
	tl := &memsnap.Timeline{Sites: []string{"x"}}
	for i := range n {
		p := memsnap.Point{Action: "alloc", Allocated: 4 * M, Reserved: 8 * M, Active: 4 * M}
		switch i {
		case 100: // the allocation peak, followed at once by a free and a new segment
			p.Allocated, p.Active = 6*M, 6*M
		case 101:
			p.Reserved, p.Active = 28*M, 7*M
		}
		p.BySite = []int64{p.Allocated}
		tl.Points = append(tl.Points, p)
	}
	var got struct {
		N      int `json:"n"`
		Points []struct {
			I int      `json:"i"`
			M [3]int64 `json:"m"`
			S []int    `json:"s"`
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(series(tl)), &got))
	require.Equal(t, n, got.N)
	require.Len(t, got.Points, maxColumns)
	assert.Equal(t, []int{100, 101}, got.Points[50].S, "the column's first and last event")
	assert.Equal(t, 100, got.Points[50].I, "drawn at its allocation peak")
	var peak [3]int64
	for _, p := range got.Points {
		for k := range peak {
			peak[k] = max(peak[k], p.M[k])
		}
	}
	assert.Equal(t, [3]int64{6 * M, 28 * M, 7 * M}, peak, "allocated, reserved and active peaks")
	c := timeline(tl)
	assert.Equal(t, "28.0 MiB", c.Ticks[4].Label, "the scale reaches the reserved peak")
	assert.Equal(t, int64(6*M), c.Areas[0].Peak, "the site's area reaches the allocation peak")
}
