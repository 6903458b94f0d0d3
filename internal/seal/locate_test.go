package seal

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-sinks/nats-sink/internal/jsonx"
)

func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLocate(t *testing.T) {
	env := []byte(specVectors[0].want) // decrypts to {"order_id":"O-1001"}
	envValue, err := jsonx.Parse(env)
	if err != nil {
		t.Fatal(err)
	}
	other := []byte(specVectors[1].want) // decrypts to x
	otherValue, _ := jsonx.Parse(other)
	b64 := base64.StdEncoding.EncodeToString

	// A file record as the file sink writes it (docs/formats.md#file-records), pretty,
	// with the envelope stored as the payload object.
	fileRecord := jsonx.MarshalPretty(map[string]any{
		"schema": "nats_sinks.file.message.v1", "schema_version": 1, "subject": "orders.created",
		"stream": "ORDERS", "stream_sequence": 42, "payload": envValue,
		"payload_info": map[string]any{"original_format": "json", "wrapped": false},
	}, jsonx.UTF8)
	fileRecord = append(fileRecord, '\n')
	// A DLQ body (docs/formats.md#dlq-body): payload_base64 holds the envelope, and
	// payload is the metadata payload document, which has no envelope.
	dlqBody := jsonx.Marshal(map[string]any{
		"subject": "orders.created", "error_type": "PermanentSinkError",
		"payload":        map[string]any{"present": true, "omitted": false, "delivered_size_bytes": len(env)},
		"payload_base64": b64(env),
	}, jsonx.ASCII)
	textWrapped := jsonx.Marshal(map[string]any{"payload": map[string]any{
		"_nats_sinks": map[string]any{"payload_encoding": "utf-8", "payload_format": "text"}, "payload": string(env)}}, jsonx.UTF8)
	bytesWrapped := jsonx.Marshal(map[string]any{"payload": map[string]any{
		"_nats_sinks": map[string]any{"payload_encoding": "base64", "payload_format": "bytes"}, "payload": b64(env)}}, jsonx.UTF8)

	for _, tt := range []struct {
		name string
		in   []byte
		want string // plaintext after Locate + Decrypt
	}{
		{"raw envelope", env, `{"order_id":"O-1001"}`},
		{"raw envelope with whitespace", append(append([]byte(" \n"), env...), '\n'), `{"order_id":"O-1001"}`},
		{"file record", fileRecord, `{"order_id":"O-1001"}`},
		{"gzip file record", gz(t, fileRecord), `{"order_id":"O-1001"}`},
		{"dlq body", dlqBody, `{"order_id":"O-1001"}`},
		{"gzip dlq body", gz(t, dlqBody), `{"order_id":"O-1001"}`},
		{"text-envelope payload", textWrapped, `{"order_id":"O-1001"}`},
		{"bytes-envelope payload", bytesWrapped, `{"order_id":"O-1001"}`},
		{"root wins over payload", jsonx.Marshal(map[string]any{EnvelopeKey: envValue.(map[string]any)[EnvelopeKey], "payload": otherValue}, jsonx.ASCII), `{"order_id":"O-1001"}`},
		{"payload wins over payload_base64", jsonx.Marshal(map[string]any{"payload": envValue, "payload_base64": b64(other)}, jsonx.ASCII), `{"order_id":"O-1001"}`},
		{"payload without envelope falls through", jsonx.Marshal(map[string]any{"payload": map[string]any{"a": 1}, "payload_base64": b64(other)}, jsonx.ASCII), "x"},
		{"envelope key with a non-object value falls through", jsonx.Marshal(map[string]any{EnvelopeKey: "x", "payload": otherValue}, jsonx.ASCII), "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := Locate(tt.in)
			if err != nil {
				t.Fatalf("Locate: %v", err)
			}
			got, err := Decrypt(loc, testKeyRing(t, "orders-2026-05", "k"))
			if err != nil || string(got) != tt.want {
				t.Errorf("Decrypt(Locate(…)) = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLocateNoEnvelope(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"not json", []byte("hello")},
		{"array", []byte(`[1]`)},
		{"plain object", []byte(`{"order_id":"O-1001"}`)},
		{"payload string", []byte(`{"payload":"{\"_nats_sinks_encryption\":{}}"}`)},
		{"payload_base64 of non-json", []byte(`{"payload_base64":"` + b64([]byte("plain")) + `"}`)},
		{"payload_base64 of json without envelope", []byte(`{"payload_base64":"` + b64([]byte(`{"a":1}`)) + `"}`)},
		{"payload_base64 not base64", []byte(`{"payload_base64":"*"}`)},
		{"unknown wrapper encoding", []byte(`{"payload":{"_nats_sinks":{"payload_encoding":"hex"},"payload":"7b7d"}}`)},
		{"gzip of plain text", gz(t, []byte("plain"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Locate(tt.in)
			if !errors.Is(err, ErrNoEnvelope) || err.Error() != ErrNoEnvelope.Error() {
				t.Errorf("Locate error = %v, want %v", err, ErrNoEnvelope)
			}
		})
	}
}

func TestLocateGzipErrors(t *testing.T) {
	corrupt := gz(t, []byte(specVectors[0].want))
	corrupt = corrupt[:len(corrupt)-6] // cut into the trailer
	if _, err := Locate(corrupt); err == nil || !strings.HasPrefix(err.Error(), "decompress gzip input: ") {
		t.Errorf("Locate(truncated gzip) error = %v, want a decompress error", err)
	}
	if _, err := Locate([]byte{0x1f, 0x8b, 0x00}); err == nil || !strings.HasPrefix(err.Error(), "decompress gzip input: ") {
		t.Errorf("Locate(bad gzip header) error = %v", err)
	}
	env := []byte(specVectors[0].want)
	if _, err := locate(gz(t, env), len(env)); err != nil {
		t.Errorf("locate(gzip of exactly the limit): %v", err)
	}
	_, err := locate(gz(t, append(env, ' ')), len(env))
	if want := fmt.Sprintf("decompressed input exceeds the %d byte limit", len(env)); err == nil || err.Error() != want {
		t.Errorf("locate(gzip of limit+1 bytes) error = %v, want %q", err, want)
	}
	_, err = locate(append(env, ' '), len(env))
	if want := fmt.Sprintf("input exceeds the %d byte limit", len(env)); err == nil || err.Error() != want {
		t.Errorf("locate(limit+1 bytes) error = %v, want %q", err, want)
	}
	if MaxInput != 64<<20 {
		t.Errorf("MaxInput = %d, want 64 MiB (docs/security.md#payload-encryption-keys)", MaxInput)
	}
}
