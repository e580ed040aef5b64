package exflag

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "")
	require.NoError(t, Parse(fs, []string{"-n", "3"}))
	assert.Equal(t, 3, *n)
	assert.EqualError(t, Parse(fs, []string{"-n", "3", "extra"}), `unexpected arguments ["extra"]`)
	assert.Error(t, Parse(fs, []string{"-nope"}))
}
