package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/kernels"
)

// flagBytes is the error flag's device block: the lock at flagLock, and before it room
// for src/common.cuh's ErrorFlag record where the record cannot live in page-locked
// host memory (see makeFlag).
const flagBytes = 64

// flagLock is the offset of the lock (an int) in the device block.
const flagLock = hdrSizeofErrorFlag

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
// the record's device address and the launch's number, with flagMu held until done is
// called (right after the launch). The flag is made on first use; if that fails, the
// error is kept for Check and ok is false: the op launches nothing.
func (b *Backend) flagged() (flag uint64, seq uint32, ok bool) {
	b.flagMu.Lock()
	if err := b.makeFlag(); err != nil {
		b.flagMu.Unlock()
		b.fault(err)
		return 0, 0, false
	}
	b.seq++
	b.armed = true
	return b.flagAddr(), b.seq, true
}

// flagAddr is the record's device address; flagMu is held and the flag exists. With
// unified addressing, page-locked host memory from cuMemHostAlloc is addressed by the
// device at its host address (whatever the allocation's flags), so the kernels take
// the host record's own address.
func (b *Backend) flagAddr() uint64 {
	if b.record != nil {
		return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.record))))
	}
	return uint64(b.flag)
}

// makeFlag makes the flag unless it exists; flagMu is held. It takes the device block
// (zeroed, its record's lock pointer set) and, on a GPU with unified addressing, a
// page-locked host record pointing to the block's lock, where kernels write their
// reports and readFlag reads them with no copy. Without that host memory (HostAlloc
// fails, no unified addressing, or a recording Backend) the record stays in the device
// block and readFlag copies it: one round trip more per Check, nothing else differs.
func (b *Backend) makeFlag() error {
	if b.flag != 0 {
		return nil
	}
	p, err := b.malloc(flagBytes)
	if err == nil {
		var init [flagBytes]byte
		binary.LittleEndian.PutUint64(init[hdrErrorFlagLock:], uint64(p+flagLock))
		if err = b.copyToDevice(p, init[:], 0); err != nil {
			err = errors.Join(err, b.free(p))
		}
	}
	if err != nil {
		return fmt.Errorf("kernels/cuda: %s: the error flag: %w", b.name(), err)
	}
	b.flag = p
	if b.rec != nil || !b.dev.Properties().UnifiedAddressing {
		return nil
	}
	if r, err := b.dev.HostAlloc(hdrSizeofErrorFlag); err == nil {
		clear(r)
		binary.LittleEndian.PutUint64(r[hdrErrorFlagLock:], uint64(p+flagLock))
		b.record = r
	}
	return nil
}

// freeFlag gives back what makeFlag took; flagMu is held and the device is idle.
func (b *Backend) freeFlag() error {
	var errs []error
	if b.record != nil {
		errs = append(errs, b.dev.HostFree(b.record))
		b.record = nil
	}
	if b.flag != 0 {
		errs = append(errs, b.free(b.flag))
		b.flag = 0
	}
	return errors.Join(errs...)
}

// done ends what flagged began.
func (b *Backend) done() { b.flagMu.Unlock() }

// readFlag waits for the device, reads the record and clears it; flagMu is held. It
// returns the reported error, or nil. The host record is read and cleared in place
// once the device is idle (its kernels' stores are then visible); a record in the
// device block is copied, and cleared by a copy.
func (b *Backend) readFlag() error {
	b.armed = false
	if err := b.synchronize(); err != nil {
		return err
	}
	raw := b.record
	if raw == nil {
		var buf [hdrSizeofErrorFlag]byte
		if err := b.copyToHost(buf[:], b.flag, 0); err != nil {
			return err
		}
		raw = buf[:]
	}
	seq := binary.LittleEndian.Uint32(raw[hdrErrorFlagSeq:])
	b.seq = 0
	if seq == 0 {
		return nil
	}
	err := flagRecord(raw)
	// Everything after the lock pointer, which stays.
	if b.record != nil {
		clear(b.record[hdrErrorFlagSeq:])
		return err
	}
	var zero [hdrSizeofErrorFlag - hdrErrorFlagSeq]byte
	return errors.Join(err, b.copyToDevice(b.flag+hdrErrorFlagSeq, zero[:], 0))
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
