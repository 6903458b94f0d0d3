package seal

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
)

// The module graph holds no well-kept Go CCM package, so this is a small
// CCM mode (NIST SP 800-38C: CBC-MAC for authentication, CTR for
// confidentiality) over any 16-byte block cipher. Production only ever hands
// it AES-256; the tests also run the standard's AES-128 examples.

// errOpen is returned by ccm.Open for every failure, so a caller learns
// nothing about why a forged message was rejected.
var errOpen = errors.New("seal: ccm message authentication failed")

// ccm implements cipher.AEAD. It holds only the block cipher and two sizes,
// so it is safe for concurrent use as long as the block cipher is (the
// standard library's AES is).
type ccm struct {
	b         cipher.Block
	nonceSize int // 7..13
	tagSize   int // 4, 6, ..., 16
}

// newCCM returns CCM over b with the given nonce and tag sizes. The length
// field L of SP 800-38C is 15 − nonceSize, which bounds the message length
// to 2^(8L) − 1 bytes (65535 for a 13-byte nonce).
func newCCM(b cipher.Block, nonceSize, tagSize int) (*ccm, error) {
	if b.BlockSize() != 16 {
		return nil, errors.New("ccm needs a 16-byte block cipher")
	}
	if nonceSize < 7 || nonceSize > 13 {
		return nil, fmt.Errorf("ccm nonce size must be between 7 and 13 (got %d)", nonceSize)
	}
	if tagSize < 4 || tagSize > 16 || tagSize%2 != 0 {
		return nil, fmt.Errorf("ccm tag length must be one of 4, 6, 8, 10, 12, 14, 16 (got %d)", tagSize)
	}
	return &ccm{b: b, nonceSize: nonceSize, tagSize: tagSize}, nil
}

var _ cipher.AEAD = (*ccm)(nil)

func (c *ccm) NonceSize() int { return c.nonceSize }
func (c *ccm) Overhead() int  { return c.tagSize }

// maxLen is the longest message the length field can encode.
func (c *ccm) maxLen() uint64 {
	q := 15 - c.nonceSize
	if q >= 8 {
		return 1<<63 - 1 // beyond any slice length
	}
	return 1<<(8*q) - 1
}

// Seal appends the encryption of plaintext followed by the tag to dst. As
// with every cipher.AEAD, it panics on a nonce of the wrong size; a message
// longer than the length field allows also panics, so callers check
// maxLen first.
func (c *ccm) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != c.nonceSize {
		panic("seal: ccm: incorrect nonce length given to Seal")
	}
	if uint64(len(plaintext)) > c.maxLen() {
		panic("seal: ccm: message too long for the nonce size")
	}
	// The MAC reads plaintext before CTR writes over it, which keeps the
	// in-place use (dst = plaintext[:0]) that cipher.AEAD promises working.
	tag := c.mac(nonce, plaintext, additionalData)
	ret, out := sliceForAppend(dst, len(plaintext)+c.tagSize)
	s0 := c.ctr(out[:len(plaintext)], nonce, plaintext)
	subtle.XORBytes(out[len(plaintext):], tag[:c.tagSize], s0[:c.tagSize])
	return ret
}

// Open authenticates and decrypts ciphertext (ciphertext ‖ tag) and appends
// the plaintext to dst. On failure the bytes written to dst's capacity are
// zeroed, so unauthenticated plaintext never escapes.
func (c *ccm) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != c.nonceSize {
		return nil, errOpen
	}
	if len(ciphertext) < c.tagSize || uint64(len(ciphertext)-c.tagSize) > c.maxLen() {
		return nil, errOpen
	}
	n := len(ciphertext) - c.tagSize
	var gotTag [16]byte
	copy(gotTag[:], ciphertext[n:]) // copy first: out may overlap ciphertext
	ret, out := sliceForAppend(dst, n)
	s0 := c.ctr(out, nonce, ciphertext[:n])
	want := c.mac(nonce, out, additionalData)
	subtle.XORBytes(want[:c.tagSize], want[:c.tagSize], s0[:c.tagSize])
	if subtle.ConstantTimeCompare(want[:c.tagSize], gotTag[:c.tagSize]) != 1 {
		clear(out)
		return nil, errOpen
	}
	return ret, nil
}

// mac computes the CBC-MAC T (a full block; the caller truncates it) over
// the formatted input B0 ‖ encoded associated data ‖ payload, each part
// zero-padded to whole blocks (SP 800-38C §A.2).
func (c *ccm) mac(nonce, payload, ad []byte) [16]byte {
	q := 15 - c.nonceSize
	var x [16]byte
	// B0: flags, nonce, message length in q bytes (big-endian).
	x[0] = byte((c.tagSize-2)/2)<<3 | byte(q-1)
	if len(ad) > 0 {
		x[0] |= 0x40
	}
	copy(x[1:], nonce)
	putLength(x[16-q:], uint64(len(payload)))
	c.b.Encrypt(x[:], x[:])

	if len(ad) > 0 {
		// The associated data is prefixed by its length: 2 bytes below
		// 2^16 − 2^8, else 0xfffe + 4 bytes, else 0xffff + 8 bytes.
		var hdr [10]byte
		var h []byte
		switch n := uint64(len(ad)); {
		case n < 1<<16-1<<8:
			binary.BigEndian.PutUint16(hdr[:], uint16(n))
			h = hdr[:2]
		case n < 1<<32:
			hdr[0], hdr[1] = 0xff, 0xfe
			binary.BigEndian.PutUint32(hdr[2:], uint32(n))
			h = hdr[:6]
		default:
			hdr[0], hdr[1] = 0xff, 0xff
			binary.BigEndian.PutUint64(hdr[2:], n)
			h = hdr[:10]
		}
		// The first block holds the length prefix and the start of ad.
		k := min(len(ad), 16-len(h))
		subtle.XORBytes(x[:len(h)], x[:len(h)], h)
		subtle.XORBytes(x[len(h):], x[len(h):len(h)+k], ad[:k])
		c.b.Encrypt(x[:], x[:])
		c.absorb(&x, ad[k:])
	}
	c.absorb(&x, payload)
	return x
}

// absorb runs the CBC-MAC over data, zero-padding its last block.
func (c *ccm) absorb(x *[16]byte, data []byte) {
	for len(data) > 0 {
		k := min(len(data), 16)
		subtle.XORBytes(x[:k], x[:k], data[:k])
		c.b.Encrypt(x[:], x[:])
		data = data[k:]
	}
}

// ctr XORs src with the key stream of counter blocks 1, 2, … into dst and
// returns S0, the encryption of counter block 0 that masks the tag.
func (c *ccm) ctr(dst, nonce, src []byte) [16]byte {
	q := 15 - c.nonceSize
	var a, s [16]byte
	a[0] = byte(q - 1)
	copy(a[1:], nonce)
	var s0 [16]byte
	c.b.Encrypt(s0[:], a[:])
	for i := uint64(1); len(src) > 0; i++ {
		putLength(a[16-q:], i)
		c.b.Encrypt(s[:], a[:])
		k := subtle.XORBytes(dst, src, s[:])
		dst, src = dst[k:], src[k:]
	}
	return s0
}

// putLength writes v big-endian into all of b (1..8 bytes).
func putLength(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// sliceForAppend extends in by n bytes, reallocating when the capacity is
// short, and returns the whole slice and the n new bytes.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	tail = head[len(in):]
	return head, tail
}
