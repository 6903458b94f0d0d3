package apisurface

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportHygiene checks that a program importing the sink contract and one
// sink pulls in no other sink's driver and no embedded NATS server: library
// users pay only for what they use (docs/library.md).
func TestImportHygiene(t *testing.T) {
	drivers := map[string]string{
		"file":     "",
		"sqlite":   "modernc.org/sqlite",
		"postgres": "github.com/jackc/pgx/v5",
		"mysql":    "github.com/go-sql-driver/mysql",
		"oracle":   "github.com/sijms/go-ora/v2",
		"http":     "",
		"nats":     "",
		"s3":       "github.com/aws/aws-sdk-go-v2",
		"kafka":    "github.com/twmb/franz-go",
		"redis":    "github.com/redis/go-redis/v9",
		"rabbitmq": "github.com/rabbitmq/amqp091-go",
		"mqtt":     "github.com/eclipse/paho.golang",
	}
	always := []string{"github.com/nats-io/nats-server/v2", "github.com/nats-sinks/nats-sink/cli",
		"github.com/nats-sinks/nats-sink/sinks/builtin"}
	out, err := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", "github.com/nats-sinks/nats-sink/sinks/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var sinks []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		_, path, _ := strings.Cut(line, " ")
		name := strings.TrimPrefix(path, "github.com/nats-sinks/nats-sink/sinks/")
		if name == "builtin" || name == "sqlmodel" || strings.Contains(name, "/") {
			continue // the registry, the shared SQL model, test helpers
		}
		if _, ok := drivers[name]; !ok {
			t.Errorf("sinks/%s is not in this test's driver table: add it", name)
			continue
		}
		sinks = append(sinks, name)
	}
	for _, name := range sinks {
		own := drivers[name]
		pkg := "github.com/nats-sinks/nats-sink/sinks/" + name
		out, err := exec.Command("go", "list", "-deps", "github.com/nats-sinks/nats-sink/sink",
			"github.com/nats-sinks/nats-sink/runner", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for other, driver := range drivers {
			if other == name || driver == "" || driver == own {
				continue
			}
			for _, d := range deps {
				if d == driver || strings.HasPrefix(d, driver+"/") {
					t.Errorf("importing sinks/%s pulls in %s (driver of sinks/%s)", name, d, other)
					break
				}
			}
		}
		for _, forbidden := range always {
			for _, d := range deps {
				if d == forbidden || strings.HasPrefix(d, forbidden+"/") {
					t.Errorf("importing sinks/%s pulls in %s", name, d)
					break
				}
			}
		}
	}
}
