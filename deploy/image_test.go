package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-sinks/nats-sink/internal/natstest"
)

// podmanRun returns the arguments every `podman run` of the tests starts
// with. On this machine kind crun fails on rlimits and hybrid cgroups, so
// runc is used where installed, with explicit limits.
func podmanRun() []string {
	args := []string{"run", "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"}
	if _, err := exec.LookPath("runc"); err == nil {
		args = append(args, "--runtime", "runc")
	}
	return args
}

// TestContainerImage builds the image with scripts/image, checks its
// configuration (non-root numeric user, entrypoint, OCI labels), runs
// `version` and `demo` in it, and then a real pipeline: the container
// consumes from a JetStream server on the host (host network), writes
// files into a mounted volume, and acknowledges them; SIGTERM stops it
// with exit 0.
func TestContainerImage(t *testing.T) {
	podman := requireTool(t, "podman", "Debian package podman; .ci/run installs it")
	const tag = "localhost/nats-sink:deploy-test"
	build := exec.Command("../scripts/image", tag)
	build.Env = append(os.Environ(), "VERSION=9.9.9-test", "COMMIT=0123456789abcdef0123456789abcdef01234567",
		"CREATED=2026-01-02T03:04:05Z", "NATS_SINKS_IMAGE_TOOL=podman")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", tag).Run() })

	var inspect []struct {
		Size   int64
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Labels     map[string]string
			Volumes    map[string]struct{}
		}
	}
	if err := json.Unmarshal([]byte(run(t, ".", podman, "image", "inspect", tag)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	c := inspect[0].Config
	t.Logf("image %s: %.1f MB", tag, float64(inspect[0].Size)/1e6)
	if c.User != "65532:65532" {
		t.Errorf("User = %q, want the numeric non-root 65532:65532", c.User)
	}
	if strings.Join(c.Entrypoint, " ") != "nats-sink" || strings.Join(c.Cmd, " ") != "run /etc/nats-sink/config.json" {
		t.Errorf("Entrypoint %q Cmd %q", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("Volumes = %v, want /data", c.Volumes)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  "9.9.9-test",
		"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
		"org.opencontainers.image.source":   "https://github.com/nats-sinks/nats-sink",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	out := run(t, ".", podman, append(podmanRun(), "--rm", tag, "version")...)
	if !strings.Contains(out, "nats-sink 9.9.9-test") || !strings.Contains(out, "commit 0123456789abcdef") {
		t.Errorf("version in the container:\n%s", out)
	}
	out = run(t, ".", podman, append(podmanRun(), "--rm", tag, "demo")...)
	if !strings.Contains(out, "dead-lettered 2") {
		t.Errorf("demo in the container:\n%s", out)
	}

	// A real pipeline against a server on the host.
	srv := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, srv)
	natstest.CreateStream(t, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	const n = 50
	natstest.PublishN(t, js, "orders.created", n, func(i int) []byte { return fmt.Appendf(nil, `{"order":%d}`, i) })

	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, 65532, 65532); err != nil {
		// Not root: let the container's user write anyway.
		os.Chmod(data, 0o777)
	}
	metricsPort := freePort(t)
	config := filepath.Join(dir, "config.json")
	doc := fmt.Sprintf(`{
  "nats": {"url": %q, "stream": "ORDERS", "consumer": "orders-file", "subject": "orders.>"},
  "consumer_management": {"mode": "create_if_missing"},
  "delivery": {"batch_size": 20, "batch_timeout_ms": 200},
  "metrics": {"enabled": true, "listen": "127.0.0.1:%d"},
  "sink": {"type": "file", "directory": "/data/events"}
}`, srv.ClientURL(), metricsPort)
	if err := os.WriteFile(config, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("nats-sink-deploy-test-%d", os.Getpid())
	args := append(podmanRun(), "-d", "--name", name, "--network", "host",
		"-v", config+":/etc/nats-sink/config.json:ro", "-v", data+":/data", tag)
	run(t, ".", podman, args...)
	t.Cleanup(func() { exec.Command(podman, "rm", "-f", "-t", "0", name).Run() })
	logs := func() string { out, _ := exec.Command(podman, "logs", name).CombinedOutput(); return string(out) }

	ctx := context.Background()
	waitFor(t, 60*time.Second, "every message acknowledged", func() error {
		c, err := js.Consumer(ctx, "ORDERS", "orders-file")
		if err != nil {
			return fmt.Errorf("%w\nlogs:\n%s", err, logs())
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.AckFloor.Stream != n || info.NumAckPending != 0 {
			return fmt.Errorf("ack floor %d, %d pending", info.AckFloor.Stream, info.NumAckPending)
		}
		return nil
	})
	var files int
	filepath.WalkDir(filepath.Join(data, "events"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files++
		}
		return nil
	})
	if files != n {
		t.Errorf("record files in the mounted volume = %d, want %d", files, n)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", metricsPort))
	if err != nil {
		t.Fatalf("/readyz of the container: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d, want 200", resp.StatusCode)
	}

	run(t, ".", podman, "stop", "-t", "30", name)
	code := strings.TrimSpace(run(t, ".", podman, "inspect", "--format", "{{.State.ExitCode}}", name))
	if code != "0" {
		t.Errorf("exit code after podman stop (SIGTERM) = %s, want 0\nlogs:\n%s", code, logs())
	}
	if l := logs(); !strings.Contains(l, "Shutdown requested.") {
		t.Errorf("container output lacks \"Shutdown requested.\":\n%s", l)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
