package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// flagBytes is the ErrorFlag's device block (src/common.cuh's struct, rounded up).
const flagBytes = 64

// flagErrors describes the error of each ERR_* code of src/common.cuh: the op as
// kernels/cpu names it in its errors and, for a range error (elements outside the op's
// domain, counted), the domain; the others are index errors.
var flagErrors = map[int32]flagError{
	hdrErrCrossEntropy:         {op: "cross_entropy"},
	hdrErrCrossEntropyBackward: {op: "cross_entropy backward"},
	hdrErrEmbedding:            {op: "embedding"},
	hdrErrEmbeddingBackward:    {op: "embedding backward"},
	hdrErrMaxBackward:          {op: "max backward"},
	hdrErrBinaryCrossEntropy:   {op: "binary_cross_entropy", isRange: true, lo: 0, hi: 1},
}

// flagError is what one ERR_* code reports; the table is never written after init.
type flagError struct {
	op      string  // the op's name in the error
	isRange bool    // a *kernels.RangeError (else a *kernels.IndexError)
	lo, hi  float64 // a range error's domain, [lo, hi]
}

// flagged starts the launch of a kernel that may report an error: it returns
// the flag's address and the launch's number, with flagMu held until done is called
// (right after the launch). The flag is allocated (zeroed) on first use; if that
// fails, the error is kept for Check and ok is false: the op launches nothing.
func (b *Backend) flagged() (flag uint64, seq uint32, ok bool) {
	b.flagMu.Lock()
	if err := b.makeFlag(); err != nil {
		b.flagMu.Unlock()
		b.fault(err)
		return 0, 0, false
	}
	b.seq++
	b.armed = true
	return uint64(b.flag), b.seq, true
}

// makeFlag allocates and zeroes the flag unless it exists; flagMu is held.
func (b *Backend) makeFlag() error {
	if b.flag != 0 {
		return nil
	}
	p, err := b.malloc(flagBytes)
	if err == nil {
		var zero [flagBytes]byte
		if err = b.copyToDevice(p, zero[:], 0); err != nil {
			err = errors.Join(err, b.free(p))
		}
	}
	if err != nil {
		return fmt.Errorf("kernels/cuda: %s: the error flag: %w", b.name(), err)
	}
	b.flag = p
	return nil
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
	return flagRecord(raw[:])
}

// flagRecord is the error an ErrorFlag's bytes hold (seq is not 0): a
// *kernels.RangeError for a range error's code, a *kernels.IndexError otherwise.
func flagRecord(raw []byte) error {
	i64 := func(off int) int64 { return int64(binary.LittleEndian.Uint64(raw[off:])) }
	code := int32(binary.LittleEndian.Uint32(raw[hdrErrorFlagOp:]))
	e, ok := flagErrors[code]
	if !ok {
		e.op = fmt.Sprintf("kernel error %d", code)
	}
	if e.isRange {
		return &kernels.RangeError{Op: e.op, Count: int(i64(hdrErrorFlagCount)), Lo: e.lo, Hi: e.hi}
	}
	return &kernels.IndexError{
		Op:    e.op,
		Pos:   int(i64(hdrErrorFlagPos)),
		Index: i64(hdrErrorFlagIndex),
		Limit: int(i64(hdrErrorFlagLimit)),
	}
}
