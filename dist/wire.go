package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// The group's wire protocol. Every message is a frame: a fixed header, then length
// bytes of body. All integers are little-endian.
const (
	frameMagic      uint32 = 0x444c4253 // "SBLD"
	protocolVersion        = 1
	headerSize             = 44
	// maxBody bounds what a header may announce, so that a corrupt or foreign header
	// is a protocol error, not a huge allocation.
	maxBody = 1 << 40
)

// Frame kinds.
const (
	frameHello   uint8 = iota + 1 // rank → rank 0: join (seq: protocol version, root: rank, count: world size)
	frameWelcome                  // rank 0 → rank: everyone joined
	frameRequest                  // rank → rank 0: a contribution to collective seq
	frameReply                    // rank 0 → rank: the result of collective seq
	frameFailure                  // either way: the group failed (code: cause, root: rank at fault, body: message)
)

// header is a frame's header. Which fields mean what depends on kind (see the kinds).
type header struct {
	kind   uint8
	code   uint8 // failure: the cause's wire code
	op     opKind
	redop  ReduceOp
	dtype  uint8
	seq    uint64 // the collective's position in the group's sequence
	root   int32  // request: the collective's root; hello: the sender's rank; failure: the rank at fault
	count  uint64 // request: elements; hello: world size
	length uint64 // bytes of body that follow
}

func (h *header) encode(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], frameMagic)
	b[4], b[5], b[6], b[7], b[8] = h.kind, h.code, uint8(h.op), uint8(h.redop), h.dtype
	b[9], b[10], b[11] = 0, 0, 0
	le.PutUint64(b[12:], h.seq)
	le.PutUint32(b[20:], uint32(h.root))
	le.PutUint64(b[24:], h.count)
	le.PutUint64(b[32:], h.length)
	le.PutUint32(b[40:], 0)
}

// errForeign is a header without the magic: whoever sent it does not speak this protocol.
var errForeign = errors.New("not a sublet dist frame")

func (h *header) decode(b []byte) error {
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != frameMagic {
		return errForeign
	}
	h.kind, h.code, h.op, h.redop, h.dtype = b[4], b[5], opKind(b[6]), ReduceOp(b[7]), b[8]
	h.seq = le.Uint64(b[12:])
	h.root = int32(le.Uint32(b[20:]))
	h.count = le.Uint64(b[24:])
	h.length = le.Uint64(b[32:])
	if h.length > maxBody {
		return fmt.Errorf("a frame announces %d bytes of body", h.length)
	}
	return nil
}

// writeFrame writes h (its length set to len(body)) and body, in one writev where the
// writer is a connection (no copy of body).
func writeFrame(w io.Writer, h header, body []byte) error {
	h.length = uint64(len(body))
	var hdr [headerSize]byte
	h.encode(hdr[:])
	bufs := net.Buffers{hdr[:], body}
	_, err := bufs.WriteTo(w)
	return err
}

// readFrame reads one frame.
func readFrame(r io.Reader) (header, []byte, error) {
	var h header
	var b [headerSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return h, nil, err
	}
	if err := h.decode(b[:]); err != nil {
		return h, nil, err
	}
	body := make([]byte, h.length)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	return h, body, nil
}

// ioCause classifies an I/O error on a connection to a peer: a deadline that passed is
// ErrTimeout, anything else (EOF, reset, a foreign frame) means the peer is gone.
func ioCause(err error) error {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w (%v)", ErrTimeout, err)
	}
	return fmt.Errorf("%w (%v)", ErrPeerGone, err)
}

// joinLengthPrefixed concatenates parts, each after its length (8 bytes).
func joinLengthPrefixed(parts [][]byte) []byte {
	n := 0
	for _, p := range parts {
		n += 8 + len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = binary.LittleEndian.AppendUint64(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

// splitLengthPrefixed undoes joinLengthPrefixed for n parts.
func splitLengthPrefixed(b []byte, n int) ([][]byte, error) {
	parts := make([][]byte, n)
	for i := range parts {
		if len(b) < 8 || binary.LittleEndian.Uint64(b) > uint64(len(b)-8) {
			return nil, fmt.Errorf("dist: internal error: a gathered reply is cut short at part %d of %d", i, n)
		}
		l := binary.LittleEndian.Uint64(b)
		parts[i], b = b[8:8+l:8+l], b[8+l:]
	}
	return parts, nil
}
