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
	for name, c := range map[string]color.RGBA{"allocated": AllocatedColour, "reserved": ReservedColour, "oom": OOMColour} {
		assert.Greater(t, count(img, c), 100, "%s line drawn", name)
	}

	assert.ErrorContains(t, WritePNG(&b, Series{}, "x"), "want the same number, at least one")
	assert.ErrorContains(t, WritePNG(&b, Series{Allocated: []int64{1}}, "x"), "1 allocated, 0 reserved and 0 active points")
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
