package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/custody"
	"github.com/nats-sinks/nats-sink/sinks/file"
)

const verifyCustodyUsage = "CONFIG [--dir DIR] [--limit N] [--json]"

// maxRecordFile bounds one record file read by verify-custody.
const maxRecordFile = 256 << 20

// custodyRecord is one record read back for verification.
type custodyRecord struct {
	name string
	v    custody.Verification
}

// runVerifyCustody re-computes the custody hashes of every record a file
// sink stored (docs/integrity.md#verifying-stored-records) and checks the
// chain links among them. Exit 0 when all verify, 1 when any failed.
func runVerifyCustody(env *Env, args []string) int {
	fset := newFlags(env, "verify-custody", verifyCustodyUsage)
	dir := fset.String("dir", "", "verify the records under DIR instead of the configured directory")
	limit := fset.Int("limit", 0, "stop after N records (0 = all)")
	asJSON := fset.Bool("json", false, "print one JSON object per failed record, then the summary object")
	pos, code := parseFlags(env, fset, args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 || *limit < 0 {
		fset.Usage()
		return exitConfig
	}
	cfg, code := loadConfig(env, pos[0])
	if cfg == nil {
		return code
	}
	fc, ok := cfg.Sink.Opener.(file.Config)
	if cfg.Sink.Type != "file" || !ok {
		fmt.Fprintf(env.Stderr, "Configuration error: verify-custody reads file sink directories; sink.type %q is not supported\n", cfg.Sink.Type)
		return exitConfig
	}
	root := fc.Directory
	if *dir != "" {
		root = *dir
	}
	records, err := readCustodyRecords(root, *limit)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Runtime error: %v\n", err)
		return exitRuntime
	}

	// Chain links: a record names its predecessor by the record_hash that
	// predecessor carries. When that predecessor is among the records read
	// and no longer verifies, the link is broken too.
	stored := map[string]*custodyRecord{}
	for i := range records {
		if h := records[i].v.RecordHash; h != "" {
			stored[h] = &records[i]
		}
	}
	var withCustody, chained, failed int
	report := func(name, kind, field string) {
		failed++
		if *asJSON {
			obj := map[string]any{"record": name, "failure": kind}
			if field != "" {
				obj["field"] = field
			}
			b, _ := json.Marshal(obj)
			fmt.Fprintln(env.Stdout, string(b))
			return
		}
		if field != "" {
			fmt.Fprintf(env.Stderr, "Custody %s: %s: %s\n", kind, name, field)
		} else {
			fmt.Fprintf(env.Stderr, "Custody %s: %s\n", kind, name)
		}
	}
	for i := range records {
		r := &records[i]
		switch {
		case r.v.Err != nil:
			report(r.name, "unreadable", r.v.Err.Error())
			continue
		case !r.v.HasCustody:
			if cfg.Custody.Enabled {
				report(r.name, "missing", "")
			}
			continue
		}
		withCustody++
		mismatches := r.v.Mismatches
		if prev := r.v.PreviousRecordHash; prev != "" {
			chained++
			if p, ok := stored[prev]; ok && len(p.v.Mismatches) > 0 {
				mismatches = append(mismatches, "previous_record_hash")
			}
		}
		if len(mismatches) > 0 {
			report(r.name, "mismatch", strings.Join(mismatches, ","))
		}
	}
	summary := fmt.Sprintf("Custody verified: records=%d with_custody=%d chained=%d failed=%d", len(records), withCustody, chained, failed)
	if *asJSON {
		b, _ := json.Marshal(map[string]any{"records": len(records), "with_custody": withCustody, "chained": chained, "failed": failed})
		fmt.Fprintln(env.Stdout, string(b))
	} else {
		fmt.Fprintln(env.Stdout, summary)
	}
	if failed > 0 {
		return exitRuntime
	}
	return exitOK
}

// readCustodyRecords reads every record file under root, in path order,
// skipping hidden entries (temporary files, the quarantine and health-check
// files of the sink).
func readCustodyRecords(root string, limit int) ([]custodyRecord, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, err
	}
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]custodyRecord, 0, len(names))
	for _, path := range names {
		rel, _ := filepath.Rel(root, path)
		data, err := readRecordFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, custodyRecord{name: filepath.ToSlash(rel), v: custody.VerifyFileRecord(data)})
	}
	return out, nil
}

// readRecordFile reads one record, decompressing a gzip file.
func readRecordFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxRecordFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
