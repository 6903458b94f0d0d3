package spoolfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-sinks/nats-sink/internal/intake"
	"github.com/nats-sinks/nats-sink/internal/jsonx"
	"github.com/nats-sinks/nats-sink/internal/record"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/shapestest"
	"github.com/nats-sinks/nats-sink/sink"
)

// The four reference files of docs/spool.md (Compatibility), V1–V4, were produced by upstream
// 0.4.2's own record code; testdata holds V1, V2 and V4 verbatim, V3 is
// pinned by its size and SHA-256.

var (
	goldenSpooled = time.Date(2026, 5, 29, 10, 0, 0, 300000000, time.UTC)
	goldenKey     = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
)

// goldenEnvelope is the data-shapes golden message as upstream's vector
// generator built it: delivered to consumer orders-spool, with no reply
// subject.
func goldenEnvelope() *sink.Envelope {
	e := shapestest.Golden()
	e.Consumer = "orders-spool"
	e.Reply = ""
	return e
}

// headersOnly is V4's input: subject audit.login, Nats-Msg-Id A-7,
// Nats-Msg-Size 2048, empty body, no JetStream metadata.
func headersOnly() *sink.Envelope {
	return intake.Build(intake.Message{
		Subject: "audit.login",
		Header:  map[string][]string{"Nats-Msg-Id": {"A-7"}, "Nats-Msg-Size": {"2048"}},
	}, nil, shapestest.Received)
}

// nonces yields the bytes a0, a1, … forever.
type nonces struct{ next byte }

func (n *nonces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0xa0 + n.next
		n.next++
	}
	return len(p), nil
}

func goldenSeal(t *testing.T) *seal.Settings {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	return &seal.Settings{Algorithm: seal.AES256GCM, KeyID: "edge-spool-2026-05", Key: key, NonceSize: 12, TagLength: 16}
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestGoldenVectors(t *testing.T) {
	for _, tt := range []struct {
		name      string
		e         *sink.Envelope
		enc       func(t *testing.T) Encoder
		spooled   time.Time
		file      string
		size      int
		sum       string
		wantName  string
		wantRank  int
		plainSize int
		plainSum  string
	}{
		{
			name: "V1 plaintext compact", e: goldenEnvelope(), spooled: goldenSpooled,
			enc:  func(*testing.T) Encoder { return Encoder{PayloadMode: record.JSONOrEnvelope} },
			file: "v1.spool.json", size: 1344, sum: "4bd2ce25acd96f812fc3db1f57dd104e146f2d4f9239ff98e40f456485d98723",
			wantName: "622260921346156f43572a73c75ac7553c1c48059298561a5aa37a0011360e5b.spool.json", wantRank: 3,
		},
		{
			name: "V2 encrypted", e: goldenEnvelope(), spooled: goldenSpooled,
			enc: func(t *testing.T) Encoder {
				return Encoder{PayloadMode: record.JSONOrEnvelope, Seal: goldenSeal(t), Random: &nonces{}}
			},
			file: "v2.spool.json", size: 2110, sum: "1701b7b6c31af70135211856971622af42ff5578e243c357a7fb6a90a46b6800",
			wantName: "622260921346156f43572a73c75ac7553c1c48059298561a5aa37a0011360e5b.spool.json", wantRank: 3,
			plainSize: 1105, plainSum: "3a346181a831442258606e86abab7dac78379d499ecee1785cc786290872f603",
		},
		{
			name: "V3 metadata pretty", e: goldenEnvelope(), spooled: goldenSpooled,
			enc: func(*testing.T) Encoder {
				return Encoder{PayloadMode: record.JSONOrEnvelope, IncludeMetadata: true, Pretty: true}
			},
			size: 4359, sum: "195878217a66686a0ac915042b8332a0b3b88da5486c6a024eabab85b0218f71",
			wantName: "622260921346156f43572a73c75ac7553c1c48059298561a5aa37a0011360e5b.spool.json", wantRank: 3,
		},
		{
			name: "V4 headers-only", e: headersOnly(), spooled: time.Date(2026, 5, 29, 10, 0, 1, 0, time.UTC),
			enc:  func(*testing.T) Encoder { return Encoder{PayloadMode: record.JSONOrEnvelope} },
			file: "v4.spool.json", size: 1195, sum: "a73fc7514749f660cc300c0297ef795f7ed39bae3ddda905f54dc2e851571d1d",
			wantName: "1eba6b2ce0846864a82912f6326d5db6b5a71ff80761a70d7af01b906886e36e.spool.json", wantRank: 6,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.enc(t).Encode(tt.e, tt.spooled)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if f.Name != tt.wantName {
				t.Errorf("name = %s, want %s", f.Name, tt.wantName)
			}
			if tt.file != "" {
				if want := readTestdata(t, tt.file); !bytes.Equal(f.Data, want) {
					t.Errorf("file differs from the vector (-want +got):\n%s", cmp.Diff(string(want), string(f.Data)))
				}
			}
			if len(f.Data) != tt.size || sha(f.Data) != tt.sum {
				t.Errorf("file is %d bytes, sha256 %s; want %d bytes, %s", len(f.Data), sha(f.Data), tt.size, tt.sum)
			}
			w, err := ParseWrapper(f.Name, f.Data)
			if err != nil {
				t.Fatalf("ParseWrapper: %v", err)
			}
			if w.Rank != int64(tt.wantRank) || w.SpooledAtNS != EpochNS(tt.spooled) {
				t.Errorf("rank, time = %d, %d; want %d, %d", w.Rank, w.SpooledAtNS, tt.wantRank, EpochNS(tt.spooled))
			}
			if tt.plainSum != "" {
				s := goldenSeal(t)
				plain, err := seal.Decrypt(marshalEncrypted(t, w), seal.FixedKeyRing(seal.Key{Secret: [32]byte(s.Key)}))
				if err != nil {
					t.Fatalf("Decrypt: %v", err)
				}
				if len(plain) != tt.plainSize || sha(plain) != tt.plainSum {
					t.Errorf("plaintext is %d bytes, sha256 %s; want %d, %s", len(plain), sha(plain), tt.plainSize, tt.plainSum)
				}
			}
		})
	}
}

// TestSplicedWrapper: the compact encrypted wrapper spliced around the
// envelope bytes equals the one encoded from the parsed envelope, and an
// envelope whose key id is not ASCII takes the encoding path (its ascii
// escapes become literal characters in the utf8 wrapper).
func TestSplicedWrapper(t *testing.T) {
	for _, keyID := range []string{"edge-spool-2026-05", "kanten-schlüssel"} {
		s := goldenSeal(t)
		s.KeyID = keyID
		f, err := Encoder{Seal: s, Random: &nonces{}}.Encode(goldenEnvelope(), goldenSpooled)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ParseWrapper(f.Name, f.Data)
		if err != nil {
			t.Fatal(err)
		}
		want := append(jsonx.Marshal(w.doc, jsonx.UTF8), '\n')
		if !bytes.Equal(f.Data, want) {
			t.Errorf("key id %q: wrapper is not its canonical encoding (-want +got):\n%s", keyID, cmp.Diff(string(want), string(f.Data)))
		}
		if !bytes.Contains(f.Data, []byte(`"key_id":"`+keyID+`"`)) {
			t.Errorf("key id %q not written literally", keyID)
		}
	}
}
