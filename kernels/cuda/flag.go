package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// flagBytes is the ErrorFlag's device block (src/common.cuh's struct, rounded up).
const flagBytes = 64

// errOps names the op of each ERR_* code of src/common.cuh as kernels/cpu names it in
// its IndexErrors.
var errOps = map[int32]string{
	hdrErrCrossEntropy:         "cross_entropy",
	hdrErrCrossEntropyBackward: "cross_entropy backward",
	hdrErrEmbedding:            "embedding",
	hdrErrEmbeddingBackward:    "embedding backward",
	hdrErrMaxBackward:          "max backward",
}

// flagged starts the launch of a kernel that may report an index error: it returns
// the flag's address and the launch's number, with flagMu held until done is called
// (right after the launch). The flag is allocated (zeroed) on first use; if that
// fails, the error is kept for Check and ok is false: the op launches nothing.
func (b *Backend) flagged() (flag uint64, seq uint32, ok bool) {
	b.flagMu.Lock()
	if b.flag == 0 {
		p, err := b.malloc(flagBytes)
		if err == nil {
			var zero [flagBytes]byte
			if err = b.copyToDevice(p, zero[:], 0); err != nil {
				err = errors.Join(err, b.free(p))
			}
		}
		if err != nil {
			b.flagMu.Unlock()
			b.fault(fmt.Errorf("kernels/cuda: %s: the error flag: %w", b.name(), err))
			return 0, 0, false
		}
		b.flag = p
	}
	b.seq++
	b.armed = true
	return uint64(b.flag), b.seq, true
}

// done ends what flagged began.
func (b *Backend) done() { b.flagMu.Unlock() }

// readFlag waits for the device, reads the flag and clears it; flagMu is held. It
// returns the reported error, or nil.
func (b *Backend) readFlag() error {
	b.armed = false
	if err := b.synchronize(); err != nil {
		return err
	}
	var raw [hdrSizeofErrorFlag]byte
	if err := b.copyToHost(raw[:], b.flag, 0); err != nil {
		return err
	}
	seq := binary.LittleEndian.Uint32(raw[hdrErrorFlagSeq:])
	b.seq = 0
	if seq == 0 {
		return nil
	}
	var zero [hdrSizeofErrorFlag]byte
	if err := b.copyToDevice(b.flag, zero[:], 0); err != nil {
		return err
	}
	op := int32(binary.LittleEndian.Uint32(raw[hdrErrorFlagOp:]))
	name, ok := errOps[op]
	if !ok {
		name = fmt.Sprintf("kernel error %d", op)
	}
	return &kernels.IndexError{
		Op:    name,
		Pos:   int(int64(binary.LittleEndian.Uint64(raw[hdrErrorFlagPos:]))),
		Index: int64(binary.LittleEndian.Uint64(raw[hdrErrorFlagIndex:])),
		Limit: int(int64(binary.LittleEndian.Uint64(raw[hdrErrorFlagLimit:]))),
	}
}
