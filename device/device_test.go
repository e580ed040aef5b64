package device_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// wrapped is a device that wraps another by embedding it, as a user's meter does.
type wrapped struct{ device.Device }

func (w wrapped) Unwrap() device.Device { return w.Device }

// opaque wraps another without saying so.
type opaque struct{ device.Device }

func TestInnermost(t *testing.T) {
	d, err := sim.New(sim.Options{})
	assert.NoError(t, err)
	assert.Same(t, d, device.Innermost(d), "a device that wraps none")
	assert.Same(t, d, device.Innermost(wrapped{wrapped{d}}), "through every layer")
	o := opaque{d}
	assert.Equal(t, device.Device(o), device.Innermost(wrapped{o}), "down to one that does not unwrap")
}
