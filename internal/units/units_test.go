package units

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 512: "512 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 872 << 20: "872.00 MiB", 8_000_000: "7.63 MiB",
		3 << 29: "1.50 GiB", 150109880320: "139.80 GiB", 5 << 40: "5.00 TiB", 5 << 50: "5120.00 TiB", -2048: "-2.00 KiB", -1536: "-1.50 KiB",
	} {
		assert.Equal(t, want, Bytes(n), "%d", n)
	}
}

func TestParseAndJoinInts(t *testing.T) {
	v, err := ParseInts("-sizes", "784, 256,10")
	require.NoError(t, err)
	assert.Equal(t, []int{784, 256, 10}, v)
	assert.Equal(t, "784-256-10", JoinInts(v, "-"))
	for _, bad := range []string{"", "1,,2", "1,x", "0", "-3", "1.5"} {
		_, err := ParseInts("-sizes", bad)
		assert.EqualError(t, err, `-sizes "`+bad+`": want positive integers separated by commas`, bad)
	}
}

func TestParseLayerSizes(t *testing.T) {
	v, err := ParseLayerSizes("-sizes", "2,3")
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, v)
	_, err = ParseLayerSizes("-sizes", "8")
	assert.EqualError(t, err, `-sizes "8": want the inputs and the outputs at least, separated by commas`)
	_, err = ParseLayerSizes("-sizes", "8,x")
	assert.EqualError(t, err, `-sizes "8,x": want positive integers separated by commas`)
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"150109880320": 150109880320, "80GiB": 80 << 30, "80 gib": 80 << 30, "1.5TiB": 3 << 39,
		"141GB": 141e9, "512MiB": 512 << 20, "2kb": 2000, "7B": 7, " 1 KiB ": 1024, "0.5": 1,
	} {
		n, err := ParseBytes("-capacity", in)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, bad := range []string{"", "GiB", "0", "-1GiB", "1.2.3MiB", "12 parsecs", "1e3", "80 GiB GiB", "9999999TiB", "0.2"} {
		_, err := ParseBytes("-capacity", bad)
		assert.ErrorContains(t, err, `-capacity "`+bad+`": want a positive byte count`, bad)
	}
}
