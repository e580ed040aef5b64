package cpu

import "math/bits"

// philox4x32 is Random123's Philox4x32-10 (Salmon et al., SC11): four 32-bit words, a
// pure function of a 128-bit counter and a 64-bit key, so any element's random bits
// are computed on their own, on any device, without a state to carry. PyTorch's CUDA
// generator uses the same function.
func philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	const (
		m0, m1 = 0xD2511F53, 0xCD9E8D57
		w0, w1 = 0x9E3779B9, 0xBB67AE85
	)
	for r := 0; r < 10; r++ {
		if r > 0 {
			key[0] += w0
			key[1] += w1
		}
		hi0, lo0 := bits.Mul32(m0, ctr[0])
		hi1, lo1 := bits.Mul32(m1, ctr[2])
		ctr = [4]uint32{hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0}
	}
	return ctr
}

// philoxBlock is the block of four random words at counter block under the key seed.
func philoxBlock(seed uint64, block uint64) [4]uint32 {
	return philox4x32([4]uint32{uint32(block), uint32(block >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
}
