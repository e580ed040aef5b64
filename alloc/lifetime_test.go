package alloc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLifetime(t *testing.T) {
	for l := range numLifetimes {
		got, ok := ParseLifetime(l.String())
		require.True(t, ok, l.String())
		require.Equal(t, l, got)
	}
	_, ok := ParseLifetime("weights")
	require.False(t, ok)
}
