package autograd_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

func TestAnomalyNamesOpAndSite(t *testing.T) {
	w, tp := toy(t)
	tp.sites = true
	x := tp.param(0)
	y := tp.mul(tp.log(x), tp.constant(2)) // Log's backward divides by 0
	err := tp.backward(y, autograd.Options{DetectAnomaly: true})
	var ae *autograd.AnomalyError
	require.True(t, errors.As(err, &ae), "%v", err)
	assert.Equal(t, "Log", ae.Node.Name())
	assert.Equal(t, 0, ae.Output)
	assert.ErrorContains(t, err, "function 'Log' (node Log#2) returned NaN or Inf values in its 0th output")
	assert.ErrorContains(t, err, "Log#2 was created at:")
	assert.ErrorContains(t, err, "autograd_test.TestAnomalyNamesOpAndSite (autograd/anomaly_test.go:")
	assert.Zero(t, w.count("grad"))
	assert.Zero(t, x.grad(), "the Inf never reached the leaf")
}

func TestAnomalyOutputIndexAndHintWithoutSite(t *testing.T) {
	_, tp := toy(t)
	y := tp.mul(tp.param(3), tp.log(tp.param(0)))
	err := tp.backward(y, autograd.Options{DetectAnomaly: true})
	assert.ErrorContains(t, err, "function 'Mul' (node Mul#4) returned NaN or Inf values in its 0th output")
	// Output 0 of Mul is g·log(0) = -Inf.
	assert.ErrorContains(t, err, "record creation sites")

	y = tp.mul(tp.log(tp.param(0)), tp.param(3))
	err = tp.backward(y, autograd.Options{DetectAnomaly: true})
	assert.ErrorContains(t, err, "in its 1st output")
}

func TestWithoutAnomalyModeNonFiniteFlows(t *testing.T) {
	_, tp := toy(t)
	x := tp.param(0)
	require.NoError(t, tp.backward(tp.log(x), autograd.Options{}))
	assert.True(t, math.IsInf(x.grad(), 1))
}

func TestNodeErrorsCarryTheSite(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	site := autograd.CaptureSite(0)
	n, err := autograd.NewNode(autograd.NodeSpec{Name: "Bad", Outputs: 1, Fn: &badFn{w: w, n: 1, err: errBoom},
		Inputs: []autograd.Edge{a.edge}, Site: site})
	require.NoError(t, err)
	defer func() { require.NoError(t, n.Release()) }()
	err = runNode(tp, n, autograd.Options{})
	require.ErrorIs(t, err, errBoom)
	assert.ErrorContains(t, err, "Bad#0 was created at:\n"+site.String())
}

func TestCaptureSite(t *testing.T) {
	s := func() autograd.Site { return autograd.CaptureSite(1) }()
	require.NotEmpty(t, s)
	assert.Equal(t, "autograd_test.TestCaptureSite", s[0].Function)
	assert.Equal(t, "autograd/anomaly_test.go", s[0].File)
	for _, f := range s {
		assert.False(t, strings.HasPrefix(f.Function, "runtime."))
	}
	assert.LessOrEqual(t, len(deep(40)), 12, "a site stays compact")
	assert.Equal(t, "autograd_test.deep", deep(40)[0].Function)
}

func deep(n int) autograd.Site {
	if n == 0 {
		return autograd.CaptureSite(1)
	}
	return deep(n - 1)
}

func TestAnomalyErrorOrdinals(t *testing.T) {
	_, tp := toy(t)
	n := tp.exp(tp.param(1)).edge.Node
	for out, want := range map[int]string{0: "0th", 1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd"} {
		assert.Contains(t, (&autograd.AnomalyError{Node: n, Output: out}).Error(), "in its "+want+" output")
	}
}
