package deploy_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRelease runs scripts/release for one target with --verify (which
// builds everything twice and fails unless the two are byte-identical), and
// checks what it produced: a reproducible archive (sorted names, one fixed
// mtime, owner 0) holding the stamped binary and the licence files, a
// CycloneDX SBOM of that binary, and SHA256SUMS that match.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release twice")
	}
	out := t.TempDir()
	const (
		version = "1.2.3-test"
		commit  = "89abcdef0123456789abcdef0123456789abcdef"
		epoch   = 1767323045 // 2026-01-02T03:04:05Z
	)
	cmd := exec.Command("../scripts/release", version, "--verify")
	cmd.Env = append(os.Environ(), "RELEASE_TARGETS=linux/amd64", "RELEASE_OUT="+out,
		"COMMIT="+commit, fmt.Sprintf("SOURCE_DATE_EPOCH=%d", epoch))
	start := time.Now()
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	t.Logf("scripts/release --verify (two builds of linux/amd64 with SBOM): %.0f s", time.Since(start).Seconds())
	if !strings.Contains(string(b), "second build is byte-identical") {
		t.Errorf("scripts/release did not report the byte-identical check:\n%s", b)
	}

	name := "nats-sink_" + version + "_linux_amd64"
	archive := filepath.Join(out, name+".tar.gz")
	sbom := filepath.Join(out, name+".cdx.json")

	// SHA256SUMS lists both files with their digests.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range []string{archive, sbom} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		want[filepath.Base(f)] = hex.EncodeToString(sum[:])
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			got[f[1]] = f[0]
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SHA256SUMS (-want +got):\n%s", diff)
	}

	// The archive.
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header carries name %q and time %v; want neither (gzip -n)", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	bin := filepath.Join(t.TempDir(), "nats-sink")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" && h.Uname != "root" || !h.ModTime.Equal(time.Unix(epoch, 0)) {
			t.Errorf("%s: owner %d:%d (%q) mtime %v; want 0:0 and the commit time", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		if h.Name == name+"/nats-sink" {
			if h.Mode&0o111 == 0 {
				t.Errorf("binary mode %o is not executable", h.Mode)
			}
			w, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(w, tr)
			w.Close()
		}
	}
	wantNames := []string{name + "/", name + "/LICENSE", name + "/NOTICE", name + "/README.md", name + "/THIRD_PARTY_LICENSES", name + "/nats-sink"}
	if !sort.StringsAreSorted(names) {
		t.Errorf("archive entries not sorted: %q", names)
	}
	sort.Strings(wantNames)
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("archive entries (-want +got):\n%s", diff)
	}

	// The binary reports the stamped version, commit and time.
	v, err := exec.Command(bin, "version", "--format", "json").Output()
	if err != nil {
		t.Fatalf("released binary: %v", err)
	}
	var info map[string]any
	if err := json.Unmarshal(v, &info); err != nil {
		t.Fatalf("version --format json: %v: %s", err, v)
	}
	for k, w := range map[string]string{"version": version, "commit": commit, "build_time": "2026-01-02T03:04:05Z"} {
		if info[k] != w {
			t.Errorf("version %s = %v, want %s", k, info[k], w)
		}
	}

	// The SBOM describes this binary's modules.
	data, err := os.ReadFile(sbom)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			PURL    string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("SBOM: %v", err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != "v"+version {
		t.Errorf("SBOM format %q, main component %+v", bom.BOMFormat, bom.Metadata.Component)
	}
	components := map[string]string{}
	for _, c := range bom.Components {
		components[c.Name] = c.Version
	}
	for _, m := range []string{"github.com/nats-io/nats.go", "github.com/jackc/pgx/v5", "modernc.org/sqlite"} {
		if components[m] == "" {
			t.Errorf("SBOM lacks %s (%d components)", m, len(bom.Components))
		}
	}
	if _, ok := components["helm.sh/helm/v3"]; ok {
		t.Error("SBOM lists helm: the binary must not link the test-only Helm modules")
	}
}

// TestNoticeListsBundledModules checks that NOTICE names every module the
// binary links, at the version it links, and that LICENSE is the Apache
// License 2.0.
func TestNoticeListsBundledModules(t *testing.T) {
	lic, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(lic, []byte("Apache License")) || !bytes.Contains(lic, []byte("Version 2.0, January 2004")) ||
		!bytes.Contains(lic, []byte("END OF TERMS AND CONDITIONS")) {
		t.Error("LICENSE is not the full Apache License 2.0 text")
	}
	notice, err := os.ReadFile("../NOTICE")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(string(notice), "\n") {
		if f := strings.Fields(line); len(f) == 3 && strings.HasPrefix(f[1], "v") {
			listed[f[0]] = f[1]
			if strings.Contains(f[2], "GPL") {
				t.Errorf("NOTICE: %s is under %s; no GPL in the binary", f[0], f[2])
			}
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "../cmd/nats-sink").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			linked[f[0]] = f[1]
		}
	}
	if diff := cmp.Diff(linked, listed); diff != "" {
		t.Errorf("NOTICE's module list differs from what the binary links (-linked +NOTICE):\n%s", diff)
	}
}
