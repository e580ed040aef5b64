package memplot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/replay"
)

// count returns how many pixels of img are exactly c.
func count(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B && uint8(a>>8) == c.A {
				n++
			}
		}
	}
	return n
}

func TestPNGRoundTrip(t *testing.T) {
	s := Series{
		Allocated: []int64{0, 1 << 30, 2 << 30, 1 << 30},
		Reserved:  []int64{2 << 30, 2 << 30, 3 << 30, 3 << 30},
		Active:    []int64{0, 1 << 30, 2 << 30, 1 << 30},
		OOMs:      []int{2},
	}
	var b bytes.Buffer
	require.NoError(t, WritePNG(&b, s, "test"))
	img, err := png.Decode(&b)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, 960, 480), img.Bounds())
	// Active equals allocated here: its line shows on the area's edge, not under it.
	for name, c := range map[string]color.RGBA{"allocated area": AllocatedFill, "active": ActiveColour, "reserved": ReservedColour, "oom": OOMColour} {
		assert.Greater(t, count(img, c), 100, "%s drawn", name)
	}

	assert.ErrorContains(t, WritePNG(&b, Series{}, "x"), "want the same number, at least one")
	assert.ErrorContains(t, WritePNG(&b, Series{Allocated: []int64{1}}, "x"), "1 allocated, 0 reserved and 0 active points")
}

// The unit is the one the largest value reads best in: 45 MiB in MiB, not 0.04 GiB.
func TestUnitFollowsTheData(t *testing.T) {
	for _, c := range []struct {
		most int64
		unit string
	}{{0, "B"}, {1000, "B"}, {1 << 10, "KiB"}, {45 << 20, "MiB"}, {(1 << 30) - 1, "MiB"}, {3 << 30, "GiB"}, {5 << 40, "TiB"}, {5 << 50, "TiB"}} {
		u, per := unitOf(c.most)
		assert.Equal(t, c.unit, u, "%d bytes", c.most)
		assert.LessOrEqual(t, per, max(1, float64(c.most)), "%d bytes", c.most)
	}
	s := Series{Allocated: []int64{10 << 20, 45 << 20}, Reserved: []int64{20 << 20, 46 << 20}, Active: []int64{10 << 20, 45 << 20}}
	var b bytes.Buffer
	require.NoError(t, WritePNG(&b, s, "45 MiB"))
	pts := sample(s.Allocated, 1<<20)
	assert.Equal(t, 45.0, pts[1].Y, "drawn in MiB")
}

func TestFromReplay(t *testing.T) {
	r := &replay.Result{Keys: replay.SeriesKeys()}
	row := func(alloc, reserved, ooms int64) []int64 {
		v := make([]int64, len(r.Keys))
		for i, k := range r.Keys {
			switch k {
			case "allocated_bytes.all.current", "active_bytes.all.current":
				v[i] = alloc
			case "reserved_bytes.all.current":
				v[i] = reserved
			case "num_ooms":
				v[i] = ooms
			}
		}
		return v
	}
	r.Series = [][]int64{row(1, 2, 0), row(1, 2, 1), row(0, 2, 1), row(0, 0, 2)}
	s, err := FromReplay(r)
	require.NoError(t, err)
	assert.Equal(t, Series{Allocated: []int64{1, 1, 0, 0}, Reserved: []int64{2, 2, 2, 0}, Active: []int64{1, 1, 0, 0}, OOMs: []int{1, 3}}, s)
	_, err = FromReplay(&replay.Result{Keys: []string{"x"}})
	assert.ErrorContains(t, err, `no "allocated_bytes.all.current" column`)
}
