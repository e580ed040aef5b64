package alloc

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

// ptrMap against a Go map under random puts and removes, with addresses that collide
// in the table often (few distinct high bits).
func TestPtrMapMatchesGoMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m ptrMap
	ref := map[device.Ptr]*block{}
	var keys []device.Ptr
	for step := range 20000 {
		if len(keys) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(keys))
			p := keys[i]
			keys[i] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			require.Same(t, ref[p], m.remove(p), "step %d", step)
			delete(ref, p)
			require.Nil(t, m.remove(p), "a removed key is gone")
		} else {
			p := device.Ptr(1+r.IntN(4096)) << 9
			if _, ok := ref[p]; ok {
				continue
			}
			b := &block{addr: p}
			m.put(p, b)
			ref[p] = b
			keys = append(keys, p)
		}
		require.Equal(t, len(ref), m.n)
		if step%97 == 0 {
			for p, b := range ref {
				require.Same(t, b, m.get(p))
			}
			require.Nil(t, m.get(device.Ptr(5000)<<9))
		}
	}
}
