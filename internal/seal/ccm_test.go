package seal

import (
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func seq(from byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = from + byte(i)
	}
	return b
}

// TestCCMKnownAnswers runs the examples of NIST SP 800-38C appendix C and
// the packet vectors of RFC 3610 docs/delivery.md#inprogress-heartbeats (all AES-128, with associated data),
// which pin the block formatting, the associated-data length encoding
// (C.4 uses the 0xfffe form) and the counter blocks independently of
// this package's own encryptor.
func TestCCMKnownAnswers(t *testing.T) {
	nistKey := "404142434445464748494a4b4c4d4e4f"
	rfcKey := "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
	bigAD := bytes.Repeat(seq(0, 256), 256) // 65536 bytes (Alen = 524288 bits)
	for _, tt := range []struct {
		name, key, nonce string
		ad, plaintext    []byte
		tag              int
		want             string
	}{
		{"SP800-38C C.1", nistKey, "10111213141516", seq(0, 8), seq(0x20, 4), 4,
			"7162015b4dac255d"},
		{"SP800-38C C.2", nistKey, "1011121314151617", seq(0, 16), seq(0x20, 16), 6,
			"d2a1f0e051ea5f62081a7792073d593d1fc64fbfaccd"},
		{"SP800-38C C.3", nistKey, "101112131415161718191a1b", seq(0, 20), seq(0x20, 24), 8,
			"e3b201a9f5b71a7a9b1ceaeccd97e70b6176aad9a4428aa5484392fbc1b09951"},
		{"SP800-38C C.4", nistKey, "101112131415161718191a1b1c", bigAD, seq(0x20, 32), 14,
			"69915dad1e84c6376a68c2967e4dab615ae0fd1faec44cc484828529463ccf72b4ac6bec93e8598e7f0dadbcea5b"},
		{"RFC 3610 packet 1", rfcKey, "00000003020100a0a1a2a3a4a5", seq(0, 8), seq(8, 23), 8,
			"588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0"},
		{"RFC 3610 packet 2", rfcKey, "00000004030201a0a1a2a3a4a5", seq(0, 8), seq(8, 24), 8,
			"72c91a36e135f8cf291ca894085c87e3cc15c439c9e43a3ba091d56e10400916"},
		{"RFC 3610 packet 3", rfcKey, "00000005040302a0a1a2a3a4a5", seq(0, 8), seq(8, 25), 8,
			"51b1e5f44a197d1da46b0f8e2d282ae871e838bb64da8596574adaa76fbd9fb0c5"},
		{"RFC 3610 packet 4", rfcKey, "00000006050403a0a1a2a3a4a5", seq(0, 12), seq(12, 19), 8,
			"a28c6865939a9a79faaa5c4c2a9d4a91cdac8c96c861b9c9e61ef1"},
		{"RFC 3610 packet 7", rfcKey, "00000009080706a0a1a2a3a4a5", seq(0, 8), seq(8, 23), 10,
			"0135d1b2c95f41d5d1d4fec185d166b8094e999dfed96c048c56602c97acbb7490"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			block, err := aes.NewCipher(unhex(t, tt.key))
			if err != nil {
				t.Fatal(err)
			}
			nonce := unhex(t, tt.nonce)
			c, err := newCCM(block, len(nonce), tt.tag)
			if err != nil {
				t.Fatalf("newCCM: %v", err)
			}
			got := c.Seal(nil, nonce, tt.plaintext, tt.ad)
			if hex.EncodeToString(got) != tt.want {
				t.Fatalf("Seal = %x, want %s", got, tt.want)
			}
			pt, err := c.Open(nil, nonce, got, tt.ad)
			if err != nil || !bytes.Equal(pt, tt.plaintext) {
				t.Fatalf("Open = %x, %v; want %x", pt, err, tt.plaintext)
			}
			// Every single-bit change of ciphertext, tag or associated data fails.
			for _, i := range []int{0, len(got) - tt.tag - 1, len(got) - tt.tag, len(got) - 1} {
				bad := bytes.Clone(got)
				bad[i] ^= 1
				if _, err := c.Open(nil, nonce, bad, tt.ad); err == nil {
					t.Errorf("Open with byte %d flipped succeeded", i)
				}
			}
			badAD := bytes.Clone(tt.ad)
			badAD[len(badAD)-1] ^= 0x80
			if _, err := c.Open(nil, nonce, got, badAD); err == nil {
				t.Error("Open with altered associated data succeeded")
			}
		})
	}
}

func TestCCMInPlaceAndAppend(t *testing.T) {
	block, _ := aes.NewCipher(seq(0, 32))
	c, err := newCCM(block, 11, 12)
	if err != nil {
		t.Fatal(err)
	}
	nonce := seq(0xa0, 11)
	plain := seq(1, 50)
	want := c.Seal(nil, nonce, plain, nil)

	buf := make([]byte, len(plain), len(plain)+c.Overhead())
	copy(buf, plain)
	if got := c.Seal(buf[:0], nonce, buf, nil); !bytes.Equal(got, want) {
		t.Errorf("in-place Seal = %x, want %x", got, want)
	}
	prefix := []byte("prefix")
	if got := c.Seal(bytes.Clone(prefix), nonce, plain, nil); !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
		t.Errorf("appending Seal = %x, want prefix + %x", got, want)
	}
	ct := bytes.Clone(want)
	if got, err := c.Open(ct[:0], nonce, ct, nil); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("in-place Open = %x, %v; want %x", got, err, plain)
	}
	// A failed Open must not leave unauthenticated plaintext behind.
	ct = bytes.Clone(want)
	ct[0] ^= 1
	out := make([]byte, 0, len(ct))
	if _, err := c.Open(out, nonce, ct, nil); err == nil {
		t.Fatal("Open of a tampered message succeeded")
	}
	if leaked := out[:len(plain)]; !bytes.Equal(leaked, make([]byte, len(plain))) {
		t.Errorf("failed Open left %x in dst", leaked)
	}
}

func TestCCMLengthLimit(t *testing.T) {
	block, _ := aes.NewCipher(seq(0, 32))
	c, err := newCCM(block, 13, 16) // L = 2: at most 65535 bytes
	if err != nil {
		t.Fatal(err)
	}
	if got := c.maxLen(); got != 65535 {
		t.Fatalf("maxLen() = %d, want 65535", got)
	}
	nonce := seq(0xa0, 13)
	plain := make([]byte, 65535)
	ct := c.Seal(nil, nonce, plain, nil)
	if got, err := c.Open(nil, nonce, ct, nil); err != nil || len(got) != len(plain) {
		t.Fatalf("Open of a 65535-byte message = %d bytes, %v", len(got), err)
	}
	longer := append(ct, 0) // claims 65536 bytes of plaintext
	if _, err := c.Open(nil, nonce, longer, nil); err == nil {
		t.Error("Open beyond the length field succeeded")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Seal of 65536 bytes did not panic")
			}
		}()
		c.Seal(nil, nonce, make([]byte, 65536), nil)
	}()
}

func TestNewCCMRejects(t *testing.T) {
	block, _ := aes.NewCipher(seq(0, 32))
	for _, tt := range []struct{ nonce, tag int }{{6, 16}, {14, 16}, {12, 3}, {12, 5}, {12, 18}, {12, 2}} {
		if _, err := newCCM(block, tt.nonce, tt.tag); err == nil {
			t.Errorf("newCCM(nonce %d, tag %d) succeeded", tt.nonce, tt.tag)
		}
	}
}
