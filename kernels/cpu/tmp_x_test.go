package cpu

import "testing"

func BenchmarkXLanes(b *testing.B) {
	x := benchData(1 << 24)
	for _, run := range []int{1 << 10, 1 << 12, 1 << 15} {
		b.Run(string(rune('a'+run>>10%26)), func(b *testing.B) {
			b.SetBytes(4 << 24)
			var s float64
			for b.Loop() {
				for i := 0; i < len(x); i += run {
					var lanes [16]float64
					sumLanes(&lanes, x[i:i+run])
					s += combineLanes(&lanes)
				}
			}
			_ = s
		})
	}
}
